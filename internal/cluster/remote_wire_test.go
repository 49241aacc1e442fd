package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/testenv"
)

// More calls over the bus, as transcripts (see remote_test.go): what the
// holder's agent is sent is the call the caller's gateway sent, field for
// field, whatever its kind; questions the agent asks (an ask with input
// requests, confirms) and every kind of answer cross unchanged; and calls
// in flight at once on one mirror each get their own frames.

// wireConn is an agent's connection on the holder that writes down, as
// JSON, every message it is sent, and answers by the call's name:
//
//	echo      the call's args as its result
//	ask       an ask with one elicitation, then the answer it got
//	confirm2  two confirms, then the answers it got
//	barrier   a progress line, then its args as its result once
//	          barrier calls are in flight, the last started answered first
type wireConn struct {
	barrier int

	mu      sync.Mutex
	sent    []string
	answers chan *agentproto.Message
	waiting []func() // barrier calls' answers, until all have started
	wg      sync.WaitGroup
	done    chan struct{}
}

func newWireConn(t *testing.T) *wireConn {
	w := &wireConn{answers: make(chan *agentproto.Message, 4), done: make(chan struct{})}
	t.Cleanup(func() {
		close(w.done)
		w.wg.Wait()
	})
	return w
}

func (w *wireConn) note(m *agentproto.Message) {
	b, _ := json.Marshal(m)
	w.mu.Lock()
	w.sent = append(w.sent, string(b))
	w.mu.Unlock()
}

func (w *wireConn) told() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.sent)
}

func (w *wireConn) Start(_ context.Context, m *agentproto.Message) (*agents.Pending, error) {
	w.note(m)
	p := agents.NewPending()
	result := func(raw string) { p.Result <- agents.Reply{Result: json.RawMessage(raw)} }
	switch m.Name {
	case "echo":
		result(orNull(m.Args))
	case "barrier":
		p.Events <- agents.Event{Line: "started " + m.ID}
		w.mu.Lock()
		w.waiting = append(w.waiting, func() { result(string(m.Args)) })
		var all []func()
		if len(w.waiting) == w.barrier {
			all = w.waiting
		}
		w.mu.Unlock()
		for i := len(all) - 1; i >= 0; i-- {
			all[i]()
		}
	case "ask":
		w.wg.Go(func() {
			p.Confirm <- &agentproto.Message{Type: agentproto.TypeAsk, ID: m.ID, Input: "in-1",
				Requests: json.RawMessage(`{"in-1":{"method":"elicitation/create","params":{"mode":"form","message":"Which table?","requestedSchema":{"type":"object","properties":{"table":{"type":"integer"}}}}}}`)}
			if a := w.answer(); a != nil {
				result(fmt.Sprintf(`{"responses":%s,"message":%q,"code":%d}`, orNull(a.Responses), a.Message, a.Code))
			}
		})
	case "confirm2":
		w.wg.Go(func() {
			var got []string
			for _, in := range []string{"q1", "q2"} {
				p.Confirm <- &agentproto.Message{Type: agentproto.TypeConfirm, ID: m.ID, Input: in, Message: "Go ahead with " + in + "?"}
				a := w.answer()
				if a == nil {
					return
				}
				b, _ := json.Marshal(a)
				got = append(got, string(b))
			}
			result(`[` + got[0] + `,` + got[1] + `]`)
		})
	}
	return p, nil
}

// answer waits for the answer to a question, or nil once the test ends.
func (w *wireConn) answer() *agentproto.Message {
	select {
	case a := <-w.answers:
		return a
	case <-w.done:
		return nil
	}
}

func orNull(raw json.RawMessage) string {
	if raw == nil {
		return "null"
	}
	return string(raw)
}

func (w *wireConn) Cancel(id, reason string) {}

func (w *wireConn) Send(_ context.Context, m *agentproto.Message) error {
	w.note(m)
	w.answers <- m
	return nil
}

