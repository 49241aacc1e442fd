package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/tasks"
)

// TestJobResult: an ended job answers as the call would have.
func TestJobResult(t *testing.T) {
	for _, c := range []struct {
		name    string
		task    tasks.Task
		text    string
		isError bool
		code    int64 // a JSON-RPC error instead of a result
	}{
		{"completed", tasks.Task{Status: tasks.Completed, Result: json.RawMessage(`{"content":[{"type":"text","text":"Report ready."}]}`)}, "Report ready.", false, 0},
		{"the tool's error", tasks.Task{Status: tasks.Completed, Result: json.RawMessage(`{"content":[{"type":"text","text":"No data."}],"isError":true}`)}, "No data.", true, 0},
		{"timed out", tasks.Task{Status: tasks.Failed, Error: &tasks.RPCError{Code: jsonrpc.CodeInternalError, Message: "The task ran longer than the project's longest task (1h0m0s) and was stopped."}},
			"The task ran longer than the project's longest task (1h0m0s) and was stopped.", true, 0},
		{"protocol error", tasks.Task{Status: tasks.Failed, Error: &tasks.RPCError{Code: -32602, Message: "bad dates"}}, "", false, -32602},
		{"cancelled", tasks.Task{ID: "task_x", Status: tasks.Cancelled}, "Job task_x was cancelled before it returned a result. Call the tool again if you still need it.", true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := jobResult(c.task)
			var je *jsonrpc.Error
			if c.code != 0 {
				if !errors.As(err, &je) || je.Code != c.code {
					t.Fatalf("jobResult = %v, %v; want the JSON-RPC error %d", r, err, c.code)
				}
				return
			}
			if err != nil || r.IsError != c.isError || firstText(r) != c.text {
				t.Errorf("jobResult = %q (isError %v), %v; want %q (isError %v)", firstText(r), r.IsError, err, c.text, c.isError)
			}
		})
	}
}

func TestKeptFor(t *testing.T) {
	for d, want := range map[time.Duration]string{
		24 * time.Hour: "24 hours", time.Hour: "1 hour", 7 * 24 * time.Hour: "7 days", 90 * time.Minute: "90 minutes", 0: "a while",
	} {
		if got := keptFor(d); got != want {
			t.Errorf("keptFor(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestJobToolListing: a 2026-07-28 request that declared the tasks
// extension does not see the job tool; others do.
func TestJobToolListing(t *testing.T) {
	list := &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: "sales_report"}, {Name: JobTool}, {Name: "z"}}}
	h := jobToolListing(func(context.Context, string, mcp.Request) (mcp.Result, error) { return list, nil })
	names := func(meta mcp.Meta) []string {
		res, err := h(context.Background(), "tools/list", &mcp.ListToolsRequest{Params: &mcp.ListToolsParams{Meta: meta}})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range res.(*mcp.ListToolsResult).Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	declared := mcp.Meta{mcp.MetaKeyClientCapabilities: map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}}
	if got := names(declared); len(got) != 2 || got[0] != "sales_report" || got[1] != "z" {
		t.Errorf("tools for a client with the extension = %v, want sales_report z", got)
	}
	if got := names(nil); len(got) != 3 {
		t.Errorf("tools for a client without = %v, want all three", got)
	}
	if len(list.Tools) != 3 {
		t.Errorf("the server's own list changed: %d tools", len(list.Tools))
	}
}
