package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/testenv"
)

// Calls carried over the bus, as transcripts: gateway B calls a replica
// gateway A holds; A's agent plays a script (progress, log messages, a
// question, a result or an error); the test writes down what B's caller
// got, in order, and what the agent was told, and compares both with what
// a call to a replica held here would give.

// step is one thing the agent does during a call on A: it sends an event,
// a question (and waits for the answer), or ends the call.
type step struct {
	progress string
	log      string
	ask      string // a question's input name; the agent waits for its answer
	reply    *agents.Reply
	hang     bool // wait until cancelled
}

// scriptConn is an agent's connection on A that plays a script per tool
// and writes down what it was sent.
type scriptConn struct {
	scripts  map[string][]step
	startErr error

	mu      sync.Mutex
	told    []string
	answers chan *agentproto.Message
	stops   map[string]chan struct{}
	wg      sync.WaitGroup
	done    chan struct{}
}

func newScriptConn(t *testing.T, scripts map[string][]step) *scriptConn {
	s := &scriptConn{scripts: scripts, answers: make(chan *agentproto.Message, 4), stops: map[string]chan struct{}{}, done: make(chan struct{})}
	t.Cleanup(func() {
		close(s.done)
		s.wg.Wait()
	})
	return s
}

func (s *scriptConn) tell(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.told = append(s.told, fmt.Sprintf(format, args...))
}

func (s *scriptConn) transcript() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.told...)
}

func (s *scriptConn) Start(_ context.Context, m *agentproto.Message) (*agents.Pending, error) {
	s.tell("call %s %s", m.ID, m.Name)
	if s.startErr != nil {
		return nil, s.startErr
	}
	p := agents.NewPending()
	stop := make(chan struct{})
	s.mu.Lock()
	s.stops[m.ID] = stop
	s.mu.Unlock()
	s.wg.Go(func() { s.play(m.ID, s.scripts[m.Name], p, stop) })
	return p, nil
}

func (s *scriptConn) play(id string, script []step, p *agents.Pending, stop chan struct{}) {
	for _, st := range script {
		switch {
		case st.progress != "":
			p.Events <- agents.Event{Line: st.progress}
		case st.log != "":
			p.Events <- agents.Event{Log: &agentproto.Message{Type: agentproto.TypeLog, Level: "info", Data: json.RawMessage(`"` + st.log + `"`)}}
		case st.ask != "":
			p.Confirm <- &agentproto.Message{Type: agentproto.TypeConfirm, ID: id, Input: st.ask, Message: "Go ahead?"}
			select {
			case <-s.answers:
			case <-s.done:
				return
			}
		case st.reply != nil:
			p.Result <- *st.reply
			return
		case st.hang:
			select {
			case <-stop:
			case <-s.done:
			}
			return
		}
	}
}

func (s *scriptConn) Cancel(id, reason string) {
	s.tell("cancel %s: %s", id, reason)
	s.mu.Lock()
	stop := s.stops[id]
	delete(s.stops, id)
	s.mu.Unlock()
	if stop != nil {
		close(stop)
	}
}

func (s *scriptConn) Send(_ context.Context, m *agentproto.Message) error {
	b, _ := json.Marshal(m)
	s.tell("send %s", b)
	s.answers <- m
	return nil
}

func (s *scriptConn) Close(reason string)   { s.tell("close: %s", reason) }
func (s *scriptConn) Done() <-chan struct{} { return s.done }

// follow reads a pending call as the MCP front does, until its result, and
// writes down what came: events before a question or the result come
// first, as on the holder. answer, if set, answers a question.
func follow(t *testing.T, p *agents.Pending, answer func(q *agentproto.Message)) []string {
	t.Helper()
	var got []string
	event := func(ev agents.Event) {
		if ev.Log != nil {
			got = append(got, fmt.Sprintf("log %s %s", ev.Log.Level, ev.Log.Data))
		} else {
			got = append(got, "progress "+ev.Line)
		}
	}
	drain := func() {
		for {
			select {
			case ev := <-p.Events:
				event(ev)
			default:
				return
			}
		}
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-p.Events:
			event(ev)
		case q := <-p.Confirm:
			drain()
			got = append(got, fmt.Sprintf("question %s %s %q", q.ID, q.Input, q.Message))
			if answer != nil {
				answer(q)
			}
		case r := <-p.Result:
			drain()
			switch {
			case r.Disconnected:
				got = append(got, "disconnected")
			case r.Err != "":
				got = append(got, fmt.Sprintf("error %d %q %s", r.Code, r.Err, r.Data))
			default:
				got = append(got, "result "+string(r.Result))
			}
			return got
		case <-timeout:
			t.Fatalf("no result within 10 s; so far: %q", got)
		}
	}
}

