package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/testenv"
)

// The 2025-11-25 experimental tasks, end to end: go-sdk's client at
// 2025-11-25 for the session (and its elicitation handler), tasks/* as its
// custom methods, and the task-augmented tools/call, which go-sdk's client
// cannot send, as a raw POST in the session.

// sessionTask is a Task as 2025-11-25 writes it.
type sessionTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type taskGetResult struct {
	mcp.ResultBase
	sessionTask
}

type taskListParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

type taskListResult struct {
	mcp.ResultBase
	Tasks      []sessionTask `json:"tasks"`
	NextCursor string        `json:"nextCursor"`
}

// tasksClient is a go-sdk client session at 2025-11-25 that speaks tasks.
type tasksClient struct {
	t   *testing.T
	e   *env
	key string
	cs  *mcp.ClientSession
	hc  *http.Client
}

func (e *env) tasksClient(key string, opts *mcp.ClientOptions) *tasksClient {
	e.t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-tasks", Version: "1"}, opts)
	must(e.t, mcp.AddSendingCustomMethod[*taskIDParams, *taskGetResult](client, "tasks/get"))
	must(e.t, mcp.AddSendingCustomMethod[*taskIDParams, *taskGetResult](client, "tasks/cancel"))
	must(e.t, mcp.AddSendingCustomMethod[*taskIDParams, *mcp.CallToolResult](client, "tasks/result"))
	must(e.t, mcp.AddSendingCustomMethod[*taskListParams, *taskListResult](client, "tasks/list"))
	tr := &mcp.StreamableClientTransport{
		Endpoint:   e.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key: key, base: http.DefaultTransport}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	e.t.Cleanup(func() { cs.Close() })
	hc := &http.Client{Transport: &http.Transport{}}
	e.t.Cleanup(hc.CloseIdleConnections)
	return &tasksClient{t: e.t, e: e, key: key, cs: cs, hc: hc}
}

// rpcAnswer is a JSON-RPC response.
type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// callAsTask sends tools/call name with args and params.task task ("" for
// none) in the session, and returns the answer.
func (c *tasksClient) callAsTask(name, args, task string) rpcAnswer {
	c.t.Helper()
	params := fmt.Sprintf(`{"name":%q,"arguments":%s`, name, args)
	if task != "" {
		params += `,"task":` + task
	}
	body := `{"jsonrpc":"2.0","id":77,"method":"tools/call","params":` + params + `}}`
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := rawPost(ctx, c.hc, c.e.url, c.key, c.cs.ID(), body)
	if err != nil {
		c.t.Fatal(err)
	}
	raw := answer(c.t, resp)
	var a rpcAnswer
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		c.t.Fatalf("tools/call %s: %d %q: %v", name, resp.StatusCode, raw, err)
	}
	return a
}

// start runs tool name as a task and returns the task of its
// CreateTaskResult.
func (c *tasksClient) start(name, args, task string) sessionTask {
	c.t.Helper()
	a := c.callAsTask(name, args, task)
	if a.Error != nil {
		c.t.Fatalf("tools/call %s as a task: %v", name, a.Error)
	}
	var created struct {
		Task *sessionTask `json:"task"`
	}
	if err := json.Unmarshal(a.Result, &created); err != nil || created.Task == nil {
		c.t.Fatalf("tools/call %s as a task answered %s, not a CreateTaskResult", name, a.Result)
	}
	return *created.Task
}

func (c *tasksClient) get(id string) (sessionTask, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := mcp.CallCustomMethod[*taskIDParams, *taskGetResult](ctx, c.cs, "tasks/get", &taskIDParams{TaskID: id})
	if err != nil {
		return sessionTask{}, err
	}
	return r.sessionTask, nil
}

func (c *tasksClient) cancel(id string) (sessionTask, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := mcp.CallCustomMethod[*taskIDParams, *taskGetResult](ctx, c.cs, "tasks/cancel", &taskIDParams{TaskID: id})
	if err != nil {
		return sessionTask{}, err
	}
	return r.sessionTask, nil
}

func (c *tasksClient) result(id string) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return mcp.CallCustomMethod[*taskIDParams, *mcp.CallToolResult](ctx, c.cs, "tasks/result", &taskIDParams{TaskID: id})
}

func (c *tasksClient) list(cursor string) (*taskListResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return mcp.CallCustomMethod[*taskListParams, *taskListResult](ctx, c.cs, "tasks/list", &taskListParams{Cursor: cursor})
}

