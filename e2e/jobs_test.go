package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/store"
)

// Jobs: a client that does not speak tasks (go-sdk's client, which sends no
// params.task and declares no extension) calls a tool with task support.
// The gateway answers at the call wait with a job reference, and its own
// tool spacefix_job returns the job's status, its result, or cancels it.

// jobAgent is an agent whose slow_report runs until released (or
// cancelled), saying how far it got.
type jobAgent struct {
	release   chan struct{} // a send: a slow_report returns
	cancelled chan struct{} // closed by slow_report when its context ended
}

func startJobAgent(e *env) *jobAgent {
	ja := &jobAgent{release: make(chan struct{}, 1), cancelled: make(chan struct{}, 8)}
	type empty struct{}
	e.startAgent(core.Options{Name: "reports"}, func(a *core.Agent) {
		must(e.t, core.AddTool(a, "slow_report", "Builds the report; slow.", func(ctx context.Context, _ empty) (string, error) {
			core.Progress(ctx, "Counting orders: 3 of 9 days")
			select {
			case <-ja.release:
				return "Report ready: 1,204 orders.", nil
			case <-ctx.Done():
				ja.cancelled <- struct{}{}
				return "", ctx.Err()
			}
		}, core.TaskSupport(core.TaskOptional)))
		must(e.t, core.AddTool(a, "fast_report", "Builds a small report.", func(ctx context.Context, _ empty) (string, error) {
			return "Small report: 3 orders.", nil
		}, core.TaskSupport(core.TaskOptional)))
	})
	return ja
}

var jobRef = regexp.MustCompile(`^The tool is still running \(job (task_[a-z0-9]+)\)\. Call spacefix_job with \{"jobId": "(task_[a-z0-9]+)"\} to get its result; it is kept for 24 hours after the job ends\.$`)

// jobID returns the job id of a job reference, failing the test if r is
// not one.
func jobID(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	m := jobRef.FindStringSubmatch(text(r))
	if m == nil || r.IsError || m[1] != m[2] {
		t.Fatalf("answer at the wait = %q (isError %v), want a job reference", text(r), r.IsError)
	}
	return m[1]
}

func TestJobs(t *testing.T) {
	e := newEnv(t, func(o *envOptions) { o.settings = &store.ProjectSettings{CallWaitMs: 1000} })
	ja := startJobAgent(e)
	_, otherSecret := e.newKey(store.Key{Name: "someone else", Kind: store.KindClient, ProjectID: e.project.ID})

	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			cs := e.connect(v, e.clientKey, nil)
			if names := toolNames(t, cs); !slices.Contains(names, "spacefix_job") {
				t.Fatalf("tools = %v, want spacefix_job among them", names)
			}

			// A fast optional tool answers plainly.
			if r := call(t, cs, "fast_report", map[string]any{}); r.IsError || text(r) != "Small report: 3 orders." {
				t.Errorf("fast_report = %q (isError %v), want its plain result", text(r), r.IsError)
			}

			// A slow one answers the job reference at the wait, then the
			// job tool says it runs (with its progress), then gives the
			// result once it is there.
			began := time.Now()
			id := jobID(t, call(t, cs, "slow_report", map[string]any{}))
			if took := time.Since(began); took < time.Second || took > 5*time.Second {
				t.Errorf("the job reference came after %v, want the call wait of 1s", took)
			}
			r := call(t, cs, "spacefix_job", map[string]any{"jobId": id})
			if want := fmt.Sprintf(`Job %s (slow_report) is still running, for `, id); r.IsError || !strings.HasPrefix(text(r), want) ||
				!strings.Contains(text(r), `so far: Counting orders: 3 of 9 days. Call spacefix_job with {"jobId": "`+id+`"} again to keep waiting`) {
				t.Errorf("spacefix_job while running = %q (isError %v)", text(r), r.IsError)
			}
			done := make(chan *mcp.CallToolResult, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "spacefix_job", Arguments: map[string]any{"jobId": id, "action": "get"}})
				if err != nil {
					t.Errorf("spacefix_job: %v", err)
				}
				done <- r
			}()
			ja.release <- struct{}{} // while the job tool waits: it answers at once
			if r := <-done; r == nil || r.IsError || text(r) != "Report ready: 1,204 orders." {
				t.Errorf("spacefix_job once ended = %v, want the tool's own result", r)
			}

			// One call in the log, with its task id: the call log is
			// written after the job's end is stored, in the background.
			var logged []store.Call
			waitFor(t, "the job's call in the log", func() bool {
				logged = logged[:0]
				for _, c := range e.calls() {
					if c.TaskID == id {
						logged = append(logged, c)
					}
				}
				return len(logged) > 0
			})
			if len(logged) != 1 || logged[0].Name != "slow_report" || logged[0].Outcome != store.OutcomeOK || !logged[0].Billable {
				t.Errorf("calls logged for job %s = %+v, want one billable slow_report", id, logged)
			}

			// Someone else's job id reads as an unknown one.
			id = jobID(t, call(t, cs, "slow_report", map[string]any{}))
			stranger := e.connect(v, otherSecret, nil)
			theirs := call(t, stranger, "spacefix_job", map[string]any{"jobId": id})
			unknown := call(t, cs, "spacefix_job", map[string]any{"jobId": "task_nosuchjob0000000000000000"})
			const notFound = "No such job: the id is unknown, or the job ended too long ago and its result was deleted. Call the tool again to start a new job."
			if !theirs.IsError || text(theirs) != notFound || !unknown.IsError || text(unknown) != notFound {
				t.Errorf("another key's job: %q; an unknown job: %q; want both %q", text(theirs), text(unknown), notFound)
			}

			// Cancel through the job tool cancels the agent's context.
			r = call(t, cs, "spacefix_job", map[string]any{"jobId": id, "action": "cancel"})
			if want := "Job " + id + " is cancelled; the tool's call was stopped."; r.IsError || text(r) != want {
				t.Errorf("cancel = %q, want %q", text(r), want)
			}
			select {
			case <-ja.cancelled:
			case <-time.After(10 * time.Second):
				t.Fatal("the handler's context did not end after the cancel")
			}
			r = call(t, cs, "spacefix_job", map[string]any{"jobId": id})
			if want := "Job " + id + " was cancelled before it returned a result. Call the tool again if you still need it."; !r.IsError || text(r) != want {
				t.Errorf("a cancelled job = %q, want %q", text(r), want)
			}
		})
	}

	// A client that declared the tasks extension has tasks/get: no job tool.
	ext := e.extClient(e.clientKey)
	res := ext.ok(ext.do(extRequest{method: "tools/list"}), "tools/list")
	tools, _ := res["tools"].([]any)
	var names []string
	for _, tl := range tools {
		names = append(names, fmt.Sprint(tl.(map[string]any)["name"]))
	}
	if slices.Contains(names, "spacefix_job") || !slices.Contains(names, "slow_report") {
		t.Errorf("tools for a client with the tasks extension = %v, want slow_report and no spacefix_job", names)
	}
}

