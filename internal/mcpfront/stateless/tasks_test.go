package stateless

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/leaktest"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/teststores"
	"github.com/spacefix/spacefix/internal/tasks"
)

// TestMain fails the package's tests when goroutines outlive them.
func TestMain(m *testing.M) { leaktest.Main(m) }

// newTasks is the extension over a real task runtime on SQLite, for one
// project with no agents: what a client is told before any task runs.
func newTasks(t *testing.T) (*Tasks, store.Key) {
	t.Helper()
	ctx := context.Background()
	st := teststores.SQLite(t)
	proj, err := st.CreateProject(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	calls := store.NewCallLog(st, nil)
	t.Cleanup(func() { calls.Close(context.Background()) })
	quiet := slog.New(slog.DiscardHandler)
	tm := tasks.New(tasks.Options{Store: st, Calls: calls, Grants: st, Questions: pipeline.TaskQuestions{}, Log: quiet,
		Settings: func(ctx context.Context, projectID int64) (store.ProjectSettings, error) {
			p, err := st.ProjectByID(ctx, projectID)
			return p.Settings, err
		}})
	if err := tm.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tm.Close() })
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	reg := agents.New(&agents.Options{Logger: quiet})
	x := New(Options{Tasks: tm, Registry: reg, Logger: quiet, Stop: stop,
		Impl: &mcp.Implementation{Name: "spacefix", Version: "test"}})
	return x, store.Key{ID: "key_c", Name: "ci", ProjectID: proj.ID, Kind: store.KindClient, ProjectName: "shop"}
}

const declared = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// post serves one 2026-07-28 request of method (its Mcp-Method header)
// with Mcp-Name name and params, and returns whether the extension took
// it, the HTTP status and the JSON-RPC error it answered.
func post(t *testing.T, x *Tasks, key store.Key, method, name, params string) (taken bool, status int, code int64, msg string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":` + params + `}`
	r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader([]byte(body)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	r.Header.Set("Mcp-Method", method)
	if name != "" {
		r.Header.Set("Mcp-Name", name)
	}
	w := httptest.NewRecorder()
	taken = x.Serve(w, r, wire.Decode([]byte(body)), key)
	var out struct {
		Error *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if taken {
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s: answer %q: %v", method, w.Body, err)
		}
		if out.Error != nil {
			code, msg = out.Error.Code, out.Error.Message
		}
	}
	return taken, w.Code, code, msg
}

// TestExtensionRefusals: what a client is told when a request of the
// extension cannot be served, each with its code, its HTTP status and a
// sentence that says what to do; and a request that is not the
// extension's is left to go-sdk.
func TestExtensionRefusals(t *testing.T) {
	x, key := newTasks(t)
	for _, tc := range []struct {
		name, method, header, params string
		taken                        bool
		status                       int
		code                         int64
		msg                          string
	}{
		{"unknown task", "tasks/get", "task_x", `{"taskId":"task_x","_meta":` + declared + `}`, true, 400, -32602,
			msgExtTaskNotFound},
		{"header names another task", "tasks/get", "task_y", `{"taskId":"task_x","_meta":` + declared + `}`, true, 400, mcp.CodeHeaderMismatch,
			`header mismatch: the Mcp-Name header ("task_y") must be params.taskId ("task_x")`},
		{"no task id", "tasks/cancel", "", `{"_meta":` + declared + `}`, true, 400, -32602,
			"Invalid params: tasks/cancel needs params.taskId, the id of the task."},
		{"extension not declared", "tasks/get", "task_x",
			`{"taskId":"task_x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`,
			true, 400, mcp.CodeMissingRequiredClientCapabilities, ""},
		{"tasks/result is gone", "tasks/result", "task_x", `{"taskId":"task_x","_meta":` + declared + `}`, true, 404, -32601,
			"Method not found: tasks/result is not part of the io.modelcontextprotocol/tasks extension at protocol 2026-07-28; the result is inline in tasks/get."},
		{"update without responses", "tasks/update", "task_x", `{"taskId":"task_x","_meta":` + declared + `}`, true, 400, -32602,
			"Invalid params: tasks/update needs params.inputResponses, an object of responses by the keys of the task's inputRequests."},
		{"_meta names another version", "tasks/get", "task_x",
			`{"taskId":"task_x","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}`,
			false, 0, 0, ""},
		{"a tool without task support", "tools/call", "echo", `{"name":"echo","arguments":{},"_meta":` + declared + `}`, false, 0, 0, ""},
		{"not the extension's", "tools/list", "", `{"_meta":` + declared + `}`, false, 0, 0, ""},
	} {
		taken, status, code, msg := post(t, x, key, tc.method, tc.header, tc.params)
		if taken != tc.taken {
			t.Errorf("%s: taken %v, want %v", tc.name, taken, tc.taken)
			continue
		}
		if !taken {
			continue
		}
		if status != tc.status || code != tc.code || (tc.msg != "" && msg != tc.msg) || msg == "" {
			t.Errorf("%s: %d %d %q, want %d %d %q", tc.name, status, code, msg, tc.status, tc.code, tc.msg)
		}
	}
}