func (w *wireConn) Close(string)          {}
func (w *wireConn) Done() <-chan struct{} { return w.done }

// A call crosses the bus as it was sent, whatever its kind and whoever
// makes it: the holder's agent gets the same message, field for field.
func TestRemoteCallCarriesTheCall(t *testing.T) {
	url := testenv.NATS(t, 0).ClientURL()
	a, b := join(t, url, "gw-wa"), join(t, url, "gw-wb")
	agent := newWireConn(t)
	a.addReplica(t, "r1", agent)
	mirrored := b.mirror(t, "r1")
	deadline := time.Now().Add(time.Minute).UnixMilli()
	calls := []*agentproto.Message{
		{Type: agentproto.TypeCall, ID: "c1", Kind: agentproto.KindTool, Name: "echo", Args: json.RawMessage(`{"text":"héllo","n":[1,2.5,null]}`),
			Deadline: deadline, TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", TraceState: "sf=1",
			Caller: &agentproto.Caller{KeyID: "grant_1", KeyName: "Claude", Capabilities: []string{"elicitation"},
				Person: &agentproto.Person{ID: "7", Email: "ada@example.com", Name: "Ada"}, App: &agentproto.App{ID: "app_1", Name: "Claude"},
				Project: "shop", Role: "editor", Scopes: []string{"mcp:read", "mcp:write"}, IdentityToken: "eyJ.id.tok", UpstreamToken: "gho_up"}},
		{Type: agentproto.TypeCall, ID: "c2", Kind: agentproto.KindTool, Name: "echo", Args: json.RawMessage(`{}`), Deadline: deadline,
			RetryOf: "c0", RetryReason: agentproto.ReasonTimeout, Caller: &agentproto.Caller{KeyID: "key_c", Project: "shop"}},
		{Type: agentproto.TypeCall, ID: "c3", Kind: agentproto.KindResource, Name: "echo", Deadline: deadline},
		{Type: agentproto.TypeCall, ID: "c4", Kind: agentproto.KindPrompt, Name: "echo", Args: json.RawMessage(`{"who":"Ada"}`), Deadline: deadline},
	}
	var want []string
	for _, m := range calls {
		p, err := mirrored.Conn.Start(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"result " + orNull(m.Args)}, follow(t, p, nil)); d != "" {
			t.Errorf("%s: what B's caller got (-want +got):\n%s", m.ID, d)
		}
		b, _ := json.Marshal(m)
		want = append(want, string(b))
	}
	if d := cmp.Diff(want, agent.told()); d != "" {
		t.Errorf("what A's agent was sent (-B sent +A's agent got):\n%s", d)
	}
}