// waitStatus polls tasks/get until task id has status want.
func (c *tasksClient) waitStatus(id, want string) sessionTask {
	c.t.Helper()
	var last sessionTask
	waitFor(c.t, "task "+id+" to be "+want, func() bool {
		var err error
		last, err = c.get(id)
		if err != nil {
			c.t.Fatalf("tasks/get %s: %v", id, err)
		}
		return last.Status == want
	})
	return last
}

// rpcError returns err's JSON-RPC error, failing the test if it has none.
func rpcError(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) {
		t.Fatalf("got %v, want a JSON-RPC error", err)
	}
	return jerr
}

// relatedTask is the related-task id in a result's or request's _meta.
func relatedTask(meta mcp.Meta) string {
	m, _ := meta["io.modelcontextprotocol/related-task"].(map[string]any)
	id, _ := m["taskId"].(string)
	return id
}

type reportInput struct {
	Month string `json:"month"`
}

// sessionTaskAgent offers the tools the tests run as tasks; release lets a
// report return, cancelled says a report's ctx ended.
type sessionTaskAgent struct {
	release   chan struct{}
	cancelled chan string
}

func startSessionTaskAgent(e *env) *sessionTaskAgent {
	ta := &sessionTaskAgent{release: make(chan struct{}), cancelled: make(chan string, 8)}
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(e.t, core.AddTool(a, "report", "Builds the month's report.", func(ctx context.Context, in reportInput) (string, error) {
			select {
			case <-ta.release:
				return "report for " + in.Month, nil
			case <-ctx.Done():
				ta.cancelled <- in.Month
				return "", ctx.Err()
			}
		}, core.TaskSupport(core.TaskOptional)))
		must(e.t, core.AddTool(a, "hold", "Runs until cancelled.", func(ctx context.Context, in struct{}) (string, error) {
			<-ctx.Done()
			ta.cancelled <- "hold"
			return "", ctx.Err()
		}, core.TaskSupport(core.TaskOptional)))
		must(e.t, core.AddTool(a, "archive", "Archives everything, only as a task.", func(ctx context.Context, in struct{}) (string, error) {
			return "archived", nil
		}, core.TaskSupport(core.TaskRequired)))
		must(e.t, core.AddTool(a, "lookup", "Looks one thing up, never as a task.", func(ctx context.Context, in struct{}) (string, error) {
			return "found", nil
		}))
		must(e.t, core.AddTool(a, "broken_report", "Fails.", func(ctx context.Context, in struct{}) (string, error) {
			return "", errors.New("no data for May")
		}, core.TaskSupport(core.TaskOptional)))
		must(e.t, core.AddTool(a, "delete_month", "Deletes a month after asking.", func(ctx context.Context, in reportInput) (string, error) {
			ok, err := core.Confirm(ctx, "Delete "+in.Month+"?")
			if err != nil {
				return "", err
			}
			if !ok {
				return "kept " + in.Month, nil
			}
			return "deleted " + in.Month, nil
		}, core.TaskSupport(core.TaskOptional)))
	})
	return ta
}

func TestSessionTasksLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ta := startSessionTaskAgent(e)
	c := e.tasksClient(e.clientKey, nil)

	// A ttl of ten years is capped by the project, and the cap is in the
	// answer.
	task := c.start("report", `{"month":"May"}`, `{"ttl":315360000000}`)
	if task.Status != "working" || !strings.HasPrefix(task.TaskID, "task_") || task.CreatedAt == "" || task.LastUpdatedAt == "" {
		t.Errorf("CreateTaskResult task = %+v; want a working task_ id with its times", task)
	}
	if task.TTL == nil || *task.TTL != (24*time.Hour).Milliseconds() {
		t.Errorf("ttl = %v; want the project's cap, %d", task.TTL, (24 * time.Hour).Milliseconds())
	}
	if got, err := c.get(task.TaskID); err != nil || got.Status != "working" {
		t.Errorf("tasks/get while it runs: %+v, %v; want working", got, err)
	}
	close(ta.release)
	c.waitStatus(task.TaskID, "completed")
	res, err := c.result(task.TaskID)
	if err != nil {
		t.Fatalf("tasks/result: %v", err)
	}
	if text(res) != "report for May" || res.IsError || relatedTask(res.Meta) != task.TaskID {
		t.Errorf("tasks/result = %q (isError %v), related task %q; want the report and %s", text(res), res.IsError, relatedTask(res.Meta), task.TaskID)
	}

	// An isError result ends the task failed at this version; tasks/result
	// returns it.
	broken := c.start("broken_report", `{}`, `{}`)
	failed := c.waitStatus(broken.TaskID, "failed")
	if !strings.Contains(failed.StatusMessage, "no data for May") {
		t.Errorf("failed task's statusMessage = %q", failed.StatusMessage)
	}
	res, err = c.result(broken.TaskID)
	if err != nil || !res.IsError || !strings.Contains(text(res), "no data for May") {
		t.Errorf("tasks/result of the failed task = %v, %v; want its isError result", res, err)
	}

	// The one call is logged once, with its outcome.
	waitFor(t, "the task's call in the log", func() bool {
		for _, cl := range e.calls() {
			if cl.Name == "report" && cl.Outcome == store.OutcomeOK {
				return true
			}
		}
		return false
	})
}

