package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// finished records what the agent did with each finished call.
type finished struct {
	mu   sync.Mutex
	sent map[string]bool
	ch   chan string
}

func watchFinished(a *Agent) *finished {
	f := &finished{sent: map[string]bool{}, ch: make(chan string, 64)}
	a.testFinished = func(id string, sent bool) {
		f.mu.Lock()
		f.sent[id] = sent
		f.mu.Unlock()
		f.ch <- id
	}
	return f
}

// wait waits until call id finished and says whether its answer was sent.
func (f *finished) wait(t *testing.T, id string) bool {
	t.Helper()
	timeout := time.After(waitFor)
	for {
		f.mu.Lock()
		sent, ok := f.sent[id]
		f.mu.Unlock()
		if ok {
			return sent
		}
		select {
		case <-f.ch:
		case <-timeout:
			t.Fatalf("call %s did not finish", id)
		}
	}
}

// ctxReport is what a blocked handler saw when its context ended.
type ctxReport struct {
	err, cause error
	deadline   time.Time
	call       Call
}

// blockingTool registers a tool that waits for its context to end, reports
// it on the returned channel, and returns the context's error.
func blockingTool(t *testing.T, a *Agent, name string, opts ...ToolOption) (started chan string, reports chan ctxReport) {
	t.Helper()
	started, reports = make(chan string, 8), make(chan ctxReport, 8)
	must(t, AddTool(a, name, "blocks", func(ctx context.Context, _ emptyIn) (string, error) {
		call, _ := CallFrom(ctx)
		started <- call.ID
		<-ctx.Done()
		d, _ := ctx.Deadline()
		reports <- ctxReport{err: ctx.Err(), cause: context.Cause(ctx), deadline: d, call: call}
		return "", ctx.Err()
	}, opts...))
	return started, reports
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func TestCancel(t *testing.T) {
	g := newFakeGateway(t)
	a, _ := newTestAgent(t, g)
	f := watchFinished(a)
	started, reports := blockingTool(t, a, "wait")
	run(t, a)
	conn := g.accept(t)

	id := conn.call(agentproto.KindTool, "wait", "")
	receive(t, started, "the handler to start")
	conn.send(agentproto.Message{Type: agentproto.TypeCancel, ID: id, Reason: agentproto.ReasonCancelled})
	r := receive(t, reports, "the handler's context to end")
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("ctx.Err() = %v, want context.Canceled", r.err)
	}
	if want := "core: the gateway cancelled the call (cancelled)"; r.cause == nil || r.cause.Error() != want {
		t.Errorf("context.Cause = %v, want %q", r.cause, want)
	}
	if f.wait(t, id) {
		t.Error("the answer of a cancelled call was sent")
	}
	// A cancel for an unknown call is ignored; the connection still works.
	conn.send(agentproto.Message{Type: agentproto.TypeCancel, ID: "c-unknown", Reason: agentproto.ReasonTimeout})
	id2 := conn.call(agentproto.KindTool, "wait", "")
	receive(t, started, "the second handler to start")
	conn.send(agentproto.Message{Type: agentproto.TypeCancel, ID: id2, Reason: agentproto.ReasonTimeout})
	receive(t, reports, "the second handler's context to end")
}

func TestDeadline(t *testing.T) {
	g := newFakeGateway(t)
	a, _ := newTestAgent(t, g)
	started, reports := blockingTool(t, a, "wait")
	run(t, a)
	conn := g.accept(t)

	deadline := time.Now().Add(100 * time.Millisecond)
	id := conn.callUntil(agentproto.KindTool, "wait", "", deadline)
	receive(t, started, "the handler to start")
	r := receive(t, reports, "the deadline")
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("ctx.Err() = %v, want context.DeadlineExceeded", r.err)
	}
	want := time.UnixMilli(deadline.UnixMilli())
	if !r.deadline.Equal(want) || !r.call.Deadline.Equal(want) {
		t.Errorf("ctx deadline %v, Call.Deadline %v; want %v", r.deadline, r.call.Deadline, want)
	}
	if r.cause == nil || !strings.Contains(r.cause.Error(), "deadline for the call passed") {
		t.Errorf("context.Cause = %v", r.cause)
	}
	// The gateway drops a late answer; sending it is allowed.
	if m, _ := conn.answer(t, id); m.Type != agentproto.TypeError || m.Message != "context deadline exceeded" {
		t.Errorf("answer = %+v", m)
	}
}