func TestRemoteCallTranscripts(t *testing.T) {
	url := testenv.NATS(t, 0).ClientURL()
	ok := func(raw string) *agents.Reply { return &agents.Reply{Result: json.RawMessage(raw)} }
	for i, tc := range []struct {
		name     string
		script   []step
		startErr error
		answer   bool
		want     []string // what B's caller gets
		wantTold []string // what A's agent is told
	}{
		{
			name:     "a result",
			script:   []step{{reply: ok(`{"content":[{"type":"text","text":"hi"}]}`)}},
			want:     []string{`result {"content":[{"type":"text","text":"hi"}]}`},
			wantTold: []string{"call c1 tool"},
		},
		{
			name:     "progress and log messages, in order, before the result",
			script:   []step{{progress: "1 of 3"}, {log: "halfway"}, {progress: "2 of 3"}, {reply: ok(`{"n":3}`)}},
			want:     []string{"progress 1 of 3", `log info "halfway"`, "progress 2 of 3", `result {"n":3}`},
			wantTold: []string{"call c1 tool"},
		},
		{
			name:     "an isError result",
			script:   []step{{reply: &agents.Reply{Err: "no order 1042: ask the user for the id"}}},
			want:     []string{`error 0 "no order 1042: ask the user for the id" `},
			wantTold: []string{"call c1 tool"},
		},
		{
			name:     "a protocol error with its code and data",
			script:   []step{{reply: &agents.Reply{Err: "bad params", Code: -32602, Data: json.RawMessage(`{"field":"id"}`)}}},
			want:     []string{`error -32602 "bad params" {"field":"id"}`},
			wantTold: []string{"call c1 tool"},
		},
		{
			name:     "a question answered over the bus",
			script:   []step{{progress: "asking"}, {ask: "q1"}, {reply: ok(`"done"`)}},
			answer:   true,
			want:     []string{"progress asking", `question c1 q1 "Go ahead?"`, `result "done"`},
			wantTold: []string{"call c1 tool", `send {"type":"confirmed","id":"c1","input":"q1","accepted":true}`},
		},
		{
			name:     "the agent's connection ends mid-call",
			script:   []step{{progress: "working"}, {reply: &agents.Reply{Disconnected: true}}},
			want:     []string{"progress working", "disconnected"},
			wantTold: []string{"call c1 tool"},
		},
		{
			name:     "the holder cannot start the call",
			startErr: agents.ErrDisconnected,
			want:     []string{"disconnected"},
			wantTold: []string{"call c1 tool"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := join(t, url, fmt.Sprint("gw-a", i)), join(t, url, fmt.Sprint("gw-b", i))
			agent := newScriptConn(t, map[string][]step{"tool": tc.script})
			agent.startErr = tc.startErr
			a.addReplica(t, "r1", agent)
			mirrored := b.mirror(t, "r1")

			p, err := mirrored.Conn.Start(context.Background(), callMessage("c1", "tool", time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			var answer func(*agentproto.Message)
			if tc.answer {
				answer = func(q *agentproto.Message) {
					yes := true
					if err := mirrored.Conn.Send(context.Background(), &agentproto.Message{Type: agentproto.TypeConfirmed, ID: q.ID, Input: q.Input, Accepted: &yes}); err != nil {
						t.Errorf("answer the question over the bus: %v", err)
					}
				}
			}
			if diff := cmp.Diff(tc.want, follow(t, p, answer)); diff != "" {
				t.Errorf("what B's caller got (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTold, agent.transcript()); diff != "" {
				t.Errorf("what A's agent was told (-want +got):\n%s", diff)
			}
		})
	}
}

// How a call over the bus ends other than by its result: the caller
// cancels it (the agent is told why; nothing more reaches the caller), the
// holder closes (the caller gets disconnected at once, not at its wait),
// or the holder's replica leaves (its calls in flight fail as
// disconnected, and the mirror's connection ends).
func TestRemoteCallEnds(t *testing.T) {
	url := testenv.NATS(t, 0).ClientURL()
	hang := map[string][]step{"tool": {{progress: "started"}, {hang: true}}}
	for i, tc := range []struct {
		name     string
		end      func(t *testing.T, a *node, held *agents.Replica, mirrored *agents.Replica)
		want     []string // what B's caller gets; nil: nothing after the first progress line
		wantTold []string
	}{
		{
			name: "the caller cancels",
			end: func(t *testing.T, _ *node, _, mirrored *agents.Replica) {
				mirrored.Conn.Cancel("c1", agentproto.ReasonCancelled)
			},
			wantTold: []string{"call c1 tool", "cancel c1: " + agentproto.ReasonCancelled},
		},
		{
			name:     "the holder closes",
			end:      func(t *testing.T, a *node, _, _ *agents.Replica) { a.c.Close() },
			want:     []string{"disconnected"},
			wantTold: []string{"call c1 tool"},
		},
		{
			name: "the replica leaves the holder",
			end: func(t *testing.T, a *node, held, _ *agents.Replica) {
				a.reg.Remove(held)
			},
			want:     []string{"disconnected"},
			wantTold: []string{"call c1 tool"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := join(t, url, fmt.Sprint("gw-c", i)), join(t, url, fmt.Sprint("gw-d", i))
			agent := newScriptConn(t, hang)
			held := a.addReplica(t, "r1", agent)
			mirrored := b.mirror(t, "r1")
			p, err := mirrored.Conn.Start(context.Background(), callMessage("c1", "tool", time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-p.Events:
				if ev.Line != "started" {
					t.Fatalf("first event %+v, want the progress line", ev)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the call's progress did not reach B within 10 s")
			}
			tc.end(t, a, held, mirrored)
			if tc.want != nil {
				if diff := cmp.Diff(tc.want, follow(t, p, nil)); diff != "" {
					t.Errorf("what B's caller got (-want +got):\n%s", diff)
				}
			} else {
				waitFor(t, "the agent to be told", func() bool { return len(agent.transcript()) == len(tc.wantTold) })
				select {
				case r := <-p.Result:
					t.Errorf("a cancelled call's caller got a result: %+v", r)
				default:
				}
			}
			if diff := cmp.Diff(tc.wantTold, agent.transcript()); diff != "" {
				t.Errorf("what A's agent was told (-want +got):\n%s", diff)
			}
		})
	}
}
