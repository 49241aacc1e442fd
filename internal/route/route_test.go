package route_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/route/routetest"
)

// These tests run the router against replicas on in-memory transports,
// inside a synctest bubble: time is fake, so a 30 s wait takes no time and
// every step is deterministic. The test plays each agent.

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// replica is one connected agent replica, played by the test.
type replica struct {
	rep *agents.Replica
	tr  *routetest.Transport
}

// connect adds a replica offering the tool "echo" to reg, serving on an
// in-memory transport until the test closes it.
func connect(t *testing.T, reg *agents.Registry, id string) *replica {
	t.Helper()
	tr := routetest.New()
	rep := &agents.Replica{
		ID: id, ProjectID: 1, AgentKey: "key_a", Since: time.Now(),
		Reg: &agentproto.Registration{Protocol: agentproto.Version, Name: "a",
			Tools: []agentproto.Tool{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}}},
	}
	conn := route.NewConn(tr, quiet, route.Events{Drain: func() { reg.Remove(rep) }})
	rep.Conn = conn
	reg.Add(rep, nil)
	go func() {
		conn.Serve(context.Background())
		reg.Remove(rep)
	}()
	t.Cleanup(func() { tr.Close("") })
	return &replica{rep: rep, tr: tr}
}

func echoTarget(s *agents.Snapshot) ([]*agents.Replica, time.Time, bool) {
	tl := s.Tools["echo"]
	if tl == nil {
		return nil, time.Time{}, false
	}
	return tl.Replicas, tl.GraceUntil, true
}

func request(wait time.Duration) route.Request {
	return route.Request{Kind: agentproto.KindTool, Name: "echo", Args: json.RawMessage(`{}`), Wait: wait}
}

// deliver runs route.Deliver in the background; receive its Result from the
// channel.
func deliver(ctx context.Context, reg *agents.Registry, req route.Request) <-chan route.Result {
	out := make(chan route.Result, 1)
	go func() { out <- route.Deliver(ctx, reg, 1, echoTarget, req) }()
	return out
}

// oneCall returns the one replica of reps that got a call since the last
// look, and the call; it fails unless exactly one call went out in all.
func oneCall(t *testing.T, reps ...*replica) (*replica, *agentproto.Message) {
	t.Helper()
	var (
		to   *replica
		call *agentproto.Message
		n    int
	)
	for _, r := range reps {
		for _, m := range r.tr.Sent() {
			if m.Type != agentproto.TypeCall {
				t.Fatalf("replica %s got %q, want a call", r.rep.ID, m.Type)
			}
			to, call = r, m
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d calls went out, want 1", n)
	}
	return to, call
}

func newRegistry() *agents.Registry { return agents.New(&agents.Options{Logger: quiet}) }

func result(id, text string) *agentproto.Message {
	return &agentproto.Message{Type: agentproto.TypeResult, ID: id, Result: json.RawMessage(`{"content":[{"type":"text","text":"` + text + `"}]}`)}
}

// A call goes to exactly one replica, once; a second answer to it is
// dropped; and a call whose replica leaves fails as disconnected and is not
// sent again to another.
func TestRouteAtMostOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry()
		a, b := connect(t, reg, "r-a"), connect(t, reg, "r-b")

		done := deliver(t.Context(), reg, request(30*time.Second))
		synctest.Wait()
		to, call := oneCall(t, a, b)
		to.tr.Reply(result(call.ID, "first"))
		to.tr.Reply(result(call.ID, "second"))
		res := <-done
		if res.Outcome != route.OK || !strings.Contains(string(res.Result), "first") || res.ID != call.ID {
			t.Fatalf("Result = %v %s (id %s), want ok with the first answer to %s", res.Outcome, res.Result, res.ID, call.ID)
		}
		synctest.Wait()
		if a.rep.Inflight()+b.rep.Inflight() != 0 {
			t.Errorf("in flight after the answer: %d + %d, want 0", a.rep.Inflight(), b.rep.Inflight())
		}

		// The replica that takes the next call leaves before answering.
		done = deliver(t.Context(), reg, request(30*time.Second))
		synctest.Wait()
		to, _ = oneCall(t, a, b)
		to.tr.Close("")
		res = <-done
		if res.Outcome != route.Disconnected || res.Detail != "Agent disconnected before returning a result." {
			t.Fatalf("Result = %v %q, want disconnected with its message", res.Outcome, res.Detail)
		}
		if res.Replica != to.rep {
			t.Errorf("Replica = %v, want %s", res.Replica, to.rep.ID)
		}
		synctest.Wait()
		for _, r := range []*replica{a, b} {
			if r != to && len(r.tr.Sent()) != 0 {
				t.Errorf("replica %s got the call again after %s left", r.rep.ID, to.rep.ID)
			}
		}
	})
}

