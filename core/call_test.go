//go:build go1.25

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

	"github.com/spacefix/spacefix/core/internal/agentproto"
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
	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
	f := watchFinished(a)
	started, reports := blockingTool(t, a, "wait")
	p.play(a, script(t, connected+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"wait","deadline":"+30s","caller":{"keyId":"key_42","keyName":"claude"}}
-- do --
started
-- gateway --
{"type":"cancel","id":"c-1","reason":"cancelled"}
-- do --
cancelled c-1
-- gateway --
{"type":"cancel","id":"c-unknown","reason":"timeout"}
-- gateway --
{"type":"call","id":"c-2","kind":"tool","name":"wait","deadline":"+30s"}
-- do --
started
-- gateway --
{"type":"cancel","id":"c-2","reason":"timeout"}
-- do --
ended
`), actions{
		"started": func(string) { receive(t, started, "the handler to start") },
		"cancelled": func(id string) {
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
		},
		// A cancel for an unknown call is ignored; the connection still works.
		"ended": func(string) { receive(t, reports, "the second handler's context to end") },
	})
}

func TestDeadline(t *testing.T) {
	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
	started, reports := blockingTool(t, a, "wait")
	// The gateway drops a late answer; sending it is allowed.
	p.play(a, script(t, connected+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"wait","deadline":"+100ms"}
-- do --
deadline c-1
-- agent --
{"type":"error","id":"c-1","message":"context deadline exceeded"}
`), actions{"deadline": func(id string) {
		receive(t, started, "the handler to start")
		r := receive(t, reports, "the deadline")
		if !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("ctx.Err() = %v, want context.DeadlineExceeded", r.err)
		}
		want := time.UnixMilli(p.sent(id).Deadline)
		if !r.deadline.Equal(want) || !r.call.Deadline.Equal(want) {
			t.Errorf("ctx deadline %v, Call.Deadline %v; want %v", r.deadline, r.call.Deadline, want)
		}
		if r.cause == nil || !strings.Contains(r.cause.Error(), "deadline for the call passed") {
			t.Errorf("context.Cause = %v", r.cause)
		}
	}})
}

