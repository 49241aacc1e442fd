package interceptors

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/spacefix/spacefix/internal/policy"
)

// fakeAgents is a project's bridged agents as the chain sees them: the
// agent named "pii" answers the extension's methods from infos and
// invoke; conn is its connection ("" while it is not connected); plain
// names an agent that is connected but not bridged.
type fakeAgents struct {
	mu     sync.Mutex
	conn   string
	infos  []Info
	lists  int
	plain  string
	invoke func(p *InvokeParams) (*InvokeResult, error)
}

func (f *fakeAgents) Connection(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name != "pii" {
		return ""
	}
	return f.conn
}

func (f *fakeAgents) Request(ctx context.Context, name, method string, params json.RawMessage) (json.RawMessage, error) {
	f.mu.Lock()
	conn, infos, plain := f.conn, f.infos, f.plain
	if method == MethodList {
		f.lists++
	}
	f.mu.Unlock()
	switch {
	case name == plain:
		return nil, ErrNotBridged
	case name != "pii" || conn == "":
		return nil, ErrNotConnected
	}
	var out any
	switch method {
	case MethodList:
		out = &ListResult{Interceptors: infos}
	case MethodInvoke:
		var p InvokeParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		if p.Name == "slow" {
			<-ctx.Done() // the route's wait is the interceptor's timeout
			return nil, ctx.Err()
		}
		r, err := f.invoke(&p)
		if err != nil {
			return nil, err
		}
		out = r
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}
	}
	return json.Marshal(out)
}

func (f *fakeAgents) set(conn string, infos []Info) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conn, f.infos = conn, infos
}

func (f *fakeAgents) listed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

var (
	redactInfo = Info{Name: "redact", Type: Mutation, Hook: Hook{Events: []string{"tools/call"}, Phase: PhaseResponse}}
	noCardInfo = Info{Name: "no-cards", Type: Validation, Hook: Hook{Events: []string{"tools/call"}, Phase: PhaseRequest}}
)

func piiAgent() *fakeAgents {
	return &fakeAgents{conn: "r-1", infos: []Info{redactInfo}, plain: "shop", invoke: func(p *InvokeParams) (*InvokeResult, error) {
		s := string(p.Payload)
		switch p.Name {
		case "redact":
			out := emails.ReplaceAllString(s, "[redacted]")
			return &InvokeResult{Modified: &[]bool{out != s}[0], Payload: json.RawMessage(out)}, nil
		case "no-cards":
			if strings.Contains(s, "4111") {
				return &InvokeResult{Valid: no(), Messages: []Message{{Message: "card numbers must not reach tools"}}}, nil
			}
			return &InvokeResult{Valid: yes()}, nil
		}
		return nil, &jsonrpc.Error{Code: -32602, Message: "unknown interceptor"}
	}}
}

// An interceptor server behind a bridged agent: its mutator rewrites a
// result, it is listed again when the agent connects again (and only
// then), and an agent that is not connected, or not bridged, blocks what
// it would hook with a sentence that says so (fail closed), unless
// failOpen.
func TestChainAgent(t *testing.T) {
	ctx := context.Background()
	ag := piiAgent()
	c := New([]policy.Interceptor{{Name: "pii", Agent: "pii"}}, Options{Agents: ag})
	defer c.Close()
	if errs := c.Discover(ctx); len(errs) > 0 {
		t.Fatal(errs)
	}
	result := json.RawMessage(`{"content":[{"type":"text","text":"mail ann@example.com"}]}`)
	got, out := c.Run(ctx, "tools/call", PhaseResponse, result, nil)
	if want := `{"content":[{"type":"text","text":"mail [redacted]"}]}`; out.Blocked || string(got) != want {
		t.Errorf("result = %s %+v, want %s", got, out, want)
	}
	if len(out.Ran) != 1 || out.Ran[0].By != "pii/redact" {
		t.Errorf("ran %+v, want pii/redact once", out.Ran)
	}
	request := json.RawMessage(`{"name":"pay","arguments":{"card":"4111 1111 1111 1111"}}`)
	if _, out := c.Run(ctx, "tools/call", PhaseRequest, request, nil); out.Blocked || len(out.Ran) != 0 {
		t.Errorf("before the agent reconnects: %+v, want no validator yet", out)
	}
	if n := ag.listed(); n != 1 {
		t.Errorf("listed %d times while the agent stayed connected, want 1", n)
	}

	// The bridge restarted its server, which now has a validator too.
	ag.set("r-2", []Info{redactInfo, noCardInfo})
	_, out = c.Run(ctx, "tools/call", PhaseRequest, request, nil)
	if want := `This call was refused by interceptor "no-cards": card numbers must not reach tools`; !out.Blocked || out.Message != want || out.By != "pii/no-cards" {
		t.Errorf("after the agent reconnected: %+v, want blocked with %q", out, want)
	}

	// Not connected: fail closed, with a sentence that says why.
	ag.set("", nil)
	notConnected := `This call was refused: the interceptor server "pii" of the project's policy is the bridged agent "pii", which is not connected.`
	if _, out := c.Run(ctx, "tools/call", PhaseResponse, result, nil); !out.Blocked || out.Message != notConnected {
		t.Errorf("agent gone: %+v, want %q", out, notConnected)
	}
	// Connected again: listed at once, not after retryAfter.
	ag.set("r-3", []Info{redactInfo})
	if got, out := c.Run(ctx, "tools/call", PhaseResponse, result, nil); out.Blocked || !strings.Contains(string(got), "[redacted]") {
		t.Errorf("agent back: %s %+v, want the result redacted", got, out)
	}

	// One that does not answer within the entry's timeout blocks.
	slow := Info{Name: "slow", Type: Validation, Hook: Hook{Events: []string{"tools/call"}, Phase: PhaseRequest}}
	ag.set("r-4", []Info{slow})
	late := New([]policy.Interceptor{{Agent: "pii", Timeout: "50ms"}}, Options{Agents: ag})
	defer late.Close()
	if _, out := late.Run(ctx, "tools/call", PhaseRequest, request, nil); !out.Blocked ||
		out.Message != `This call was refused: interceptor "slow" of the project's policy did not answer in time (50ms).` {
		t.Errorf("a slow interceptor: %+v, want blocked as late", out)
	}
	ag.set("r-4", []Info{redactInfo})

	for _, tc := range []struct {
		entry policy.Interceptor
		want  string
	}{
		{policy.Interceptor{Agent: "shop"}, `This call was refused: the interceptor server "shop" of the project's policy is the agent "shop", which is not a bridged MCP server; only an agent run by spacefix bridge can serve interceptors.`},
		{policy.Interceptor{Name: "x", Agent: "nobody"}, `This call was refused: the interceptor server "x" of the project's policy is the bridged agent "nobody", which is not connected.`},
		{policy.Interceptor{Agent: "nobody", FailOpen: true}, ""},
	} {
		c := New([]policy.Interceptor{tc.entry}, Options{Agents: ag})
		got, out := c.Run(ctx, "tools/call", PhaseResponse, result, nil)
		switch {
		case tc.want == "" && (out.Blocked || string(got) != string(result)):
			t.Errorf("%+v: %s %+v, want the result through", tc.entry, got, out)
		case tc.want != "" && (!out.Blocked || out.Message != tc.want):
			t.Errorf("%+v: %+v, want blocked with %q", tc.entry, out, tc.want)
		}
		c.Close()
	}
}
