package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/store"
)

// Running tasks per caller: with the project's cap at 3, a key that runs
// a 2025-11-25 task, a 2026-07-28 task and a job is refused a fourth in
// every era, with the number and the project in the message — a tool
// error for a job and at 2026-07-28 (where the server may answer a
// task-augmented call plainly), a JSON-RPC error at 2025-11-25 (where it
// must answer a task or an error). Another key is not held back, and once
// the key cancels one it may start one again.
func TestRunningTasksPerCallerCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.settings = &store.ProjectSettings{MaxRunningTasks: 3} })
	started, quit := make(chan struct{}, 16), make(chan struct{})
	e.startAgent(core.Options{Name: "reports"}, func(a *core.Agent) {
		must(t, core.AddTool(a, "hold", "Runs until stopped; only as a task.", func(ctx context.Context, _ struct{}) (string, error) {
			started <- struct{}{}
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-quit:
				return "Stopped.", nil
			}
		}, core.TaskSupport(core.TaskRequired)))
	})
	t.Cleanup(func() { close(quit) }) // before the agent stops: it waits for its calls
	want := fmt.Sprintf("You have 3 tasks running in project %s; wait for one to finish or cancel one.", e.project.Name)

	old := e.tasksClient(e.clientKey, nil)
	old.start("hold", "{}", `{"ttl":60000}`)
	ext := e.extClient(e.clientKey)
	ext.start("hold", nil)
	plain := e.connect("2025-11-25", e.clientKey, nil)
	m := jobStarted.FindStringSubmatch(text(call(t, plain, "hold", map[string]any{})))
	if m == nil {
		t.Fatal("the plain call of a required-task tool started no job")
	}
	for range 3 {
		receive(t, started, "the three calls to reach the agent")
	}

	if r := call(t, plain, "hold", map[string]any{}); !r.IsError || text(r) != want {
		t.Errorf("a fourth, as a job = %q (isError %v), want the tool error %q", text(r), r.IsError, want)
	}
	a := ext.do(extRequest{method: "tools/call", params: map[string]any{"name": "hold", "arguments": map[string]any{}}})
	if content, _ := a.Result["content"].([]any); a.Error != nil || a.Result["isError"] != true || len(content) != 1 ||
		content[0].(map[string]any)["text"] != want {
		t.Errorf("a fourth at 2026-07-28 = %+v %+v, want an isError result %q", a.Result, a.Error, want)
	}
	if a := old.callAsTask("hold", "{}", `{"ttl":60000}`); a.Error == nil || a.Error.Code != jsonrpc.CodeInvalidRequest || a.Error.Message != want {
		t.Errorf("a fourth at 2025-11-25 = %s %+v, want the JSON-RPC error %d %q", a.Result, a.Error, jsonrpc.CodeInvalidRequest, want)
	}
	select {
	case <-started:
		t.Error("a refused call reached the agent")
	default:
	}

	// Another key has its own three.
	_, other := e.newKey(store.Key{Name: "another client", Kind: store.KindClient, ProjectID: e.project.ID})
	e.extClient(other).start("hold", nil)
	receive(t, started, "the other key's task to reach the agent")

	// The job cancelled, the key may start one again.
	r := call(t, plain, "spacefix_job", map[string]any{"jobId": m[1], "action": "cancel"})
	if r.IsError {
		t.Fatalf("cancel the job: %q", text(r))
	}
	ext.start("hold", nil)
	receive(t, started, "the task after a cancel to reach the agent")
}
