package pipeline

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

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
			if err != nil || r.IsError != c.isError || FirstText(r) != c.text {
				t.Errorf("jobResult = %q (isError %v), %v; want %q (isError %v)", FirstText(r), r.IsError, err, c.text, c.isError)
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
