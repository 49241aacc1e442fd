package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/store"
)

// The 2026-07-28 tasks extension (io.modelcontextprotocol/tasks, SEP-2663)
// from a client's side: raw JSON-RPC over HTTP, as the extension's wire is
// one that no Go client speaks yet.

// extClient is a client of the extension: one client key, a request at a
// time.
type extClient struct {
	t    *testing.T
	url  string
	key  string
	next atomic.Int64
}

func (e *env) extClient(key string) *extClient {
	return &extClient{t: e.t, url: e.url + "/mcp", key: key}
}

// extAnswer is a JSON-RPC answer and its HTTP status.
type extAnswer struct {
	Status int
	Result map[string]any
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
}

// extRequest is one request to send: method, params, and whether its
// client declares the extension. headers overrides the routing headers.
type extRequest struct {
	method  string
	params  map[string]any
	noExt   bool
	headers map[string]string
}

// do sends req and returns the answer; a transport failure fails the test.
func (c *extClient) do(req extRequest) extAnswer {
	c.t.Helper()
	caps := map[string]any{"elicitation": map[string]any{}}
	if !req.noExt {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	params := map[string]any{"_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}}
	for k, v := range req.params {
		params[k] = v
	}
	id := c.next.Add(1)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": req.method, "params": params})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(string(body)))
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json, text/event-stream")
	hr.Header.Set("Authorization", "Bearer "+c.key)
	hr.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	hr.Header.Set("Mcp-Method", req.method)
	if name, ok := req.params["name"].(string); ok {
		hr.Header.Set("Mcp-Name", name)
	}
	if id, ok := req.params["taskId"].(string); ok {
		hr.Header.Set("Mcp-Name", id)
	}
	for k, v := range req.headers {
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		c.t.Fatalf("%s: %v", req.method, err)
	}
	defer resp.Body.Close()
	raw, err := readRPC(resp)
	if err != nil {
		c.t.Fatalf("%s: read the answer: %v", req.method, err)
	}
	out := extAnswer{Status: resp.StatusCode}
	if err := json.Unmarshal(raw, &out); err != nil {
		c.t.Fatalf("%s: answer %s: %v", req.method, raw, err)
	}
	return out
}

// readRPC returns the JSON-RPC response of an answer: the body, or the
// last message of an event stream that is a response.
func readRPC(resp *http.Response) ([]byte, error) {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return io.ReadAll(resp.Body)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if ok && (strings.Contains(data, `"result"`) || strings.Contains(data, `"error"`)) && !strings.Contains(data, `"method"`) {
			return []byte(data), nil
		}
	}
	return nil, errors.New("no response in the event stream")
}

// ok returns a's result, failing the test on an error.
func (c *extClient) ok(a extAnswer, what string) map[string]any {
	c.t.Helper()
	if a.Error != nil {
		c.t.Fatalf("%s: error %d %s", what, a.Error.Code, a.Error.Message)
	}
	return a.Result
}

// start calls tool as a task and returns its CreateTaskResult.
func (c *extClient) start(tool string, args map[string]any) map[string]any {
	c.t.Helper()
	r := c.ok(c.do(extRequest{method: "tools/call", params: map[string]any{"name": tool, "arguments": args}}), "tools/call "+tool)
	if r["resultType"] != "task" {
		c.t.Fatalf("tools/call %s: resultType %v, want task: %v", tool, r["resultType"], r)
	}
	return r
}

func (c *extClient) get(id string) extAnswer {
	return c.do(extRequest{method: "tasks/get", params: map[string]any{"taskId": id}})
}

// waitStatus polls tasks/get until the task has status want (or another
// terminal one), within 10 s, and returns it.
func (c *extClient) waitStatus(id, want string) map[string]any {
	c.t.Helper()
	var last map[string]any
	waitFor(c.t, "task "+id+" to be "+want, func() bool {
		last = c.ok(c.get(id), "tasks/get")
		s, _ := last["status"].(string)
		return s == want || s == "completed" || s == "failed" || s == "cancelled"
	})
	if last["status"] != want {
		c.t.Fatalf("task %s is %v, want %s: %v", id, last["status"], want, last)
	}
	return last
}

// again is a task's inputRequests.
func again(task map[string]any) map[string]any {
	m, _ := task["inputRequests"].(map[string]any)
	return m
}

// resultText is the first text part of a task's inline result.
func resultText(task map[string]any) string {
	r, _ := task["result"].(map[string]any)
	content, _ := r["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	part, _ := content[0].(map[string]any)
	s, _ := part["text"].(string)
	return s
}

// startExtAgent runs the agent the tests call: tools that wait, ask and
// run only as tasks.
func startExtAgent(e *env, release <-chan struct{}, cancelled chan<- struct{}) {
	type waitIn struct {
		Big  bool `json:"big,omitempty"`  // answer 5 MiB
		Hold bool `json:"hold,omitempty"` // run until cancelled
	}
	e.startAgent(core.Options{Name: "reports"}, func(a *core.Agent) {
		must(e.t, core.AddTool(a, "report", "Builds a report, slowly", func(ctx context.Context, in waitIn) (string, error) {
			if in.Big {
				return strings.Repeat("x", 5<<20), nil
			}
			core.Progress(ctx, "Gathering the numbers")
			done := release
			if in.Hold {
				done = nil
			}
			select {
			case <-done:
				return "Report ready", nil
			case <-ctx.Done():
				cancelled <- struct{}{}
				return "", ctx.Err()
			}
		}, core.TaskSupport(core.TaskOptional)))
		must(e.t, core.AddTool(a, "purge", "Deletes old reports, once the user agrees", func(ctx context.Context, _ struct{}) (string, error) {
			ok, err := core.Confirm(ctx, "Delete the old reports?")
			if err != nil || !ok {
				return "Kept them.", err
			}
			return "Deleted them.", nil
		}, core.TaskSupport(core.TaskOptional)))
		must(e.t, core.AddTool(a, "archive", "Archives everything; only as a task", func(ctx context.Context, _ struct{}) (string, error) {
			return "Archived.", nil
		}, core.TaskSupport(core.TaskRequired)))
	})
}

// TestTasksModern runs tasks of the 2026-07-28 extension end to end: a real
// gateway, a real core agent, a client speaking the extension's wire.
func TestTasksModern(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	release := make(chan struct{})
	cancelled := make(chan struct{}, 4)
	startExtAgent(e, release, cancelled)
	c := e.extClient(e.clientKey)

	t.Run("discover advertises the extension", func(t *testing.T) {
		r := c.ok(c.do(extRequest{method: "server/discover"}), "server/discover")
		caps, _ := r["capabilities"].(map[string]any)
		ext, _ := caps["extensions"].(map[string]any)
		if _, ok := ext["io.modelcontextprotocol/tasks"]; !ok {
			t.Fatalf("capabilities.extensions has no io.modelcontextprotocol/tasks: %v", caps)
		}
	})

	t.Run("create, poll, complete", func(t *testing.T) {
		created := c.start("report", nil)
		id, _ := created["taskId"].(string)
		for _, k := range []string{"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} {
			if _, ok := created[k]; !ok {
				t.Errorf("CreateTaskResult has no %s: %v", k, created)
			}
		}
		for _, k := range []string{"result", "error", "inputRequests", "requestState", "task"} {
			if _, ok := created[k]; ok {
				t.Errorf("CreateTaskResult carries %s: %v", k, created)
			}
		}
		// Found at once: the task was stored before its CreateTaskResult.
		if got := c.ok(c.get(id), "tasks/get"); got["status"] != "working" || got["resultType"] != "complete" {
			t.Fatalf("tasks/get of a running task: %v", got)
		}
		close(release)
		done := c.waitStatus(id, "completed")
		if got := resultText(done); got != "Report ready" {
			t.Fatalf("inline result %q, want %q: %v", got, "Report ready", done)
		}
		// One call in the log, with its task id (logged once the task's
		// end is stored).
		var logged []store.Call
		waitFor(t, "the task's call in the log", func() bool {
			logged = logged[:0]
			for _, cl := range e.calls() {
				if cl.Name == "report" {
					logged = append(logged, cl)
				}
			}
			return len(logged) > 0
		})
		if len(logged) != 1 || logged[0].Outcome != store.OutcomeOK || (logged[0].TaskID != "" && logged[0].TaskID != id) {
			t.Fatalf("call log of task %s: %+v, want one ok call", id, logged)
		}
	})

	t.Run("input_required, update, completed", func(t *testing.T) {
		id, _ := c.start("purge", nil)["taskId"].(string)
		waiting := c.waitStatus(id, "input_required")
		reqs, _ := waiting["inputRequests"].(map[string]any)
		if len(reqs) != 1 {
			t.Fatalf("inputRequests %v, want one", waiting["inputRequests"])
		}
		// A response to a key never asked is ignored (SEP-2663): the
		// update is acknowledged and the task still waits for its answer.
		never := c.ok(c.do(extRequest{method: "tasks/update", params: map[string]any{"taskId": id,
			"inputResponses": map[string]any{"never-asked": map[string]any{"action": "accept"}}}}), "tasks/update")
		if never["resultType"] != "complete" {
			t.Fatalf("tasks/update for a key never asked: %v", never)
		}
		still := c.ok(c.get(id), "tasks/get")
		if left, _ := still["inputRequests"].(map[string]any); still["status"] != "input_required" || len(left) != 1 {
			t.Fatalf("after an update for a key never asked: %v, want the same input request", still)
		}
		for k := range again(still) {
			if _, ok := reqs[k]; !ok {
				t.Fatalf("input request %q is new after an update for a key never asked", k)
			}
		}
		if invalid := c.do(extRequest{method: "tasks/update", params: map[string]any{"taskId": id}}); invalid.Error == nil || invalid.Error.Code != -32602 {
			t.Fatalf("tasks/update without inputResponses: %+v, want -32602", invalid)
		}
		responses := map[string]any{}
		for k := range reqs {
			responses[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
		}
		ack := c.ok(c.do(extRequest{method: "tasks/update", params: map[string]any{"taskId": id, "inputResponses": responses}}), "tasks/update")
		if ack["resultType"] != "complete" || ack["status"] != nil {
			t.Fatalf("tasks/update ack: %v", ack)
		}
		if got := resultText(c.waitStatus(id, "completed")); got != "Deleted them." {
			t.Fatalf("result %q, want %q", got, "Deleted them.")
		}
	})

	t.Run("cancel", func(t *testing.T) {
		id, _ := c.start("report", map[string]any{"hold": true})["taskId"].(string)
		c.waitStatus(id, "working")
		for range 2 { // the second on a cancelled task: the same ack
			ack := c.ok(c.do(extRequest{method: "tasks/cancel", params: map[string]any{"taskId": id}}), "tasks/cancel")
			if ack["resultType"] != "complete" || len(ack) > 2 {
				t.Fatalf("tasks/cancel ack: %v", ack)
			}
		}
		if got := c.waitStatus(id, "cancelled"); got["result"] != nil || got["error"] != nil {
			t.Fatalf("a cancelled task carries a result or an error: %v", got)
		}
		select {
		case <-cancelled: // the handler's ctx ended
		case <-time.After(10 * time.Second):
			t.Fatal("the handler's context was not cancelled within 10s of tasks/cancel")
		}
	})

	t.Run("unknown and another client's task are the same error", func(t *testing.T) {
		id, _ := c.start("archive", nil)["taskId"].(string)
		_, otherKey := e.newKey(store.Key{Kind: store.KindClient, Name: "other client"})
		other := e.extClient(otherKey)
		foreign := other.get(id)
		unknown := c.get("task_aaaaaaaaaaaaaaaaaaaaaaaaaa")
		for name, a := range map[string]extAnswer{"another client's": foreign, "unknown": unknown} {
			if a.Error == nil || a.Error.Code != -32602 || a.Status != http.StatusBadRequest {
				t.Fatalf("tasks/get of %s task: %+v, want -32602 and HTTP 400", name, a)
			}
		}
		if foreign.Error.Message != unknown.Error.Message {
			t.Fatalf("another client's task says %q, an unknown one %q", foreign.Error.Message, unknown.Error.Message)
		}
		for _, m := range []string{"tasks/cancel", "tasks/update"} {
			a := other.do(extRequest{method: m, params: map[string]any{"taskId": id, "inputResponses": map[string]any{}}})
			if a.Error == nil || a.Error.Message != unknown.Error.Message {
				t.Fatalf("%s of another client's task: %+v, want %q", m, a, unknown.Error.Message)
			}
		}
	})

	t.Run("a TTL of ten years is capped", func(t *testing.T) {
		tenYears := (10 * 365 * 24 * time.Hour).Milliseconds()
		r := c.ok(c.do(extRequest{method: "tools/call", params: map[string]any{"name": "archive", "arguments": map[string]any{},
			"task": map[string]any{"ttl": tenYears}}}), "tools/call")
		if got, want := r["ttlMs"], float64(store.DefaultTaskTTL.Milliseconds()); got != want {
			t.Fatalf("ttlMs %v, want the project's cap %v", got, want)
		}
		if got := c.waitStatus(r["taskId"].(string), "completed"); got["ttlMs"] != r["ttlMs"] {
			t.Fatalf("tasks/get ttlMs %v, want %v", got["ttlMs"], r["ttlMs"])
		}
	})

	t.Run("a result over 4 MiB fails the task", func(t *testing.T) {
		id, _ := c.start("report", map[string]any{"big": true})["taskId"].(string)
		got := c.waitStatus(id, "failed")
		errObj, _ := got["error"].(map[string]any)
		msg, _ := errObj["message"].(string)
		if !strings.HasPrefix(msg, "Result is too large: ") || got["result"] != nil {
			t.Fatalf("failed task: %v, want the too-large message and no result", got)
		}
		// Nothing else is affected: the next task runs.
		id, _ = c.start("archive", nil)["taskId"].(string)
		c.waitStatus(id, "completed")
	})

	t.Run("Mcp-Name must be the task id", func(t *testing.T) {
		id, _ := c.start("archive", nil)["taskId"].(string)
		a := c.do(extRequest{method: "tasks/get", params: map[string]any{"taskId": id}, headers: map[string]string{"Mcp-Name": "task_other"}})
		if a.Error == nil || a.Error.Code != -32020 || a.Status != http.StatusBadRequest {
			t.Fatalf("tasks/get with another Mcp-Name: %+v, want -32020 and HTTP 400", a)
		}
	})

	t.Run("a required tool without the extension", func(t *testing.T) {
		a := c.do(extRequest{method: "tools/call", params: map[string]any{"name": "archive", "arguments": map[string]any{}}, noExt: true})
		if a.Error == nil || a.Error.Code != -32021 || a.Status != http.StatusBadRequest {
			t.Fatalf("tools/call of a required tool without the extension: %+v, want -32021", a)
		}
		want := "Tool archive runs only as a task, so it needs the io.modelcontextprotocol/tasks extension, which this request did not declare: add it to _meta[\"io.modelcontextprotocol/clientCapabilities\"].extensions."
		if a.Error.Message != want {
			t.Fatalf("message %q, want %q", a.Error.Message, want)
		}
		if !strings.Contains(string(a.Error.Data), `"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`) {
			t.Fatalf("data %s names no required extension", a.Error.Data)
		}
		// The same tool with the extension, and an optional one without it
		// (a plain call).
		c.start("archive", nil)
		plain := c.ok(c.do(extRequest{method: "tools/call", params: map[string]any{"name": "report", "arguments": map[string]any{}}, noExt: true}), "tools/call")
		if plain["resultType"] == "task" || plain["taskId"] != nil {
			t.Fatalf("an optional tool without the extension became a task: %v", plain)
		}
		for _, m := range []string{"tasks/get", "tasks/cancel"} {
			a := c.do(extRequest{method: m, params: map[string]any{"taskId": "task_x"}, noExt: true})
			if a.Error == nil || a.Error.Code != -32021 {
				t.Fatalf("%s without the extension: %+v, want -32021", m, a)
			}
		}
	})

	t.Run("tasks/result and tasks/list are gone", func(t *testing.T) {
		for _, m := range []string{"tasks/result", "tasks/list"} {
			a := c.do(extRequest{method: m, params: map[string]any{"taskId": "task_x"}})
			if a.Error == nil || a.Error.Code != -32601 {
				t.Fatalf("%s: %+v, want -32601", m, a)
			}
		}
	})
}