// A caller that gives up cancels the call at the agent, which then answers
// too late: the answer is dropped.
func TestRouteCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry()
		a := connect(t, reg, "r-a")
		ctx, cancel := context.WithCancel(t.Context())
		done := deliver(ctx, reg, request(30*time.Second))
		synctest.Wait()
		_, call := oneCall(t, a)

		cancel()
		res := <-done
		if res.Outcome != route.Cancelled || res.Detail != "" {
			t.Fatalf("Result = %v %q, want cancelled", res.Outcome, res.Detail)
		}
		if m := a.tr.Next(); m.Type != agentproto.TypeCancel || m.ID != call.ID || m.Reason != agentproto.ReasonCancelled {
			t.Fatalf("agent got %+v, want a cancel of %s with reason %q", m, call.ID, agentproto.ReasonCancelled)
		}
		a.tr.Reply(result(call.ID, "late"))
		synctest.Wait()
		if n := a.rep.Inflight(); n != 0 {
			t.Errorf("in flight = %d after the cancel, want 0", n)
		}
	})
}

// A call the agent does not answer within the wait times out at exactly the
// wait, with the message the client reads, and the agent is told to stop.
func TestRouteTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry()
		a := connect(t, reg, "r-a")
		req := request(1500 * time.Millisecond)
		req.Exposed = "a_echo"
		start := time.Now()
		done := deliver(t.Context(), reg, req)
		synctest.Wait()
		_, call := oneCall(t, a)
		if want := start.Add(1500 * time.Millisecond).UnixMilli(); call.Deadline != want {
			t.Errorf("call deadline = %d, want %d (start + wait)", call.Deadline, want)
		}

		res := <-done
		if res.Outcome != route.TimedOut || res.Detail != `Request for tool "a_echo" timed out after 1500ms` {
			t.Fatalf("Result = %v %q, want the timeout message", res.Outcome, res.Detail)
		}
		if waited := time.Since(start); waited != 1500*time.Millisecond {
			t.Errorf("timed out after %v, want 1.5s", waited)
		}
		if m := a.tr.Next(); m.Type != agentproto.TypeCancel || m.ID != call.ID || m.Reason != agentproto.ReasonTimeout {
			t.Fatalf("agent got %+v, want a cancel of %s with reason %q", m, call.ID, agentproto.ReasonTimeout)
		}
	})
}