func TestSessionTasksCapability(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		version string
		want    bool
	}{{"2025-11-25", true}, {"2025-06-18", false}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		body := strings.Replace(initializeBody, "2025-11-25", tc.version, 1)
		resp, err := rawPost(ctx, http.DefaultClient, e.url, e.clientKey, "", body)
		if err != nil {
			t.Fatal(err)
		}
		var init struct {
			Result struct {
				Capabilities map[string]json.RawMessage `json:"capabilities"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(answer(t, resp)), &init); err != nil {
			t.Fatal(err)
		}
		cancel()
		var got any
		if raw := init.Result.Capabilities["tasks"]; raw != nil {
			must(t, json.Unmarshal(raw, &got))
		}
		var want any
		if tc.want {
			want = map[string]any{"list": map[string]any{}, "cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: capabilities.tasks (-want +got):\n%s", tc.version, diff)
		}
	}
}

func TestSessionTasksInputThroughResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	startSessionTaskAgent(e)
	var (
		mu      sync.Mutex
		asked   []string
		related []string
	)
	c := e.tasksClient(e.clientKey, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, r.Params.Message)
			related = append(related, relatedTask(r.Params.Meta))
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		},
	})
	task := c.start("delete_month", `{"month":"May"}`, `{"ttl":60000}`)
	c.waitStatus(task.TaskID, "input_required")
	// tasks/result puts the question on its own stream, and ends with the
	// result once the answer let the handler finish.
	res, err := c.result(task.TaskID)
	if err != nil {
		t.Fatalf("tasks/result: %v", err)
	}
	if text(res) != "deleted May" {
		t.Errorf("tasks/result = %q; want deleted May", text(res))
	}
	mu.Lock()
	if len(asked) != 1 || asked[0] != "Delete May?" || related[0] != task.TaskID {
		t.Errorf("the client was asked %q, related to %q; want once, Delete May?, for %s", asked, related, task.TaskID)
	}
	mu.Unlock()
	if got := c.waitStatus(task.TaskID, "completed"); got.TaskID != task.TaskID {
		t.Errorf("tasks/get after = %+v", got)
	}
}

func TestSessionTasksCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ta := startSessionTaskAgent(e)
	c := e.tasksClient(e.clientKey, nil)
	task := c.start("report", `{"month":"June"}`, `{}`)
	got, err := c.cancel(task.TaskID)
	if err != nil || got.Status != "cancelled" || got.TaskID != task.TaskID {
		t.Fatalf("tasks/cancel = %+v, %v; want the task, cancelled", got, err)
	}
	select {
	case m := <-ta.cancelled:
		if m != "June" {
			t.Errorf("cancelled the report for %q", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's ctx did not end within 10s of tasks/cancel")
	}
	if got, err := c.get(task.TaskID); err != nil || got.Status != "cancelled" {
		t.Errorf("tasks/get after cancel = %+v, %v; want cancelled", got, err)
	}
	_, err = c.cancel(task.TaskID)
	if jerr := rpcError(t, err); jerr.Code != jsonrpc.CodeInvalidParams || jerr.Message != "Cannot cancel task "+task.TaskID+": it is already cancelled." {
		t.Errorf("cancelling again: %d %q", jerr.Code, jerr.Message)
	}
	_, err = c.result(task.TaskID)
	if jerr := rpcError(t, err); !strings.Contains(jerr.Message, "was cancelled before it returned a result") {
		t.Errorf("tasks/result of a cancelled task: %d %q", jerr.Code, jerr.Message)
	}
}

func TestSessionTasksOwnerAndList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	startSessionTaskAgent(e)
	c := e.tasksClient(e.clientKey, nil)
	const n = 53 // more than one page of 50
	var ids []string
	for range n {
		ids = append(ids, c.start("archive", `{}`, `{}`).TaskID)
	}
	_, otherKey := e.newKey(store.Key{Kind: store.KindClient, Name: "other"})
	other := e.tasksClient(otherKey, nil)
	mine := other.start("archive", `{}`, `{}`).TaskID

	// Paginated, newest first, only the caller's.
	var listed, created []string
	cursor := ""
	pages := 0
	for {
		page, err := c.list(cursor)
		if err != nil {
			t.Fatalf("tasks/list: %v", err)
		}
		pages++
		for _, tk := range page.Tasks {
			listed = append(listed, tk.TaskID)
			created = append(created, tk.CreatedAt)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if pages != 2 || len(listed) != n {
		t.Fatalf("tasks/list: %d tasks in %d pages; want %d in 2", len(listed), pages, n)
	}
	// Newest first: tasks made in the same millisecond come in any order.
	for i := 1; i < len(created); i++ {
		if created[i] > created[i-1] {
			t.Fatalf("tasks/list[%d] was created at %s, after tasks/list[%d] (%s); want newest first", i, created[i], i-1, created[i-1])
		}
	}
	if !sameSet(listed, ids) {
		t.Fatalf("tasks/list = %v; want the key's own %v", listed, ids)
	}
	page, err := other.list("")
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].TaskID != mine {
		t.Errorf("the other key's tasks/list = %+v, %v; want its one task", page, err)
	}

	// Another key's task id gets exactly what an unknown one gets.
	const unknown = "task_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	for _, method := range []string{"get", "result", "cancel"} {
		call := map[string]func(string) error{
			"get":    func(id string) error { _, err := other.get(id); return err },
			"result": func(id string) error { _, err := other.result(id); return err },
			"cancel": func(id string) error { _, err := other.cancel(id); return err },
		}[method]
		theirs, none := rpcError(t, call(ids[0])), rpcError(t, call(unknown))
		if theirs.Code != jsonrpc.CodeInvalidParams || theirs.Code != none.Code ||
			strings.ReplaceAll(theirs.Message, ids[0], unknown) != none.Message {
			t.Errorf("tasks/%s of another key's task: %d %q; of an unknown one: %d %q", method, theirs.Code, theirs.Message, none.Code, none.Message)
		}
	}
}

func TestSessionTasksSupportRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	startSessionTaskAgent(e)
	c := e.tasksClient(e.clientKey, nil)

	a := c.callAsTask("lookup", `{}`, `{"ttl":1000}`)
	if a.Error == nil || a.Error.Code != jsonrpc.CodeMethodNotFound ||
		a.Error.Message != "Tool lookup does not run as a task (its execution.taskSupport is forbidden): call it again without params.task." {
		t.Errorf("a forbidden tool as a task: %+v", a.Error)
	}
	// A client that declared the tasks capability and calls a required
	// tool without a task breaks the spec's rule: -32601.
	tasksInit := strings.Replace(initializeBody, `"capabilities":{}`, `"capabilities":{"tasks":{"list":{},"cancel":{},"requests":{"elicitation":{"create":{}}}}}`, 1)
	declared := e.newRawSessionWith(e.clientKey, tasksInit)
	if _, got := declared.call(7, "archive", `{}`); !strings.Contains(got, `"code":-32601`) || !strings.Contains(got, "Tool archive runs only as a task") {
		t.Errorf("a required tool without a task, from a client that speaks tasks: %s", got)
	}
	// A client that does not speak tasks (go-sdk's declares none) gets the
	// required tool as a job: a reference it can act on, not an error.
	if r := call(t, c.cs, "archive", map[string]any{}); r.IsError || !strings.HasPrefix(text(r), "The tool runs as a job (job task_") {
		t.Errorf("a required tool from a client without tasks = isError %v %q; want a job reference", r.IsError, text(r))
	}
	// Optional tools still run plainly; forbidden ones too.
	if got := text(call(t, c.cs, "lookup", map[string]any{})); got != "found" {
		t.Errorf("plain call of lookup = %q", got)
	}
}

// TestSessionTasksStatusNotifications: the session that created a task
// hears its status changes on its GET stream.
func TestSessionTasksStatusNotifications(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ta := startSessionTaskAgent(e)
	s := e.newRawSession(e.clientKey)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+e.clientKey)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	stream, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", stream.StatusCode)
	}
	heard := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				heard <- data
			}
		}
		close(heard)
	}()
	// The GET stream is open once go-sdk answered it; a task started now
	// is heard there.
	resp, err := s.post(ctx, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"report","arguments":{"month":"July"},"task":{}}}`)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Result struct {
			Task sessionTask `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(answer(t, resp)), &created); err != nil || created.Result.Task.TaskID == "" {
		t.Fatalf("CreateTaskResult: %v", err)
	}
	id := created.Result.Task.TaskID
	close(ta.release)
	for {
		select {
		case data, ok := <-heard:
			if !ok {
				t.Fatal("the GET stream ended before the task's completed status")
			}
			var n struct {
				Method string      `json:"method"`
				Params sessionTask `json:"params"`
			}
			if json.Unmarshal([]byte(data), &n) != nil || n.Method != "notifications/tasks/status" || n.Params.TaskID != id {
				continue
			}
			if n.Params.Status == "completed" {
				return
			}
		case <-ctx.Done():
			t.Fatal("no notifications/tasks/status completed on the GET stream within 20s")
		}
	}
}

// TestSessionTasksTypeScriptClient runs the official TypeScript SDK 1.x
// client's experimental tasks API (e2e/clients/tasks-session.mjs) against
// the gateway: create → poll → result, then cancel.
func TestSessionTasksTypeScriptClient(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Unavailable(t, "node is not on PATH; install Node.js 20 or later to run the TypeScript SDK client")
	}
	dir, err := filepath.Abs("clients")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		testenv.Unavailable(t, "e2e/clients/node_modules lacks @modelcontextprotocol/sdk; install it with: npm ci --prefix e2e/clients")
	}
	e := newEnv(t)
	ta := startSessionTaskAgent(e)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "tasks-session.mjs"), e.url+"/mcp", e.clientKey)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	must(t, cmd.Start())
	type event struct {
		Event    string          `json:"event"`
		Protocol string          `json:"protocolVersion"`
		Tasks    json.RawMessage `json:"tasks"`
		Task     sessionTask     `json:"task"`
		TaskID   string          `json:"taskId"`
		Status   string          `json:"status"`
		Text     string          `json:"text"`
		Related  string          `json:"related"`
		Message  string          `json:"message"`
		IDs      []string        `json:"ids"`
	}
	got := map[string][]event{}
	var statuses []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Errorf("the client printed %q", sc.Text())
			continue
		}
		got[ev.Event] = append(got[ev.Event], ev)
		switch ev.Event {
		case "created":
			close(ta.release) // polled as working at least once, then done
		case "status":
			statuses = append(statuses, ev.Status)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node tasks-session.mjs: %v\n%s", err, stderr.String())
	}
	if init := got["initialized"]; len(init) != 1 || init[0].Protocol != "2025-11-25" || !strings.Contains(string(init[0].Tasks), `"call"`) {
		t.Errorf("initialized: %+v; want 2025-11-25 and the tasks capability", init)
	}
	created, results := got["created"], got["result"]
	if len(created) != 1 || created[0].Task.Status != "working" || len(results) != 1 {
		t.Fatalf("created %+v, result %+v, errors %+v", created, results, got["error"])
	}
	id := created[0].Task.TaskID
	if results[0].Text != "report for May" || results[0].Related != id {
		t.Errorf("result %q related to %q; want the report, related to %s", results[0].Text, results[0].Related, id)
	}
	if len(statuses) == 0 || statuses[len(statuses)-1] != "completed" {
		t.Errorf("polled statuses %q; want them to end completed", statuses)
	}
	if c := got["cancelled"]; len(c) != 1 || c[0].Status != "cancelled" {
		t.Errorf("tasks/cancel: %+v; want cancelled", c)
	}
	if a := got["after"]; len(a) != 1 || a[0].Status != "cancelled" {
		t.Errorf("tasks/get after cancel: %+v", a)
	}
	select {
	case m := <-ta.cancelled:
		if m != "hold" {
			t.Errorf("cancelled %q; want hold", m)
		}
	case <-time.After(10 * time.Second):
		t.Error("the held task's handler was not cancelled within 10s")
	}
	if l := got["list"]; len(l) != 1 || len(l[0].IDs) != 2 || !slices.Contains(l[0].IDs, id) {
		t.Errorf("tasks/list: %+v; want the two tasks", l)
	}
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