func TestCallTimeout(t *testing.T) {
	g := newFakeGateway(t)
	a, _ := newTestAgent(t, g)
	started, reports := blockingTool(t, a, "wait", CallTimeout(50*time.Millisecond))
	run(t, a)
	conn := g.accept(t)

	gatewayDeadline := time.Now().Add(30 * time.Second)
	before := time.Now()
	id := conn.callUntil(agentproto.KindTool, "wait", "", gatewayDeadline)
	receive(t, started, "the handler to start")
	r := receive(t, reports, "the call timeout")
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("ctx.Err() = %v, want context.DeadlineExceeded", r.err)
	}
	if want := "core: the tool's CallTimeout of 50ms passed"; r.cause == nil || r.cause.Error() != want {
		t.Errorf("context.Cause = %v, want %q", r.cause, want)
	}
	if !r.deadline.After(before) || !r.deadline.Before(before.Add(waitFor)) {
		t.Errorf("ctx deadline %v is not the CallTimeout's", r.deadline)
	}
	if !r.call.Deadline.Equal(time.UnixMilli(gatewayDeadline.UnixMilli())) {
		t.Errorf("Call.Deadline = %v, want the gateway's %v", r.call.Deadline, gatewayDeadline)
	}
	if m, _ := conn.answer(t, id); m.Type != agentproto.TypeError || m.Message != "context deadline exceeded" {
		t.Errorf("answer = %+v, want the handler's error", m)
	}
}

func TestCallFrom(t *testing.T) {
	if _, ok := CallFrom(context.Background()); ok {
		t.Error("CallFrom outside a handler reported a call")
	}
	Progress(context.Background(), "nobody listens") // a no-op, not a panic

	g := newFakeGateway(t)
	a, _ := newTestAgent(t, g)
	calls := make(chan Call, 3)
	must(t, AddTool(a, "who", "d", func(ctx context.Context, _ emptyIn) (string, error) {
		c, ok := CallFrom(ctx)
		if !ok {
			return "", errors.New("no call")
		}
		calls <- c
		return "", nil
	}))
	must(t, a.Resource("test://who", ResourceOptions{Name: "who"}, func(ctx context.Context) (any, error) {
		c, _ := CallFrom(ctx)
		calls <- c
		return "", nil
	}))
	run(t, a)
	conn := g.accept(t)

	deadline := time.UnixMilli(time.Now().Add(time.Minute).UnixMilli())
	id := conn.callUntil(agentproto.KindTool, "who", `{}`, deadline)
	conn.answer(t, id)
	want := Call{ID: id, Kind: "tool", Tool: "who", KeyID: "key_42", KeyName: "claude", Deadline: deadline}
	if diff := cmp.Diff(want, receive(t, calls, "the call")); diff != "" {
		t.Errorf("CallFrom mismatch (-want +got):\n%s", diff)
	}
	id = conn.callUntil(agentproto.KindResource, "test://who", "", time.Time{})
	conn.answer(t, id)
	want = Call{ID: id, Kind: "resource", Tool: "test://who", KeyID: "key_42", KeyName: "claude"}
	if diff := cmp.Diff(want, receive(t, calls, "the resource read")); diff != "" {
		t.Errorf("CallFrom in a resource mismatch (-want +got):\n%s", diff)
	}
}

func TestProgressOverTheWire(t *testing.T) {
	g := newFakeGateway(t)
	a, _ := newTestAgent(t, g)
	long := strings.Repeat("é", 300)
	must(t, AddTool(a, "steps", "d", func(ctx context.Context, _ emptyIn) (string, error) {
		Progress(ctx, "fetched 120 of 400 rows")
		Progress(ctx, "")
		Progress(ctx, long)
		return "done", nil
	}))
	must(t, AddTool(a, "chatty", "d", func(ctx context.Context, _ emptyIn) (string, error) {
		for i := range 50 {
			Progress(ctx, fmt.Sprint("line ", i))
		}
		return "done", nil
	}))
	run(t, a)
	conn := g.accept(t)

	m, lines := conn.answer(t, conn.call(agentproto.KindTool, "steps", ""))
	if diff := cmp.Diff([]string{"fetched 120 of 400 rows", strings.Repeat("é", 200)}, lines); diff != "" {
		t.Errorf("progress mismatch (-want +got):\n%s", diff)
	}
	if m.Type != agentproto.TypeResult {
		t.Errorf("answer = %+v", m)
	}

	// 50 lines at once: the first 4 go, the rest are held back and dropped
	// with the result. answer fails on any line arriving after the result,
	// and so does the call after it.
	_, lines = conn.answer(t, conn.call(agentproto.KindTool, "chatty", ""))
	if diff := cmp.Diff([]string{"line 0", "line 1", "line 2", "line 3"}, lines); diff != "" {
		t.Errorf("progress mismatch (-want +got):\n%s", diff)
	}
	conn.answer(t, conn.call(agentproto.KindTool, "steps", ""))
}

func TestProgressThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type sent struct {
			at   time.Duration
			line string
		}
		var got []sent
		start := time.Now()
		th := newThrottle(func(line string) { got = append(got, sent{time.Since(start), line}) })

		for i := range 10 { // t=0: 4 go out, 6 wait, the latest wins
			th.line(fmt.Sprint(i))
		}
		time.Sleep(300 * time.Millisecond)
		th.line("a") // replaces "9"
		time.Sleep(time.Second)
		// t=1.3s: "a" went at 1s; three more may go now.
		th.line("b")
		th.line("c")
		th.line("d") // t=1.3s: the window (0.3s, 1.3s] holds a, b, c, d
		th.line("x") // held until a leaves the window at 2s
		time.Sleep(500 * time.Millisecond)
		th.line("e") // replaces x
		time.Sleep(time.Second)
		th.line("f") // t=2.8s: the window (1.8s, 2.8s] holds e only
		th.line("g")
		th.line("h")
		th.line("i") // held until e leaves the window at 3s
		synctest.Wait()
		th.stop() // the result went: i is dropped
		time.Sleep(5 * time.Second)
		th.line("j") // after stop: nothing

		want := []sent{
			{0, "0"}, {0, "1"}, {0, "2"}, {0, "3"},
			{time.Second, "a"},
			{1300 * time.Millisecond, "b"}, {1300 * time.Millisecond, "c"}, {1300 * time.Millisecond, "d"},
			{2 * time.Second, "e"},
			{2800 * time.Millisecond, "f"}, {2800 * time.Millisecond, "g"}, {2800 * time.Millisecond, "h"},
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(sent{})); diff != "" {
			t.Errorf("progress mismatch (-want +got):\n%s", diff)
		}
		// No second window ever held more than MaxProgressPerSec lines.
		for i := range got {
			n := 0
			for j := i; j < len(got) && got[j].at-got[i].at < time.Second; j++ {
				n++
			}
			if n > agentproto.MaxProgressPerSec {
				t.Errorf("%d lines within a second from %v", n, got[i].at)
			}
		}
	})
}

func TestSetEnabled(t *testing.T) {
	g := newFakeGateway(t)
	a, _ := newTestAgent(t, g)
	ok := func(context.Context, emptyIn) (string, error) { return "", nil }
	must(t, AddTool(a, "a", "d", ok))
	must(t, AddTool(a, "b", "d", ok))
	must(t, a.SetEnabled("b", false))
	run(t, a)
	conn := g.accept(t)

	disabled := func(reg json.RawMessage) map[string]bool {
		var r agentproto.Registration
		must(t, json.Unmarshal(reg, &r))
		out := map[string]bool{}
		for _, tool := range r.Tools {
			out[tool.Name] = tool.Disabled
		}
		return out
	}
	if diff := cmp.Diff(map[string]bool{"a": false, "b": true}, disabled(g.registrations()[0])); diff != "" {
		t.Errorf("first registration's disabled flags (-want +got):\n%s", diff)
	}

	must(t, a.SetEnabled("a", false))
	must(t, a.SetEnabled("b", true))
	for _, want := range []agentproto.Message{
		{Type: agentproto.TypeSetEnabled, Name: "a", Enabled: ptr(false)},
		{Type: agentproto.TypeSetEnabled, Name: "b", Enabled: ptr(true)},
	} {
		if diff := cmp.Diff(want, conn.next(t)); diff != "" {
			t.Errorf("set_enabled mismatch (-want +got):\n%s", diff)
		}
	}

	// The state outlives the connection.
	conn.drop()
	conn = g.accept(t)
	if diff := cmp.Diff(map[string]bool{"a": true, "b": false}, disabled(g.registrations()[1])); diff != "" {
		t.Errorf("registration after reconnect (-want +got):\n%s", diff)
	}
	must(t, a.SetEnabled("a", true))
	if diff := cmp.Diff(agentproto.Message{Type: agentproto.TypeSetEnabled, Name: "a", Enabled: ptr(true)}, conn.next(t)); diff != "" {
		t.Errorf("set_enabled on the new connection (-want +got):\n%s", diff)
	}
}

// SetEnabled tells the gateway this replica's state every time, even when
// it did not change here: the gateway's state is per replica, and another
// replica of the key (or a gateway that lost track) must not stand in for
// this one's.
func TestSetEnabledPerReplicaSentEvenWhenUnchanged(t *testing.T) {
	g := newFakeGateway(t)
	a, _ := newTestAgent(t, g)
	ok := func(context.Context, emptyIn) (string, error) { return "", nil }
	must(t, AddTool(a, "a", "d", ok))
	run(t, a)
	conn := g.accept(t)
	conn.answer(t, conn.call(agentproto.KindTool, "a", "")) // the agent is attached
	must(t, a.SetEnabled("a", true))                        // already on
	must(t, a.SetEnabled("a", false))
	must(t, a.SetEnabled("a", false)) // already off
	for _, want := range []agentproto.Message{
		{Type: agentproto.TypeSetEnabled, Name: "a", Enabled: ptr(true)},
		{Type: agentproto.TypeSetEnabled, Name: "a", Enabled: ptr(false)},
		{Type: agentproto.TypeSetEnabled, Name: "a", Enabled: ptr(false)},
	} {
		if diff := cmp.Diff(want, conn.next(t)); diff != "" {
			t.Errorf("set_enabled mismatch (-want +got):\n%s", diff)
		}
	}
}

func ptr[T any](v T) *T { return &v }