// TestJobToolOnlyWithTaskTools: a project with no tool that may run as a
// task has no job tool.
func TestJobToolOnlyWithTaskTools(t *testing.T) {
	e := newEnv(t)
	e.startAgent(core.Options{Name: "plain"}, func(a *core.Agent) {
		must(e.t, core.AddTool(a, "get_order", "Look up an order.", func(ctx context.Context, _ struct{}) (string, error) {
			return "ok", nil
		}))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		if names := toolNames(t, cs); slices.Contains(names, "spacefix_job") || !slices.Contains(names, "get_order") {
			t.Errorf("tools = %v, want get_order and no spacefix_job", names)
		}
	})
}

// TestJobRequiredAndQuestions: a required-task tool called by a client
// without tasks (a 2025-06-18 session) answers the job reference at once;
// a job's question gets the answer of a client that cannot be asked.
func TestJobRequiredAndQuestions(t *testing.T) {
	e := newEnv(t, func(o *envOptions) { o.settings = &store.ProjectSettings{CallWaitMs: 1000} })
	type empty struct{}
	e.startAgent(core.Options{Name: "jobs"}, func(a *core.Agent) {
		must(e.t, core.AddTool(a, "nightly_export", "Exports everything; runs only as a task.", func(ctx context.Context, _ empty) (string, error) {
			return "Exported 12 tables.", nil
		}, core.TaskSupport(core.TaskRequired)))
		must(e.t, core.AddTool(a, "purge_cache", "Asks, then purges.", func(ctx context.Context, _ empty) (string, error) {
			if _, err := core.Confirm(ctx, "Purge the cache?"); err != nil {
				return "Not purged: " + err.Error(), nil
			}
			return "Purged.", nil
		}, core.TaskSupport(core.TaskOptional)))
	})
	cs := e.connect("2025-06-18", e.clientKey, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			t.Error("a job's question reached the client")
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})

	// The handler returns at once, so only a job reference (not its
	// result) shows the call started a job instead of running plainly.
	r := call(t, cs, "nightly_export", map[string]any{})
	m := regexp.MustCompile(`^The tool runs as a job \(job (task_[a-z0-9]+)\)\. Call spacefix_job with \{"jobId": "task_[a-z0-9]+"\} to get its result; it is kept for 24 hours after the job ends\.$`).FindStringSubmatch(text(r))
	if m == nil || r.IsError {
		t.Fatalf("nightly_export = %q, want the job reference", text(r))
	}
	if got := text(call(t, cs, "spacefix_job", map[string]any{"jobId": m[1]})); got != "Exported 12 tables." {
		t.Errorf("spacefix_job = %q, want the export's result", got)
	}

	got := text(call(t, cs, "purge_cache", map[string]any{}))
	if !strings.HasPrefix(got, "Not purged: ") || !strings.Contains(got, "cannot") {
		t.Errorf("purge_cache as a job = %q, want Confirm's ErrCannotConfirm", got)
	}
}