// Progress reaches the caller at most 4 lines a second; a line that comes
// too soon is held and replaced by a newer one (the latest wins), and each
// line is cut to 200 characters.
func TestRouteProgressThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry()
		a := connect(t, reg, "r-a")
		type line struct {
			text string
			at   time.Duration
		}
		var got []line
		start := time.Now()
		req := request(30 * time.Second)
		req.Progress = func(s string) { got = append(got, line{s, time.Since(start)}) }
		done := deliver(t.Context(), reg, req)
		synctest.Wait()
		_, call := oneCall(t, a)
		progress := func(s string) {
			a.tr.Reply(&agentproto.Message{Type: agentproto.TypeProgress, ID: call.ID, Message: s})
		}

		for _, s := range []string{"1", "2", "3", "4"} {
			progress(s)
		}
		synctest.Wait()
		for _, s := range []string{"5", "6", "7"} {
			progress(s)
		}
		synctest.Wait()
		time.Sleep(2 * time.Second)
		long := strings.Repeat("é", 300)
		progress(long)
		synctest.Wait()
		a.tr.Reply(result(call.ID, "done"))
		res := <-done

		want := []line{{"1", 0}, {"2", 0}, {"3", 0}, {"4", 0}, {"7", time.Second}, {strings.Repeat("é", 200), 2 * time.Second}}
		if len(got) != len(want) {
			t.Fatalf("progress = %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("progress line %d = %q at %v, want %q at %v", i, got[i].text, got[i].at, want[i].text, want[i].at)
			}
		}
		if res.Outcome != route.OK || len(res.Progress) != len(want) || res.Progress[4] != "7" {
			t.Errorf("Result = %v with logged progress %q, want ok with the %d lines passed on", res.Outcome, res.Progress, len(want))
		}
	})
}

// A line the throttle holds when the result arrives is passed on just
// before it: the latest line wins, however the windows of the agent and the
// gateway fall.
func TestRouteProgressHeldLineBeforeResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry()
		a := connect(t, reg, "r-a")
		var got []string
		req := request(30 * time.Second)
		req.Progress = func(s string) { got = append(got, s) }
		done := deliver(t.Context(), reg, req)
		synctest.Wait()
		_, call := oneCall(t, a)
		for _, s := range []string{"1", "2", "3", "4", "5", "6"} {
			a.tr.Reply(&agentproto.Message{Type: agentproto.TypeProgress, ID: call.ID, Message: s})
		}
		synctest.Wait()
		a.tr.Reply(result(call.ID, "done"))
		res := <-done
		if want := []string{"1", "2", "3", "4", "6"}; !slices.Equal(got, want) || !slices.Equal(res.Progress, want) {
			t.Errorf("progress passed on %q, logged %q; want %q", got, res.Progress, want)
		}
	})
}

// A replica that drains gets no new calls but answers the one it has.
func TestRouteDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry()
		a := connect(t, reg, "r-a")
		first := deliver(t.Context(), reg, request(30*time.Second))
		synctest.Wait()
		_, call := oneCall(t, a)
		b := connect(t, reg, "r-b")

		a.tr.Reply(&agentproto.Message{Type: agentproto.TypeDrain})
		synctest.Wait()
		for range 3 {
			next := deliver(t.Context(), reg, request(30*time.Second))
			synctest.Wait()
			to, c := oneCall(t, a, b)
			if to != b {
				t.Fatalf("a call went to the draining replica %s", to.rep.ID)
			}
			b.tr.Reply(result(c.ID, "b"))
			if res := <-next; res.Outcome != route.OK {
				t.Fatalf("call on %s = %v, want ok", b.rep.ID, res.Outcome)
			}
		}
		a.tr.Reply(result(call.ID, "a"))
		if res := <-first; res.Outcome != route.OK || res.Replica != a.rep {
			t.Fatalf("the draining replica's call = %v on %v, want ok on %s", res.Outcome, res.Replica, a.rep.ID)
		}
	})
}

// Each call goes to a replica with the fewest calls in flight.
func TestRouteLeastInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry()
		reps := []*replica{connect(t, reg, "r-a"), connect(t, reg, "r-b"), connect(t, reg, "r-c")}
		taken := map[*replica]*agentproto.Message{}
		for range reps {
			deliver(t.Context(), reg, request(30*time.Second))
			synctest.Wait()
			to, call := oneCall(t, reps...)
			if taken[to] != nil {
				t.Fatalf("%s got a second call while another replica had none", to.rep.ID)
			}
			taken[to] = call
		}
		// One replica answers; the next call goes to it, the only one free.
		free := reps[1]
		free.tr.Reply(result(taken[free].ID, "b"))
		synctest.Wait()
		deliver(t.Context(), reg, request(30*time.Second))
		synctest.Wait()
		if to, _ := oneCall(t, reps...); to != free {
			t.Errorf("the call went to %s (%d in flight), want %s (free)", to.rep.ID, to.rep.Inflight()-1, free.rep.ID)
		}
		for _, r := range reps {
			r.tr.Close("")
		}
	})
}