// An agent's questions reach B's caller as the agent asked them, and each
// answer B's client gives reaches the agent as given: an ask's responses,
// a client that could not answer (its message and code), a confirm's no,
// and no answer at all because the client cannot ask its user.
func TestRemoteCallQuestions(t *testing.T) {
	url := testenv.NATS(t, 0).ClientURL()
	no := false
	for i, tc := range []struct {
		name    string
		tool    string
		answers []*agentproto.Message // B's answers, in order; ID and Input are the question's
		want    []string              // what B's caller got
	}{
		{
			name:    "an ask answered with responses",
			tool:    "ask",
			answers: []*agentproto.Message{{Type: agentproto.TypeAnswered, Responses: json.RawMessage(`{"in-1":{"action":"accept","content":{"table":4}}}`)}},
			want: []string{
				`question c1 in-1 ""`,
				`result {"responses":{"in-1":{"action":"accept","content":{"table":4}}},"message":"","code":0}`,
			},
		},
		{
			name: "an ask the client could not answer",
			tool: "ask",
			answers: []*agentproto.Message{{Type: agentproto.TypeAnswered, Code: -32601,
				Message: "the MCP client cannot ask the user: it does not support elicitation."}},
			want: []string{
				`question c1 in-1 ""`,
				`result {"responses":null,"message":"the MCP client cannot ask the user: it does not support elicitation.","code":-32601}`,
			},
		},
		{
			name: "two confirms: a no, then no answer",
			tool: "confirm2",
			answers: []*agentproto.Message{
				{Type: agentproto.TypeConfirmed, Accepted: &no},
				{Type: agentproto.TypeConfirmed, Message: "the MCP client cannot ask the user: it does not support elicitation."},
			},
			want: []string{
				`question c1 q1 "Go ahead with q1?"`,
				`question c1 q2 "Go ahead with q2?"`,
				`result [{"type":"confirmed","id":"c1","input":"q1","accepted":false},` +
					`{"type":"confirmed","id":"c1","message":"the MCP client cannot ask the user: it does not support elicitation.","input":"q2"}]`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := join(t, url, fmt.Sprint("gw-qa", i)), join(t, url, fmt.Sprint("gw-qb", i))
			agent := newWireConn(t)
			a.addReplica(t, "r1", agent)
			mirrored := b.mirror(t, "r1")
			call := callMessage("c1", tc.tool, time.Minute)
			p, err := mirrored.Conn.Start(context.Background(), call)
			if err != nil {
				t.Fatal(err)
			}
			var asked []*agentproto.Message
			answers := slices.Clone(tc.answers)
			got := follow(t, p, func(q *agentproto.Message) {
				asked = append(asked, q)
				if len(answers) == 0 {
					t.Fatalf("question %s asked, no answer left", q.Input)
				}
				ans := *answers[0]
				answers = answers[1:]
				ans.ID, ans.Input = q.ID, q.Input
				if err := mirrored.Conn.Send(context.Background(), &ans); err != nil {
					t.Errorf("answer over the bus: %v", err)
				}
			})
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("what B's caller got (-want +got):\n%s", d)
			}
			if tc.tool == "ask" {
				if len(asked) != 1 || string(asked[0].Requests) != `{"in-1":{"method":"elicitation/create","params":{"mode":"form","message":"Which table?","requestedSchema":{"type":"object","properties":{"table":{"type":"integer"}}}}}}` {
					t.Errorf("the ask reached B as %+v, want the agent's input requests unchanged", asked)
				}
			}
			// What the agent was sent: the call, then each answer as B sent it.
			want := []string{mustJSON(t, call)}
			for j, q := range asked {
				ans := *tc.answers[j]
				ans.ID, ans.Input = q.ID, q.Input
				want = append(want, mustJSON(t, &ans))
			}
			if d := cmp.Diff(want, agent.told()); d != "" {
				t.Errorf("what A's agent was sent (-want +got):\n%s", d)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Calls in flight at once on one mirror each get their own frames: eight
// calls, all started before any answers, answered last first, each caller
// gets its own progress line and its own result.
func TestRemoteCallsAtOnce(t *testing.T) {
	const n = 8
	url := testenv.NATS(t, 0).ClientURL()
	a, b := join(t, url, "gw-ma"), join(t, url, "gw-mb")
	agent := newWireConn(t)
	agent.barrier = n
	a.addReplica(t, "r1", agent)
	mirrored := b.mirror(t, "r1")
	// Each call's frames wait in its own pending (a result and a few
	// events are buffered), so the calls are followed one after another.
	pending := make([]*agents.Pending, n)
	for i := range n {
		m := callMessage(fmt.Sprint("c", i), "barrier", time.Minute)
		m.Args = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		p, err := mirrored.Conn.Start(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		pending[i] = p
	}
	for i, p := range pending {
		want := []string{fmt.Sprintf("progress started c%d", i), fmt.Sprintf(`result {"i":%d}`, i)}
		if d := cmp.Diff(want, follow(t, p, nil)); d != "" {
			t.Errorf("call c%d: what its caller got (-want +got):\n%s", i, d)
		}
	}
}
