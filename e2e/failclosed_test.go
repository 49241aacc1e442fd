package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// rawAgent is one replica speaking the agent protocol by hand, for schemas
// the core SDK cannot produce. It answers every tool call with "ok" and
// keeps the arguments of each call it received.
type rawAgent struct {
	mu   sync.Mutex
	args []string
}

func (e *env) startRawAgent(reg agentproto.Registration) *rawAgent {
	e.t.Helper()
	status, body := e.register(e.agentKey, regJSON(e.t, reg))
	if status != 200 {
		e.t.Fatalf("register: %d %s", status, body)
	}
	var tk agentproto.Ticket
	must(e.t, json.Unmarshal([]byte(body), &tk))
	ctx, cancel := context.WithCancel(context.Background())
	ws, _, err := websocket.Dial(ctx, e.url+agentproto.ConnectPath+"?ticket="+tk.Ticket,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + e.agentKey}}})
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	a := &rawAgent{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var m agentproto.Message
			if json.Unmarshal(b, &m) != nil || m.Type != agentproto.TypeCall {
				continue
			}
			a.mu.Lock()
			a.args = append(a.args, string(m.Args))
			a.mu.Unlock()
			out, _ := json.Marshal(agentproto.Message{Type: agentproto.TypeResult, ID: m.ID,
				Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)})
			if ws.Write(ctx, websocket.MessageText, out) != nil {
				return
			}
		}
	}()
	e.t.Cleanup(func() {
		cancel()
		ws.CloseNow()
		<-done
	})
	waitFor(e.t, "the raw replica to register", func() bool { return len(e.gw.Registry().All()) > 0 })
	return a
}

func (a *rawAgent) received() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.args...)
}

// A pattern only the backtracking engine can run, which it cannot decide in
// time for the argument, refuses the call wherever it sits in the schema,
// and the agent never sees the call (issue 8, defect 5).
func TestFailClosedPatternThroughGateway(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// On "a"×40+"z" this pattern does match, after an exponential failed
	// attempt at its first branch: the schema forbids that value and key.
	const slow = `^(?!b)(?:(a+)+b|a*z)$`
	schema := `{"type":"object","properties":{"s":{"type":"string","not":{"pattern":"` + slow + `"}}},` +
		`"patternProperties":{"` + slow + `":false}}`
	agent := e.startRawAgent(agentproto.Registration{Tools: []agentproto.Tool{
		{Name: "guarded", Description: "Takes a string that must not be a's then z.", InputSchema: json.RawMessage(schema)},
	}})
	value := strings.Repeat("a", 40) + "z"
	refused := "Input validation error: Invalid arguments for tool guarded: "
	cases := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"s": value}, refused + `data/s could not be checked against pattern "` + slow +
			`" in time for this value; the arguments are refused: send a shorter or simpler value`},
		{map[string]any{value: 1}, refused + `data could not be checked against pattern "` + slow +
			`" in time for property name "` + strings.Repeat("a", 40) + `…"; the arguments are refused: send a shorter or simpler value`},
		{map[string]any{"s": "aaz"}, refused + "data/s must NOT be valid"},
	}
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		for _, c := range cases {
			res := call(t, cs, "guarded", c.args)
			if !res.IsError || text(res) != c.want {
				t.Errorf("guarded(%v) = isError %v %q\nwant isError %q", c.args, res.IsError, text(res), c.want)
			}
		}
		if res := call(t, cs, "guarded", map[string]any{"s": "b"}); res.IsError || text(res) != "ok" {
			t.Errorf("guarded(s=b) = isError %v %q, want ok from the agent", res.IsError, text(res))
		}
	})
	want := []string{`{"s":"b"}`, `{"s":"b"}`, `{"s":"b"}`}
	if got := agent.received(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the agent received %q, want only the valid calls %q", got, want)
	}
}