// A target that is not offered fails at once; one whose last replica left
// waits through the grace period for a replica to come back, within the
// wait; one offered with no replica at all fails at once with the message
// the client reads.
func TestRouteNoReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry()
		if res := <-deliver(t.Context(), reg, request(time.Second)); res.Outcome != route.NotFound || res.Reached() {
			t.Fatalf("Result = %v (reached %v), want not found, not reached", res.Outcome, res.Reached())
		}
		a := connect(t, reg, "r-a")
		a.tr.Close("")
		synctest.Wait()

		// A replica comes back within the grace period: the call waits for it.
		start := time.Now()
		done := deliver(t.Context(), reg, request(30*time.Second))
		time.Sleep(2 * time.Second)
		b := connect(t, reg, "r-b")
		synctest.Wait()
		_, call := oneCall(t, b)
		b.tr.Reply(result(call.ID, "b"))
		if res := <-done; res.Outcome != route.OK || time.Since(start) != 2*time.Second {
			t.Fatalf("Result = %v after %v, want ok after 2s", res.Outcome, time.Since(start))
		}

		// Still none when the wait ends within the grace period: timed out.
		b.tr.Close("")
		synctest.Wait()
		start = time.Now()
		res := <-deliver(t.Context(), reg, request(3*time.Second))
		if res.Outcome != route.TimedOut || res.Reached() || time.Since(start) != 3*time.Second {
			t.Fatalf("Result = %v (reached %v) after %v, want timed out, not reached, after 3s", res.Outcome, res.Reached(), time.Since(start))
		}

		// Offered, with no replica and no grace period (every replica is
		// switched off): no replica, at once.
		none := func(*agents.Snapshot) ([]*agents.Replica, time.Time, bool) { return nil, time.Time{}, true }
		req := request(30 * time.Second)
		req.Exposed = "a_echo"
		res = route.Deliver(t.Context(), reg, 1, none, req)
		want := `No replica of the agent that offers "a_echo" can take calls right now. Try again in a few seconds.`
		if res.Outcome != route.NoReplica || res.Detail != want || res.Reached() {
			t.Fatalf("Result = %v %q (reached %v), want no replica: %q", res.Outcome, res.Detail, res.Reached(), want)
		}
	})
}

// Progress lines the agent sent before a question reach the client before
// the question does, however the call's channels come ready: the client
// may answer the question at once, or the question may end the call.
func TestRouteProgressBeforeQuestion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry()
		a := connect(t, reg, "r-a")
		for i := range 40 {
			call, sent := sendOne(t, reg, a)
			a.tr.Reply(&agentproto.Message{Type: agentproto.TypeProgress, ID: sent.ID, Message: "looked it up"})
			a.tr.Reply(&agentproto.Message{Type: agentproto.TypeConfirm, ID: sent.ID, Input: "q1", Message: "Delete it?"})
			synctest.Wait() // both wait in the call's channels
			var got []string
			res := call.Wait(t.Context(), func(s string) { got = append(got, s) })
			if res.Question == nil || !slices.Equal(got, []string{"looked it up"}) {
				t.Fatalf("round %d: question %v after progress %q; want the question after the line", i, res.Question, got)
			}
			a.tr.Reply(result(sent.ID, "done"))
			if res = call.Wait(t.Context(), nil); res.Outcome != route.OK {
				t.Fatalf("round %d: %+v", i, res)
			}
		}
	})
}

