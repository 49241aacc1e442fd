package session

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/tasks"
)

func TestInitWithTasksDeclaresTheCapability(t *testing.T) {
	ir := &mcp.InitializeResult{
		ProtocolVersion: tasksVersion,
		Capabilities:    &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		ServerInfo:      &mcp.Implementation{Name: "spacefix", Version: "1"},
	}
	b, err := json.Marshal(initWithTasks{ir})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ProtocolVersion string `json:"protocolVersion"`
		Capabilities    map[string]any
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"tools": map[string]any{"listChanged": true},
		"tasks": map[string]any{"list": map[string]any{}, "cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}},
	}
	if diff := cmp.Diff(want, got.Capabilities); diff != "" {
		t.Errorf("capabilities (-want +got):\n%s", diff)
	}
	if got.ProtocolVersion != tasksVersion {
		t.Errorf("protocolVersion = %q", got.ProtocolVersion)
	}
}

func TestParseTaskCall(t *testing.T) {
	for _, tc := range []struct {
		body     string
		ok       bool
		name     string
		withTask bool
	}{
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"report","arguments":{},"task":{"ttl":60000}}}`, true, "report", true},
		{`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"report"}}`, true, "report", false},
		{`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"report","task":null}}`, true, "report", false},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"name":"tools/call"}}`, false, "", false},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":""}}`, false, "", false},
		{`{"jsonrpc":"2.0","id":3.5,"method":"tools/call","params":{"name":"x"}}`, false, "", false},
		{`[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}]`, false, "", false},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}`, false, "", false},
	} {
		c, ok := parseTaskCall(wire.Decode([]byte(tc.body)))
		if ok != tc.ok || c.name != tc.name || (c.task != nil) != tc.withTask {
			t.Errorf("parseTaskCall(%s) = %q, task %s, %v; want %q, task %v, %v", tc.body, c.name, c.task, ok, tc.name, tc.withTask, tc.ok)
		}
	}
}

func TestTaskTTL(t *testing.T) {
	for _, tc := range []struct {
		task string
		want time.Duration
		ok   bool
	}{
		{`{"ttl":60000}`, time.Minute, true},
		{`{}`, 0, true},
		{`{"ttl":null}`, 0, true},
		{`{"ttl":315360000000}`, 315360000000 * time.Millisecond, true}, // ten years: the runtime caps it
		{`{"ttl":1e300}`, 1e12 * time.Millisecond, true},
		{`{"ttl":-1}`, 0, false},
		{`{"ttl":"1m"}`, 0, false},
		{`[]`, 0, false},
	} {
		got, ok := taskTTL(json.RawMessage(tc.task))
		if got != tc.want || ok != tc.ok {
			t.Errorf("taskTTL(%s) = %v, %v; want %v, %v", tc.task, got, ok, tc.want, tc.ok)
		}
	}
}

func TestWireTaskIsErrorIsFailed(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	task := tasks.Task{
		ID: "task_x", Status: tasks.Completed, CreatedAt: created, UpdatedAt: created.Add(time.Second),
		TTL: time.Hour, PollInterval: time.Second,
		Result: json.RawMessage(`{"content":[{"type":"text","text":"The report failed: no data for May."}],"isError":true}`),
	}
	want := taskWire{
		TaskID: "task_x", Status: "failed", StatusMessage: "The report failed: no data for May.",
		CreatedAt: "2026-01-02T03:04:05.006Z", LastUpdatedAt: "2026-01-02T03:04:06.006Z", TTL: 3600000, PollInterval: 1000,
	}
	if diff := cmp.Diff(want, wireTask(task)); diff != "" {
		t.Errorf("wireTask (-want +got):\n%s", diff)
	}
	task.Result = json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)
	if got := wireTask(task); got.Status != "completed" || got.StatusMessage != "" {
		t.Errorf("a plain result: status %q, message %q; want completed and none", got.Status, got.StatusMessage)
	}
}

func TestTaskOutcome(t *testing.T) {
	done := tasks.Task{ID: "task_a", Status: tasks.Completed, Result: json.RawMessage(`{"content":[{"type":"text","text":"42"}],"_meta":{"k":1}}`)}
	res, err := taskOutcome(done)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"task_a"},"k":1},"content":[{"type":"text","text":"42"}]}`
	if string(res.raw) != want {
		t.Errorf("completed: %s\nwant %s", res.raw, want)
	}

	lost := tasks.Task{ID: "task_b", Status: tasks.Failed, StatusMessage: "Agent disconnected before returning a result."}
	res, err = taskOutcome(lost)
	if err != nil {
		t.Fatal(err)
	}
	want = `{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"task_b"}},"content":[{"type":"text","text":"Agent disconnected before returning a result."}],"isError":true}`
	if string(res.raw) != want {
		t.Errorf("failed without a result: %s\nwant %s", res.raw, want)
	}

	protocol := tasks.Task{ID: "task_c", Status: tasks.Failed, Error: &tasks.RPCError{Code: -32602, Message: "bad month"}}
	_, err = taskOutcome(protocol)
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) || jerr.Code != -32602 || jerr.Message != "bad month" {
		t.Errorf("failed with a JSON-RPC error: %v; want that error", err)
	}

	_, err = taskOutcome(tasks.Task{ID: "task_d", Status: tasks.Cancelled})
	if !errors.As(err, &jerr) || !strings.Contains(jerr.Message, "Task task_d was cancelled") {
		t.Errorf("cancelled: %v; want an error saying so", err)
	}
}

// TestTaskStreamKeepsEventsWhole holds that a status notification is
// written between go-sdk's events, never before go-sdk opened the stream.
func TestTaskStreamKeepsEventsWhole(t *testing.T) {
	rec := httptest.NewRecorder()
	s := &taskStream{ResponseWriter: rec}
	s.inject([]byte(`{"early":true}`))
	s.Header().Set("Content-Type", "text/event-stream")
	s.WriteHeader(http.StatusOK)
	s.Write([]byte("event: message\ndata: {\"a\":1}\n\n"))
	s.inject([]byte(`{"b":2}`))
	s.Flush()
	want := "event: message\ndata: {\"a\":1}\n\nevent: message\ndata: {\"b\":2}\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("stream:\n%q\nwant\n%q", got, want)
	}
}