// TestCallTimeout: the deprecated CallTimeout still ends the handler's
// context on its own, before the gateway's deadline, with Timeout or
// without.
func TestCallTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []ToolOption
	}{
		{"alone", []ToolOption{CallTimeout(50 * time.Millisecond)}},
		{"below Timeout", []ToolOption{Timeout(60 * time.Second), CallTimeout(50 * time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlayer(t)
			a, _ := newTestAgent(t, p)
			started, reports := blockingTool(t, a, "wait", tc.opts...)
			before := time.Now()
			p.play(a, script(t, connected+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"wait","deadline":"+30s"}
-- do --
timeout c-1
-- agent --
{"type":"error","id":"c-1","message":"context deadline exceeded"}
`), actions{"timeout": func(id string) {
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
				if gateway := time.UnixMilli(p.sent(id).Deadline); !r.call.Deadline.Equal(gateway) {
					t.Errorf("Call.Deadline = %v, want the gateway's %v", r.call.Deadline, gateway)
				}
			}})
		})
	}
}

// TestTimeoutIsTheGatewaysDeadline: Timeout reaches the handler only as the
// gateway's deadline, so a call the gateway lets run longer (a task or a
// job runs up to the project's longest task) is not cut at the tool's
// Timeout.
func TestTimeoutIsTheGatewaysDeadline(t *testing.T) {
	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
	deadlines := make(chan time.Time, 1)
	must(t, AddTool(a, "report", "reports its deadline", func(ctx context.Context, _ emptyIn) (string, error) {
		d, _ := ctx.Deadline()
		deadlines <- d
		return "ok", nil
	}, Timeout(50*time.Millisecond), TaskSupport(TaskOptional)))
	p.play(a, script(t, connected+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"report","deadline":"+1h"}
-- agent --
{"type":"result","id":"c-1","result":{"content":[{"type":"text","text":"ok"}]}}
`), nil)
	got := receive(t, deadlines, "the handler's deadline")
	if want := time.UnixMilli(p.sent("c-1").Deadline); !got.Equal(want) {
		t.Errorf("ctx deadline %v, want the gateway's %v", got, want)
	}
}

func TestCallFrom(t *testing.T) {
	if _, ok := CallFrom(context.Background()); ok {
		t.Error("CallFrom outside a handler reported a call")
	}
	Progress(context.Background(), "nobody listens") // a no-op, not a panic

	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
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
	p.play(a, script(t, connected+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"who","args":{},"deadline":"+1m","caller":{"keyId":"key_42","keyName":"claude"}}
-- agent --
{"type":"result","id":"c-1"}
-- do --
call c-1
-- gateway --
{"type":"call","id":"c-2","kind":"resource","name":"test://who","caller":{"keyId":"key_77","keyName":"Claude Desktop","person":{"id":"usr_1","email":"ada@example.com","name":"Ada"},"app":{"id":"cli_9","name":"Claude Desktop"},"project":"shop","role":"editor","scopes":["mcp:read","mcp:write"],"identityToken":"eyJ.x.y","upstreamToken":"up-tok-1"}}
-- agent --
{"type":"result","id":"c-2"}
-- do --
read c-2
`), actions{
		"call": func(id string) {
			want := Call{ID: id, Kind: "tool", Tool: "who", KeyID: "key_42", KeyName: "claude", Deadline: time.UnixMilli(p.sent(id).Deadline)}
			if diff := cmp.Diff(want, receive(t, calls, "the call")); diff != "" {
				t.Errorf("CallFrom mismatch (-want +got):\n%s", diff)
			}
		},
		"read": func(id string) {
			want := Call{ID: id, Kind: "resource", Tool: "test://who", KeyID: "key_77", KeyName: "Claude Desktop",
				Person:  &Person{ID: "usr_1", Email: "ada@example.com", Name: "Ada"},
				App:     &App{ID: "cli_9", Name: "Claude Desktop"},
				Project: "shop", Role: "editor", Scopes: []string{"mcp:read", "mcp:write"}, IdentityToken: "eyJ.x.y", UpstreamToken: "up-tok-1"}
			if diff := cmp.Diff(want, receive(t, calls, "the resource read")); diff != "" {
				t.Errorf("CallFrom in a resource mismatch (-want +got):\n%s", diff)
			}
		},
	})
}

func TestProgressOverTheWire(t *testing.T) {
	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
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
	// An empty line is not sent, a long one is cut to 200 characters. 50
	// lines at once: the first 4 go, the rest are held back and dropped
	// with the result; no line arrives after it.
	p.play(a, script(t, connected+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"steps","args":{}}
-- agent --
{"type":"progress","id":"c-1","message":"fetched 120 of 400 rows"}
-- agent --
{"type":"progress","id":"c-1","message":"`+strings.Repeat("é", 200)+`"}
-- agent --
{"type":"result","id":"c-1","result":{"content":[{"type":"text","text":"done"}]}}
-- gateway --
{"type":"call","id":"c-2","kind":"tool","name":"chatty","args":{}}
-- agent --
{"type":"progress","id":"c-2","message":"line 0"}
-- agent --
{"type":"progress","id":"c-2","message":"line 1"}
-- agent --
{"type":"progress","id":"c-2","message":"line 2"}
-- agent --
{"type":"progress","id":"c-2","message":"line 3"}
-- agent --
{"type":"result","id":"c-2"}
-- gateway --
{"type":"call","id":"c-3","kind":"tool","name":"steps","args":{}}
-- agent --
{"type":"progress","id":"c-3"}
`), nil)
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
	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
	ok := func(context.Context, emptyIn) (string, error) { return "", nil }
	must(t, AddTool(a, "a", "d", ok))
	must(t, AddTool(a, "b", "d", ok))
	must(t, a.SetEnabled("b", false))
	// The state outlives the connection.
	p.play(a, script(t, connected+`
-- do --
setEnabled a off
-- do --
setEnabled b on
-- agent --
{"type":"set_enabled","name":"a","enabled":false}
-- agent --
{"type":"set_enabled","name":"b","enabled":true}
-- drop --
-- register --
{"protocol":1}
-- gateway --
`+welcome("r-2", 5000)+`
-- do --
setEnabled a on
-- agent --
{"type":"set_enabled","name":"a","enabled":true}
`), nil)

	disabled := func(reg json.RawMessage) map[string]bool {
		var r agentproto.Registration
		must(t, json.Unmarshal(reg, &r))
		out := map[string]bool{}
		for _, tool := range r.Tools {
			out[tool.Name] = tool.Disabled
		}
		return out
	}
	regs := p.registrations()
	if diff := cmp.Diff(map[string]bool{"a": false, "b": true}, disabled(regs[0])); diff != "" {
		t.Errorf("first registration's disabled flags (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"a": true, "b": false}, disabled(regs[1])); diff != "" {
		t.Errorf("registration after reconnect (-want +got):\n%s", diff)
	}
}

// SetEnabled tells the gateway this replica's state every time, even when
// it did not change here: the gateway's state is per replica, and another
// replica of the key (or a gateway that lost track) must not stand in for
// this one's.
func TestSetEnabledPerReplicaSentEvenWhenUnchanged(t *testing.T) {
	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
	ok := func(context.Context, emptyIn) (string, error) { return "", nil }
	must(t, AddTool(a, "a", "d", ok))
	p.play(a, script(t, connected+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"a","args":{}}
-- agent --
{"type":"result","id":"c-1"}
-- do --
setEnabled a on
-- do --
setEnabled a off
-- do --
setEnabled a off
-- agent --
{"type":"set_enabled","name":"a","enabled":true}
-- agent --
{"type":"set_enabled","name":"a","enabled":false}
-- agent --
{"type":"set_enabled","name":"a","enabled":false}
`), nil)
}