// sendOne sends a call to a, the only replica, in a synctest bubble, and
// returns it with the message a got, which a then forgets (the next one
// sent is the next round's).
func sendOne(t *testing.T, reg *agents.Registry, a *replica) (*route.Call, *agentproto.Message) {
	t.Helper()
	call, res := route.Pick(t.Context(), reg, 1, echoTarget, request(30*time.Second))
	if call == nil {
		t.Fatalf("no replica: %+v", res)
	}
	call, res = call.Send(t.Context())
	if call == nil {
		t.Fatalf("not sent: %+v", res)
	}
	synctest.Wait()
	_, sent := oneCall(t, a)
	a.tr.Sent()
	return call, sent
}

// TestRouteKeepsOrderOfProgressAndLogs: progress lines and log messages
// reach the client in the order the agent sent them, while the call runs
// and when they are drained before its result (they used to travel on two
// channels, read in whichever order select chose).
func TestRouteKeepsOrderOfProgressAndLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry()
		a := connect(t, reg, "r-a")
		logMsg := func(id, data string) *agentproto.Message {
			return &agentproto.Message{Type: agentproto.TypeLog, ID: id, Level: "info", Data: json.RawMessage(`"` + data + `"`)}
		}
		for i := range 20 {
			call, sent := sendOne(t, reg, a)
			var got []string
			call.OnLog = func(m agentproto.Message) { got = append(got, "log "+string(m.Data)) }
			// Progress lines more than a second apart: the throttle passes
			// each at once.
			a.tr.Reply(&agentproto.Message{Type: agentproto.TypeProgress, ID: sent.ID, Message: "one"})
			a.tr.Reply(logMsg(sent.ID, "after one"))
			a.tr.Reply(logMsg(sent.ID, "before two"))
			synctest.Wait()
			time.Sleep(2 * time.Second)
			a.tr.Reply(&agentproto.Message{Type: agentproto.TypeProgress, ID: sent.ID, Message: "two"})
			a.tr.Reply(logMsg(sent.ID, "last"))
			a.tr.Reply(result(sent.ID, "done"))
			synctest.Wait()
			res := call.Wait(t.Context(), func(s string) { got = append(got, "progress "+s) })
			want := []string{"progress one", `log "after one"`, `log "before two"`, "progress two", `log "last"`}
			if res.Outcome != route.OK || !slices.Equal(got, want) {
				t.Fatalf("round %d: %v, then %v; want %v, then the result", i, got, res.Outcome, want)
			}
		}
	})
}

// An agent's error with a JSON-RPC code ends the call as a protocol error:
// the code (a reserved one other than -32602 and -32603 made -32603), the
// message and the data travel in the Result; an error without one carries
// no code. A per-person remote's refused token (-32044) keeps its code,
// for the MCP front to act on.
func TestRouteProtocolError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry()
		a := connect(t, reg, "r-a")
		for _, tc := range []struct {
			code, want int
			msg, data  string
		}{
			{-32602, -32602, "bad dates", `{"field":"from"}`},
			{-32601, -32603, "no such method", ""},
			{4001, 4001, "archived", ""},
			{0, 0, "no such order", ""},
			{agentproto.CodeUpstreamUnauthorized, agentproto.CodeUpstreamUnauthorized, "the remote refused the person's token", ""},
		} {
			done := deliver(t.Context(), reg, request(30*time.Second))
			synctest.Wait()
			_, call := oneCall(t, a)
			a.tr.Reply(&agentproto.Message{Type: agentproto.TypeError, ID: call.ID, Message: tc.msg, Code: tc.code, Data: json.RawMessage(tc.data)})
			res := <-done
			if res.Outcome != route.ToolError || res.Detail != tc.msg || res.Code != tc.want || string(res.Data) != tc.data {
				t.Errorf("code %d: Result = %v %q code %d data %s, want error %q code %d data %s",
					tc.code, res.Outcome, res.Detail, res.Code, res.Data, tc.msg, tc.want, tc.data)
			}
		}
	})
}
