package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/route/routetest"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/teststores"
	"github.com/spacefix/spacefix/internal/tasks"
)

// These tests run the manager against a real store (SQLite, and
// PostgreSQL when SPACEFIX_TEST_DATABASE_URL is set) and a real registry
// whose one replica is played by the test on an in-memory transport.

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// calls records the call log.
type calls struct {
	mu sync.Mutex
	l  []store.Call
}

func (c *calls) Add(x store.Call) { c.mu.Lock(); c.l = append(c.l, x); c.mu.Unlock() }
func (c *calls) all() []store.Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]store.Call(nil), c.l...)
}

type env struct {
	t     testing.TB
	st    store.Store
	reg   *agents.Registry
	tr    *routetest.Transport
	m     *tasks.Manager
	calls *calls
	proj  store.Project
	key   store.Key
}

// each runs fn on every store.
func each(t *testing.T, fn func(t *testing.T, open func(t testing.TB) store.Store)) {
	for name, open := range teststores.Openers() {
		t.Run(name, func(t *testing.T) { fn(t, open) })
	}
}

// newEnv starts a manager on st with one replica offering "report".
func newEnv(t testing.TB, st store.Store, settings store.ProjectSettings, opts tasks.Options) *env {
	t.Helper()
	ctx := context.Background()
	proj, err := st.CreateProject(ctx, "p"+strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateProjectSettings(ctx, proj.ID, settings); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, st: st, reg: agents.New(&agents.Options{Logger: quiet}), tr: routetest.New(), calls: &calls{}, proj: proj,
		key: store.Key{ID: "key_client1", ProjectID: proj.ID, Kind: store.KindClient}}
	rep := &agents.Replica{
		ID: "r1", ProjectID: proj.ID, AgentKey: "key_agent", Since: time.Now(),
		Reg: &agentproto.Registration{Protocol: agentproto.Version, Name: "a",
			Tools: []agentproto.Tool{{Name: "report", InputSchema: json.RawMessage(`{"type":"object"}`)}}},
	}
	conn := route.NewConn(e.tr, quiet, route.Events{})
	rep.Conn = conn
	e.reg.Add(rep, nil)
	go func() {
		conn.Serve(context.Background())
		e.reg.Remove(rep)
	}()
	t.Cleanup(func() { e.tr.Close("") })
	opts.Store, opts.Calls, opts.Log = st, e.calls, quiet
	if opts.Settings == nil {
		opts.Settings = func(ctx context.Context, id int64) (store.ProjectSettings, error) {
			p, err := st.ProjectByID(ctx, id)
			return p.Settings, err
		}
	}
	e.m = tasks.New(opts)
	if err := e.m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.m.Close() })
	return e
}

func (e *env) owner() tasks.Owner { return tasks.Owner("key:" + e.key.ID) }

// start runs a task of "report" and returns it with the call the agent got.
func (e *env) start(ttl time.Duration) (tasks.Task, *agentproto.Message) {
	e.t.Helper()
	return e.startSpec(ttl, nil)
}

// startSpec is start with change, if set, applied to the task's Spec.
func (e *env) startSpec(ttl time.Duration, change func(*tasks.Spec)) (tasks.Task, *agentproto.Message) {
	e.t.Helper()
	spec := e.spec(ttl)
	if change != nil {
		change(&spec)
	}
	task, err := e.m.Run(context.Background(), spec)
	if err != nil {
		e.t.Fatalf("Run: %v", err)
	}
	m := e.tr.Next()
	if m == nil || m.Type != agentproto.TypeCall {
		e.t.Fatalf("the agent got %+v, want a call", m)
	}
	return task, m
}

