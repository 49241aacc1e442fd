package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/store"
)

func compiled(t *testing.T, doc string) *policy.Policy {
	t.Helper()
	d, err := policy.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Compile(d, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyToolAndCaller(t *testing.T) {
	yes := true
	c := &access.Controls{AgentKeys: map[string]store.Key{"k1": {Name: "shop"}}}
	plain := &agents.Tool{Name: "shop_pay", AgentKey: "k1", Def: agentproto.Tool{Name: "pay"}}
	reader := &agents.Tool{Name: "shop_list", AgentKey: "k1", Def: agentproto.Tool{Name: "list", Annotations: &agentproto.Annotations{ReadOnlyHint: &yes, Title: "List"}}}
	if got := c.PolicyTool(plain); got.Agent != "shop" || got.ReadOnly || !got.Destructive {
		t.Errorf("a tool without annotations = %+v, want MCP's default: destructive", got)
	}
	got := c.PolicyTool(reader)
	if !got.ReadOnly || got.Destructive || got.Annotations["readOnlyHint"] != true || got.Annotations["title"] != "List" {
		t.Errorf("a read-only tool = %+v", got)
	}
	pc := policyCaller(agentproto.Caller{KeyID: "g1", Role: "viewer", Person: &agentproto.Person{ID: "7", Email: "a@b.c"}, App: &agentproto.App{ID: "app", Name: "Claude"}})
	if pc.PersonEmail != "a@b.c" || pc.AppName != "Claude" || pc.Role != "viewer" || pc.KeyID != "g1" {
		t.Errorf("caller = %+v", pc)
	}
}

func TestMayConfirm(t *testing.T) {
	p := compiled(t, `{"rules":[
		{"name":"a","on":"call","tools":["shop_*"],"effect":"confirm"},
		{"name":"b","on":"call","tools":["bank_*"],"effect":"confirm","mode":"audit"},
		{"name":"c","on":"call","tools":["mail_*"],"effect":"deny"}]}`)
	for tool, want := range map[string]bool{"shop_pay": true, "bank_pay": false, "mail_send": false, "other": false} {
		if got := MayConfirm(p, tool); got != want {
			t.Errorf("MayConfirm(%s) = %v, want %v", tool, got, want)
		}
	}
	if MayConfirm(nil, "shop_pay") {
		t.Error("no policy confirms")
	}
}

// TestCallPolicyWords: what the call log says, the decision first, then
// what audit-mode rules would have done.
func TestCallPolicyWords(t *testing.T) {
	p := compiled(t, `{"rules":[
		{"name":"shadow","on":"call","effect":"deny","mode":"audit"},
		{"name":"broken","on":"call","when":"args.missing.x > 1","effect":"deny","mode":"audit"},
		{"name":"amount-limit","on":"call","when":"args.amount > 500","effect":"deny"}]}`)
	pc := &callPolicy{f: &Pipeline{}, p: p, in: policy.Input{Tool: policy.Tool{Name: "pay"}, Args: json.RawMessage(`{"amount":600}`)}}
	if d := pc.decide(policy.OnCall); d.Effect != policy.Deny || d.Rule != "amount-limit" {
		t.Fatalf("decision %+v", d)
	}
	want := `deny by rule "amount-limit"; audit: rule "shadow" would deny; audit: rule "broken" would fail (refuse)`
	if got := pc.String(); got != want {
		t.Errorf("words = %q, want %q", got, want)
	}
}

// TestPolicyUnknownPersonRefused: when the gateway cannot look up who an
// OAuth call's person is (its grant is not in the store here), a project
// with rules on calls refuses the call with errWho, failing closed: judged
// as an anonymous caller, a rule for viewers (caller.role == "viewer")
// would let a viewer's call through. The answer of a settled call is
// refused the same way.
func TestPolicyUnknownPersonRefused(t *testing.T) {
	f, _ := twoGateways(t)
	controls := &access.Controls{Policy: compiled(t, `{"rules":[{"name":"viewers-read","on":"call","when":"caller.role == \"viewer\"","effect":"deny"}]}`)}
	call := func() *Call {
		return &Call{
			key:      store.Key{ID: "grant_gone", ProjectID: 1, OAuth: true},
			tool:     &agents.Tool{Name: "refund", AgentKey: "k1", Def: agentproto.Tool{Name: "refund"}},
			controls: controls,
			args:     json.RawMessage(`{}`),
		}
	}
	out, err := policyStage{}.serve(context.Background(), f, call(), next{f, shapeAt})
	if err != nil || out == nil || !out.IsError || FirstText(out) != errWho.Error() {
		t.Fatalf("a call whose person cannot be looked up = %+v, %v; want the tool error %q", out, err, errWho)
	}
	c := call()
	pc := f.policyFor(context.Background(), c)
	if got := f.policyResult(context.Background(), pc, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the refund"}}}); !got.IsError || FirstText(got) != errWho.Error() {
		t.Errorf("the answer of a settled call whose person cannot be looked up = %q, want %q", FirstText(got), errWho)
	}
}

// TestPolicyUnappliedRefusesEveryCall: while the project's policy cannot
// be applied — the gateway could not read the project's controls from its
// store yet, or the saved policy does not compile — every call is refused
// before it reaches an agent, a settled one (a retry with the user's
// answer) too, whose answer would otherwise go out unshaped.
func TestPolicyUnappliedRefusesEveryCall(t *testing.T) {
	f, _ := twoGateways(t)
	saved := toolStages
	defer func() { toolStages = saved }()
	var trail []string
	for i := policyAt + 1; i < len(toolStages); i++ {
		toolStages[i] = recordingStage{name: fmt.Sprint(i), trail: &trail}
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{access.ErrUnread, access.UnreadMessage},
		{errors.New("line 1: syntax error"), access.PolicyBrokenMessage},
	} {
		for _, settled := range []bool{false, true} {
			c := &Call{
				key:      store.Key{ID: "key_1", ProjectID: 1},
				tool:     &agents.Tool{Name: "refund", AgentKey: "k1", Def: agentproto.Tool{Name: "refund"}},
				controls: &access.Controls{PolicyErr: tc.err},
				args:     json.RawMessage(`{}`),
				settled:  settled,
			}
			out, err := policyStage{}.serve(context.Background(), f, c, next{f, policyAt + 1})
			if err != nil || out == nil || !out.IsError || FirstText(out) != tc.want {
				t.Errorf("%v, settled %v: %+v, %v; want the tool error %q", tc.err, settled, out, err, tc.want)
			}
		}
	}
	if len(trail) > 0 {
		t.Errorf("stages after the policy point ran: %v", trail)
	}
}

// TestTaskShaperFailsClosed: a task's or a job's result the gateway cannot
// read is never handed on unshaped: the rules on result could not read it,
// so the task ends with the error a plain call's client gets.
func TestTaskShaperFailsClosed(t *testing.T) {
	pc := &callPolicy{f: &Pipeline{}, p: compiled(t, `{"rules":[{"name":"pii","on":"result","effect":"redact","redact":["[a-z]+@[a-z.]+"]}]}`),
		in: policy.Input{Tool: policy.Tool{Name: "report"}}}
	raw := json.RawMessage(`{"content":[{"type":"text","text":"ann@example.com"},{"type":"no-such-type","text":"ann@example.com"}]}`)
	if _, err := DecodeResult(raw); err == nil {
		t.Fatal("the test's result decodes")
	}
	got, _ := pc.taskShaper()(context.Background(), raw)
	out, err := DecodeResult(got)
	if err != nil || !out.IsError || strings.Contains(string(got), "ann@") {
		t.Errorf("an unreadable task result was shaped into %s, %v; want an isError result without the address", got, err)
	}
}