// spec picks a call of "report" and returns the Spec of a task of it.
func (e *env) spec(ttl time.Duration) tasks.Spec {
	e.t.Helper()
	ctx := context.Background()
	tool := e.reg.Snapshot(e.proj.ID).Tools["report"]
	call, res := route.Pick(ctx, e.reg, e.proj.ID, func(s *agents.Snapshot) ([]*agents.Replica, time.Time, bool) {
		t := s.Tools["report"]
		if t == nil {
			return nil, time.Time{}, false
		}
		return t.Replicas, t.GraceUntil, true
	}, route.Request{Kind: agentproto.KindTool, Name: "report", Args: json.RawMessage(`{}`), Wait: e.m.Limit(ctx, e.proj.ID)})
	if call == nil {
		e.t.Fatalf("Pick: %v %s", res.Outcome, res.Detail)
	}
	return tasks.Spec{Key: e.key, Tool: tool, Call: call, Era: "2026-07-28", TTL: ttl, Start: time.Now()}
}

// eventually polls cond until it holds, for at most 10 s: tasks run over a
// real SQLite store, whose file I/O a synctest bubble cannot fake.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (e *env) wait(id string) tasks.Task {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t, err := e.m.Wait(ctx, e.owner(), e.proj.ID, id)
	if err != nil {
		e.t.Fatalf("Wait: %v", err)
	}
	return t
}

// stored reads the task from the store as another gateway would.
func (e *env) stored(id string) store.Task {
	e.t.Helper()
	t, err := e.st.Task(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return t
}

const okResult = `{"content":[{"type":"text","text":"42 pages"}]}`

func TestTaskCompletes(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		e := newEnv(t, open(t), store.ProjectSettings{}, tasks.Options{})
		task, call := e.start(0)
		if task.Status != tasks.Working || !strings.HasPrefix(task.ID, "task_") || len(task.ID) != 31 {
			t.Fatalf("Run = %s %q, want a working task_…", task.Status, task.ID)
		}
		// Stored before Run returned: any gateway finds it.
		if got := e.stored(task.ID); got.Status != tasks.Working || got.TTL != 24*time.Hour {
			t.Fatalf("stored = %s ttl %v, want working, 24h (the project's cap)", got.Status, got.TTL)
		}
		e.tr.Reply(&agentproto.Message{Type: agentproto.TypeResult, ID: call.ID, Result: json.RawMessage(okResult)})
		got := e.wait(task.ID)
		if got.Status != tasks.Completed || string(got.Result) != okResult {
			t.Fatalf("Wait = %s %s, want completed with the result", got.Status, got.Result)
		}
		if s := e.stored(task.ID); s.Status != tasks.Completed || string(s.Result) != okResult {
			t.Fatalf("stored = %s %s", s.Status, s.Result)
		}
		eventually(t, "the call logged", func() bool { return len(e.calls.all()) == 1 })
		c := e.calls.all()[0]
		if c.TaskID != task.ID || c.Outcome != store.OutcomeOK || !c.Billable || c.Name != "report" || c.KeyID != e.key.ID {
			t.Errorf("logged %+v, want one billable ok call of report with the task id", c)
		}
	})
}

func TestTaskProgressIsStatusMessage(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		e := newEnv(t, open(t), store.ProjectSettings{}, tasks.Options{})
		task, call := e.start(0)
		for _, line := range []string{"page 1 of 3", "page 2 of 3", "page 3 of 3"} {
			e.tr.Reply(&agentproto.Message{Type: agentproto.TypeProgress, ID: call.ID, Message: line})
		}
		// The latest line wins, in memory at once and in the store within
		// a second (writes are throttled).
		eventually(t, "the store's status message", func() bool { return e.stored(task.ID).StatusMessage == "page 3 of 3" })
		got, err := e.m.Get(context.Background(), e.owner(), e.proj.ID, task.ID)
		if err != nil || got.StatusMessage != "page 3 of 3" || got.Status != tasks.Working {
			t.Fatalf("Get = %s %q %v", got.Status, got.StatusMessage, err)
		}
		e.tr.Reply(&agentproto.Message{Type: agentproto.TypeResult, ID: call.ID, Result: json.RawMessage(okResult)})
		e.wait(task.ID)
	})
}

// testQuestions passes an ask's input requests as they are and the
// client's responses back as the agent's answer.
type testQuestions struct{}

func (testQuestions) InputRequests(q *agentproto.Message) (json.RawMessage, error) {
	if q.Type != agentproto.TypeAsk {
		return nil, errors.New("only asks")
	}
	return q.Requests, nil
}

func (testQuestions) Answer(call *route.Call, q *agentproto.Message, asked json.RawMessage, responses map[string]json.RawMessage) {
	b, _ := json.Marshal(responses)
	call.Respond(b, "", 0)
}

func TestTaskQuestion(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		e := newEnv(t, open(t), store.ProjectSettings{}, tasks.Options{Questions: testQuestions{}})
		var mu sync.Mutex
		var seen []tasks.Status
		defer e.m.Subscribe(func(t tasks.Task) { mu.Lock(); seen = append(seen, t.Status); mu.Unlock() })()
		task, call := e.start(0)
		reqs := `{"name":{"method":"elicitation/create","params":{"message":"Your name?","requestedSchema":{"type":"object"}}}}`
		e.tr.Reply(&agentproto.Message{Type: agentproto.TypeAsk, ID: call.ID, Requests: json.RawMessage(reqs)})
		got := e.wait(task.ID)
		if got.Status != tasks.InputRequired || string(got.InputRequests) != reqs {
			t.Fatalf("Wait = %s %s, want input_required with the requests", got.Status, got.InputRequests)
		}
		if s := e.stored(task.ID); s.Status != tasks.InputRequired {
			t.Fatalf("stored = %s, want input_required", s.Status)
		}
		ctx := context.Background()
		err := e.m.Answer(ctx, e.owner(), e.proj.ID, task.ID, map[string]json.RawMessage{"other": json.RawMessage(`{}`)})
		if !errors.Is(err, tasks.ErrBadResponses) || !strings.Contains(err.Error(), `the task asked no input request "other"`) {
			t.Fatalf("Answer of a key never asked = %v", err)
		}
		resp := map[string]json.RawMessage{"name": json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`)}
		if err := e.m.Answer(ctx, e.owner(), e.proj.ID, task.ID, resp); err != nil {
			t.Fatal(err)
		}
		ans := e.tr.Next()
		if ans.Type != agentproto.TypeAnswered || !strings.Contains(string(ans.Responses), `"Ada"`) {
			t.Fatalf("the agent got %s %s, want the answer", ans.Type, ans.Responses)
		}
		e.tr.Reply(&agentproto.Message{Type: agentproto.TypeResult, ID: call.ID, Result: json.RawMessage(okResult)})
		if got := e.wait(task.ID); got.Status != tasks.Completed || got.InputRequests != nil {
			t.Fatalf("Wait = %s %s, want completed", got.Status, got.InputRequests)
		}
		mu.Lock()
		defer mu.Unlock()
		want := []tasks.Status{tasks.InputRequired, tasks.Working, tasks.Completed}
		if strings.Join(statuses(seen), ",") != strings.Join(statuses(want), ",") {
			t.Errorf("subscriber saw %v, want %v", seen, want)
		}
	})
}

func statuses(l []tasks.Status) []string {
	var out []string
	for _, s := range l {
		out = append(out, string(s))
	}
	return out
}

func TestTaskCancel(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		e := newEnv(t, open(t), store.ProjectSettings{}, tasks.Options{})
		task, call := e.start(0)
		got, err := e.m.Cancel(context.Background(), e.owner(), e.proj.ID, task.ID)
		if err != nil || got.Status != tasks.Cancelled {
			t.Fatalf("Cancel = %s, %v; want cancelled", got.Status, err)
		}
		// The agent's call is cancelled.
		m := e.tr.Next()
		if m.Type != agentproto.TypeCancel || m.ID != call.ID {
			t.Fatalf("the agent got %s %s, want a cancel of %s", m.Type, m.ID, call.ID)
		}
		// A result that arrives later is dropped.
		e.tr.Reply(&agentproto.Message{Type: agentproto.TypeResult, ID: call.ID, Result: json.RawMessage(okResult)})
		eventually(t, "the call logged", func() bool { return len(e.calls.all()) == 1 })
		if s := e.stored(task.ID); s.Status != tasks.Cancelled || s.Result != nil {
			t.Fatalf("stored = %s %s, want cancelled with no result", s.Status, s.Result)
		}
		if c := e.calls.all()[0]; c.Outcome != store.OutcomeCancelled || c.TaskID != task.ID {
			t.Errorf("logged %s %s, want cancelled", c.Outcome, c.TaskID)
		}
		// Cancelling again is no error and changes nothing.
		if again, err := e.m.Cancel(context.Background(), e.owner(), e.proj.ID, task.ID); err != nil || again.Status != tasks.Cancelled {
			t.Errorf("Cancel again = %s, %v", again.Status, err)
		}
	})
}

func TestTaskLimit(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		e := newEnv(t, open(t), store.ProjectSettings{LongestTaskMs: 300}, tasks.Options{})
		task, call := e.start(0)
		got := e.wait(task.ID)
		const want = "The task ran longer than the project's longest task (300ms) and was stopped."
		if got.Status != tasks.Failed || got.StatusMessage != want || got.Error == nil || got.Error.Message != want {
			t.Fatalf("Wait = %s %q %+v, want failed %q", got.Status, got.StatusMessage, got.Error, want)
		}
		if m := e.tr.Next(); m.Type != agentproto.TypeCancel || m.ID != call.ID {
			t.Fatalf("the agent got %s, want a cancel", m.Type)
		}
	})
}

func TestTaskDisconnect(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		e := newEnv(t, open(t), store.ProjectSettings{}, tasks.Options{})
		task, _ := e.start(0)
		e.tr.Close("gone")
		got := e.wait(task.ID)
		if got.Status != tasks.Failed || got.StatusMessage != route.MsgDisconnected {
			t.Fatalf("Wait = %s %q, want failed %q", got.Status, got.StatusMessage, route.MsgDisconnected)
		}
		eventually(t, "the call logged", func() bool { return len(e.calls.all()) == 1 })
		if c := e.calls.all()[0]; c.Outcome != store.OutcomeDisconnected {
			t.Errorf("logged %s, want disconnected", c.Outcome)
		}
	})
}

// A per-person remote that refused the person's upstream token (-32044)
// ends the task with the front's answer as an isError result: the code
// never reaches a client.
func TestTaskUpstreamUnauthorized(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		e := newEnv(t, open(t), store.ProjectSettings{}, tasks.Options{})
		const answer = "Connect your mcp.example.com account to use report: open https://gw.example.com/connect/key_agent, sign in there, then call report again."
		task, call := e.startSpec(0, func(s *tasks.Spec) {
			s.Unauthorized = func(context.Context) string { return answer }
		})
		e.tr.Reply(&agentproto.Message{Type: agentproto.TypeError, ID: call.ID, Message: "the remote refused the person's token", Code: agentproto.CodeUpstreamUnauthorized})
		got := e.wait(task.ID)
		want := `{"content":[{"text":"` + answer + `","type":"text"}],"isError":true}`
		if got.Status != tasks.Completed || got.Error != nil || string(got.Result) != want {
			t.Fatalf("Wait = %s %s error %+v, want completed with %s", got.Status, got.Result, got.Error, want)
		}
	})
}

func TestTaskOwner(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		e := newEnv(t, open(t), store.ProjectSettings{}, tasks.Options{})
		task, call := e.start(0)
		ctx := context.Background()
		other := tasks.Owner("key:key_other")
		if _, err := e.m.Get(ctx, other, e.proj.ID, task.ID); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("Get by another owner = %v, want ErrNotFound", err)
		}
		if _, err := e.m.Get(ctx, e.owner(), e.proj.ID+1, task.ID); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("Get in another project = %v, want ErrNotFound", err)
		}
		if _, err := e.m.Cancel(ctx, other, e.proj.ID, task.ID); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("Cancel by another owner = %v, want ErrNotFound", err)
		}
		if l, _, err := e.m.List(ctx, other, e.proj.ID, "", 0); err != nil || len(l) != 0 {
			t.Errorf("List by another owner = %d tasks, %v", len(l), err)
		}
		if l, _, err := e.m.List(ctx, e.owner(), e.proj.ID, "", 0); err != nil || len(l) != 1 || l[0].ID != task.ID {
			t.Errorf("List by the owner = %v, %v", l, err)
		}
		e.tr.Reply(&agentproto.Message{Type: agentproto.TypeResult, ID: call.ID, Result: json.RawMessage(okResult)})
		e.wait(task.ID)
		if _, err := e.m.Get(ctx, other, e.proj.ID, task.ID); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("Get of the stored task by another owner = %v, want ErrNotFound", err)
		}
	})
}

// grants is one OAuth grant of user 7.
type grants struct{}

func (grants) OAuthGrant(ctx context.Context, id string) (store.OAuthGrant, error) {
	return store.OAuthGrant{ID: id, UserID: 7}, nil
}

func TestTaskOwnerOAuth(t *testing.T) {
	m := tasks.New(tasks.Options{Store: teststores.SQLite(t), Calls: &calls{}, Grants: grants{}})
	ctx := context.Background()
	a, _ := m.OwnerOf(ctx, store.Key{ID: "app_1", OAuth: true})
	b, _ := m.OwnerOf(ctx, store.Key{ID: "app_2", OAuth: true})
	k, _ := m.OwnerOf(ctx, store.Key{ID: "key_1"})
	if a != "user:7" || b != "user:7" || k != "key:key_1" {
		t.Errorf("owners = %q %q %q, want user:7 for both grants of the person, key:key_1 for a key", a, b, k)
	}
}

func TestTaskTTLCapped(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		e := newEnv(t, open(t), store.ProjectSettings{TaskTTLMs: int64(time.Hour / time.Millisecond)}, tasks.Options{})
		long, c1 := e.start(48 * time.Hour)
		short, c2 := e.start(time.Minute)
		if long.TTL != time.Hour || short.TTL != time.Minute {
			t.Errorf("TTLs = %v, %v; want 1h (capped), 1m", long.TTL, short.TTL)
		}
		for _, c := range []*agentproto.Message{c1, c2} {
			e.tr.Reply(&agentproto.Message{Type: agentproto.TypeResult, ID: c.ID, Result: json.RawMessage(okResult)})
		}
		e.wait(long.ID)
		e.wait(short.ID)
	})
}

func TestTaskPruneAndExpiry(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		var mu sync.Mutex
		now := time.Now()
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		e := newEnv(t, open(t), store.ProjectSettings{}, tasks.Options{Now: clock, PruneEvery: 10 * time.Millisecond})
		task, call := e.start(time.Minute)
		e.tr.Reply(&agentproto.Message{Type: agentproto.TypeResult, ID: call.ID, Result: json.RawMessage(okResult)})
		e.wait(task.ID)
		mu.Lock()
		now = now.Add(time.Minute + time.Second)
		mu.Unlock()
		// Expired: gone for the client at once, from the store at the next prune.
		if _, err := e.m.Get(context.Background(), e.owner(), e.proj.ID, task.ID); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("Get of an expired task = %v, want ErrNotFound", err)
		}
		eventually(t, "the task pruned", func() bool {
			_, err := e.st.Task(context.Background(), task.ID)
			return errors.Is(err, store.ErrNotFound)
		})
	})
}

func TestTaskFailGateway(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		st := open(t)
		e := newEnv(t, st, store.ProjectSettings{}, tasks.Options{Gateway: "gw-a"})
		task, _ := e.start(0)
		// Gateway b sees a stop in gw-a's heartbeats.
		b := tasks.New(tasks.Options{Store: st, Calls: &calls{}, Gateway: "gw-b", Log: quiet})
		if err := b.FailGateway(context.Background(), "gw-a"); err != nil {
			t.Fatal(err)
		}
		got, err := b.Get(context.Background(), e.owner(), e.proj.ID, task.ID)
		if err != nil || got.Status != tasks.Failed || got.StatusMessage != "The gateway running this task stopped." {
			t.Fatalf("Get on gw-b = %s %q %v", got.Status, got.StatusMessage, err)
		}
	})
}

func TestTaskShutdown(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		e := newEnv(t, open(t), store.ProjectSettings{}, tasks.Options{})
		task, call := e.start(0)
		e.m.Close()
		if s := e.stored(task.ID); s.Status != tasks.Failed || s.StatusMessage != "The gateway running this task shut down." {
			t.Fatalf("stored after Close = %s %q", s.Status, s.StatusMessage)
		}
		if m := e.tr.Next(); m.Type != agentproto.TypeCancel || m.ID != call.ID {
			t.Fatalf("the agent got %s, want a cancel", m.Type)
		}
	})
}

// A client may answer a round's input requests one at a time (SEP-2663):
// right after a partial answer the task is still input_required and shows
// only the request left, and the agent gets every answer at once. (An
// answer once made the task working at once, so the next answer was
// ignored and the task hung.)
func TestTaskPartialAnswers(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		e := newEnv(t, open(t), store.ProjectSettings{}, tasks.Options{Questions: testQuestions{}})
		task, call := e.start(0)
		reqs := `{"confirm":{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object"}}},` +
			`"name":{"method":"elicitation/create","params":{"message":"Your name?","requestedSchema":{"type":"object"}}}}`
		e.tr.Reply(&agentproto.Message{Type: agentproto.TypeAsk, ID: call.ID, Requests: json.RawMessage(reqs)})
		if got := e.wait(task.ID); got.Status != tasks.InputRequired {
			t.Fatalf("Wait = %s, want input_required", got.Status)
		}
		ctx := context.Background()
		name := map[string]json.RawMessage{"name": json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`)}
		if err := e.m.Answer(ctx, e.owner(), e.proj.ID, task.ID, name); err != nil {
			t.Fatal(err)
		}
		got, err := e.m.Get(ctx, e.owner(), e.proj.ID, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		var left map[string]json.RawMessage
		json.Unmarshal(got.InputRequests, &left)
		if _, ok := left["confirm"]; got.Status != tasks.InputRequired || len(left) != 1 || !ok {
			t.Fatalf("after one of two answers: %s %s, want input_required with confirm left", got.Status, got.InputRequests)
		}
		confirm := map[string]json.RawMessage{"confirm": json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)}
		if err := e.m.Answer(ctx, e.owner(), e.proj.ID, task.ID, confirm); err != nil {
			t.Fatal(err)
		}
		ans := e.tr.Next()
		if ans.Type != agentproto.TypeAnswered || !strings.Contains(string(ans.Responses), `"Ada"`) || !strings.Contains(string(ans.Responses), `"confirm":true`) {
			t.Fatalf("the agent got %s %s, want both answers at once", ans.Type, ans.Responses)
		}
		e.tr.Reply(&agentproto.Message{Type: agentproto.TypeResult, ID: call.ID, Result: json.RawMessage(okResult)})
		if got := e.wait(task.ID); got.Status != tasks.Completed {
			t.Fatalf("Wait = %s, want completed", got.Status)
		}
	})
}
