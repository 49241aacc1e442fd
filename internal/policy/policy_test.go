package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func mustCompile(t *testing.T, doc string, opts Options) *Policy {
	t.Helper()
	d, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(d, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	alice  = Caller{PersonID: "u1", PersonEmail: "alice@example.com", PersonName: "Alice", Role: "owner", Project: "shop", AppID: "app1", Scopes: []string{"mcp:read", "mcp:write"}}
	victor = Caller{PersonID: "u2", PersonEmail: "victor@example.com", Role: "viewer", Project: "shop"}
	ci     = Caller{KeyID: "k1", KeyName: "ci", Project: "shop"}
)

const shopPolicy = `{"rules": [
  {"name": "big refunds by owners", "on": "call", "tools": ["refund_*"],
   "when": "args.amount > 500 && caller.role != \"owner\"", "effect": "deny",
   "message": "Refunds over 500 need an owner; {{caller.person.email}} asked for {{args.amount}}."},
  {"name": "viewers see no writes", "on": "list", "when": "caller.role == \"viewer\" && !tool.readOnly", "effect": "hide"},
  {"name": "deletes are confirmed", "on": "call", "tools": ["delete_*"], "when": "tool.destructive", "effect": "confirm"},
  {"name": "ci may do anything", "on": "call", "when": "caller.key.name == \"ci\"", "effect": "allow"},
  {"name": "shadow: no evening calls", "on": "call", "when": "now.getHours() >= 18", "effect": "deny", "mode": "audit"},
  {"name": "no card numbers", "on": "result", "tools": ["get_*"], "effect": "redact", "redact": ["\\b\\d{4}(?:[ -]?\\d{4}){3}\\b"]},
  {"name": "everyone else: small refunds only", "on": "call", "tools": ["refund_*"], "when": "args.amount > 50", "effect": "deny"}
]}`

func TestDecide(t *testing.T) {
	evening := func() time.Time { return time.Date(2026, 12, 7, 19, 0, 0, 0, time.UTC) }
	p := mustCompile(t, shopPolicy, Options{Now: evening})
	refund := Tool{Name: "refund_order", Agent: "orders"}
	del := Tool{Name: "delete_order", Destructive: true}
	get := Tool{Name: "get_order", ReadOnly: true}
	for _, tc := range []struct {
		what   string
		on     string
		in     Input
		effect string
		rule   string
		msg    string
		audit  []Hit
	}{
		{"a viewer's big refund", OnCall, Input{Caller: victor, Tool: refund, Args: json.RawMessage(`{"amount": 900}`)},
			Deny, "big refunds by owners", "Refunds over 500 need an owner; victor@example.com asked for 900.", nil},
		{"an owner's big refund goes on to the next rules", OnCall, Input{Caller: alice, Tool: refund, Args: json.RawMessage(`{"amount": 900}`)},
			Deny, "everyone else: small refunds only", `This call was refused by rule "everyone else: small refunds only" of the project's policy.`,
			[]Hit{{Rule: "shadow: no evening calls", Effect: Deny}}},
		{"a key's refund: allow stops the search", OnCall, Input{Caller: ci, Tool: refund, Args: json.RawMessage(`{"amount": 90}`)},
			Allow, "ci may do anything", "", nil},
		{"an integer bound meets a float argument", OnCall, Input{Caller: victor, Tool: refund, Args: json.RawMessage(`{"amount": 500.5}`)},
			Deny, "big refunds by owners", "Refunds over 500 need an owner; victor@example.com asked for 500.5.", nil},
		{"a delete is confirmed", OnCall, Input{Caller: alice, Tool: del},
			Confirm, "deletes are confirmed", `Allow this call to delete_order? The project's policy (rule "deletes are confirmed") asks you first.`, nil},
		{"no rule decides: only the audit hit is recorded", OnCall, Input{Caller: alice, Tool: get},
			"", "", "", []Hit{{Rule: "shadow: no evening calls", Effect: Deny}}},
		{"a viewer's list hides writes", OnList, Input{Caller: victor, Tool: refund}, Hide, "viewers see no writes", "", nil},
		{"a viewer's list keeps reads", OnList, Input{Caller: victor, Tool: get}, "", "", "", nil},
		{"an owner's list keeps writes", OnList, Input{Caller: alice, Tool: refund}, "", "", "", nil},
		{"a result of get_* is redacted", OnResult, Input{Caller: alice, Tool: get, Result: &Result{Text: "card 4111 1111 1111 1111"}},
			Redact, "no card numbers", "", nil},
	} {
		t.Run(tc.what, func(t *testing.T) {
			d := p.Decide(tc.on, &tc.in)
			if d.Effect != tc.effect || d.Rule != tc.rule || d.Message != tc.msg || d.Failed {
				t.Errorf("decision = %s by %q (%q, failed %v), want %s by %q (%q)", d.Effect, d.Rule, d.Message, d.Failed, tc.effect, tc.rule, tc.msg)
			}
			if fmt.Sprint(d.Audit) != fmt.Sprint(tc.audit) {
				t.Errorf("audit = %v, want %v", d.Audit, tc.audit)
			}
		})
	}
}

// A rule that cannot be evaluated refuses the call (fail closed), says
// which rule, and is logged once however often it fails.
func TestDecideFailsClosed(t *testing.T) {
	var logs bytes.Buffer
	p := mustCompile(t, `{"rules": [
	  {"name": "amount limit", "on": "call", "when": "args.amount > 500", "effect": "deny"},
	  {"name": "hide by label", "on": "list", "when": "tool.annotations.label == \"secret\"", "effect": "hide"},
	  {"name": "audited typo", "on": "call", "tools": ["audited"], "when": "args.nope == 1", "effect": "deny", "mode": "audit"}
	]}`, Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	for range 3 {
		d := p.Decide(OnCall, &Input{Caller: ci, Tool: Tool{Name: "refund"}, Args: json.RawMessage(`{"note": "no amount"}`)})
		want := `This call was refused by rule "amount limit" of the project's policy, which could not be evaluated.`
		if d.Effect != Deny || !d.Failed || d.Message != want || d.Rule != "amount limit" {
			t.Fatalf("decision = %+v, want a deny with %q", d, want)
		}
	}
	if n := strings.Count(logs.String(), "could not be evaluated"); n != 1 {
		t.Errorf("the rule's error was logged %d times, want once a minute:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "no such key: amount") {
		t.Errorf("the log does not say why:\n%s", logs.String())
	}
	if d := p.Decide(OnList, &Input{Caller: ci, Tool: Tool{Name: "x"}}); d.Effect != Hide || !d.Failed {
		t.Errorf("a list rule that fails = %+v, want the tool hidden", d)
	}
	// Arguments that are not an object fail too, never pass.
	if d := p.Decide(OnCall, &Input{Caller: ci, Tool: Tool{Name: "refund"}, Args: json.RawMessage(`[1]`)}); d.Effect != Deny || !d.Failed {
		t.Errorf("arguments that are an array = %+v, want a deny", d)
	}
	// An audit rule that fails records it and decides nothing.
	d := p.Decide(OnCall, &Input{Caller: ci, Tool: Tool{Name: "audited"}, Args: json.RawMessage(`{"amount": 1}`)})
	if d.Effect != "" || len(d.Audit) != 1 || !d.Audit[0].Failed {
		t.Errorf("a failing audit rule = %+v, want no decision and one failed hit", d)
	}
}

// A rule past its cost limit fails closed instead of holding the call.
func TestDecideCostLimit(t *testing.T) {
	p := mustCompile(t, `{"rules": [{"name": "quadratic", "on": "call",
	  "when": "args.items.all(x, args.items.all(y, x == y || x != y)) && false", "effect": "deny"}]}`, Options{})
	items := make([]int, 2000)
	args, _ := json.Marshal(map[string]any{"items": items})
	d := p.Decide(OnCall, &Input{Tool: Tool{Name: "t"}, Args: args})
	if d.Effect != Deny || !d.Failed {
		t.Errorf("an evaluation past the cost limit = %+v, want a failed deny", d)
	}
	if !p.tracked("quadratic") {
		t.Error("a rule with nested loops over the arguments runs without a cost limit")
	}
	if n := p.fastUpTo("quadratic"); n >= len(args) {
		t.Errorf("the quadratic rule runs untracked up to %d bytes, past the %d of arguments that exceed the limit", n, len(args))
	}
	small, _ := json.Marshal(map[string]any{"items": items[:3]})
	if d := p.Decide(OnCall, &Input{Tool: Tool{Name: "t"}, Args: small}); d.Effect != "" {
		t.Errorf("a small evaluation = %+v, want no decision", d)
	}
}

func TestCompileRefusals(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"rules":[{"name":"r","on":"call","when":"args.amount >","effect":"deny"}]}`,
			`rule "r": when at line 1, column 14: Syntax error: mismatched input '<EOF>'`},
		{`{"rules":[{"name":"r","on":"call","when":"caller.rol == 1 &&\n  nope.x","effect":"deny"}]}`,
			`rule "r": when at line 2, column 3: undeclared reference to 'nope'`},
		{`{"rules":[{"name":"r","on":"call","when":"1 + 2","effect":"deny"}]}`,
			`rule "r": when at line 1, column 1: the condition yields int; it must yield a bool`},
		{`{"rules":[{"name":"r","on":"list","effect":"deny"}]}`,
			`rule "r": effect: "deny" cannot be used on list; use one of allow, hide`},
		{`{"rules":[{"name":"r","on":"calls","effect":"deny"}]}`, `rule "r": on: "calls" is not one of list, call, result`},
		{`{"rules":[{"on":"call","effect":"deny"}]}`, `rule 1: name: every rule needs a name`},
		{`{"rules":[{"name":"a","on":"call","effect":"allow"},{"name":"a","on":"call","effect":"deny"}]}`, `rule "a": name: another rule has this name`},
		{`{"rules":[{"name":"r","on":"result","effect":"redact","redact":["x*"]}]}`, `rule "r": redact: "x*" matches the empty string`},
		{`{"rules":[{"name":"r","on":"result","effect":"redact","redact":["(x"]}]}`, `rule "r": redact: "(x": error parsing regexp`},
		{`{"rules":[{"name":"r","on":"call","effect":"deny","redact":["x"]}]}`, `rule "r": redact: patterns are for effect redact only`},
		{`{"rules":[{"name":"r","on":"call","tools":["["],"effect":"deny"}]}`, `rule "r": tools: "[" is not a valid pattern`},
		{`{"rules":[{"name":"r","on":"call","effect":"deny","mode":"shadow"}]}`, `rule "r": mode: "shadow" is not enforce or audit`},
		{`{"rules":[{"name":"r","on":"call","effect":"deny","message":"{{secret.x}}"}]}`, `rule "r": message: {{secret.x}} names nothing a call has`},
		{`{"rules":[],"interceptors":[{"url":"ftp://x"}]}`, `interceptor 1: url: "ftp://x" is not an http(s) URL`},
		{`{"rules":[],"interceptors":[{"url":"https://u:p@x"}]}`, `interceptor 1: url: put credentials in headers`},
		{`{"rules":[],"interceptors":[{"url":"https://x","timeout":"1h"}]}`, `interceptor 1: timeout: "1h" is not a duration between 1ms and 30s`},
		{`{"rules":[],"interceptors":[{"agent":"pii","url":"https://x"}]}`, `interceptor 1: agent: give the interceptor server's url or the name of the bridged agent in front of it, not both`},
		{`{"rules":[],"interceptors":[{"agent":"pii bridge"}]}`, `interceptor 1: agent: "pii bridge" is not an agent's name (1 to 64 characters from A-Z a-z 0-9 _ -)`},
		{`{"rules":[],"interceptors":[{"agent":"pii","headers":{"X-Token":"t"}}]}`, `interceptor 1: headers: headers go to a server at a url`},
		{`{"rules":[],"interceptors":[{"name":"x"}]}`, `interceptor 1: url: give the interceptor server's url (http or https), or the name of a bridged agent of the project in front of it as agent`},
	} {
		d, err := Parse([]byte(tc.doc))
		if err == nil {
			_, err = Compile(d, Options{})
		}
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want it to start with %q", tc.doc, err, tc.want)
		}
	}
	// A bridged agent of the project may serve the interceptors.
	if _, err := Compile(Document{Interceptors: []Interceptor{{Name: "pii", Agent: "pii-bridge", Timeout: "1s", FailOpen: true}}}, Options{}); err != nil {
		t.Errorf("an interceptor on a bridged agent: %v", err)
	}
	var re *RuleError
	_, err := Compile(Document{Rules: []Rule{{Name: "ok", On: OnCall, Effect: Allow}, {Name: "bad", On: OnCall, When: "(", Effect: Deny}}}, Options{})
	if !errors.As(err, &re) || re.Index != 1 || re.Name != "bad" || re.Field != "when" || re.Line != 1 {
		t.Errorf("error = %#v, want a RuleError for the second rule's condition", err)
	}
	if _, err := Parse([]byte(`{"rules":[{"name":"r","on":"call","efect":"deny"}]}`)); err == nil || !strings.Contains(err.Error(), `unknown field "efect"`) {
		t.Errorf("a misspelt field: %v, want it refused", err)
	}
}

func TestRedact(t *testing.T) {
	p := mustCompile(t, `{"rules":[{"name":"pii","on":"result","effect":"redact",
	  "redact":["[\\w.+-]+@[\\w-]+\\.[\\w.]+", "\\b\\d{4}(?:[ -]?\\d{4}){3}\\b"]}]}`, Options{})
	d := p.Decide(OnResult, &Input{Tool: Tool{Name: "t"}, Result: &Result{}})
	if got, want := d.RedactText("mail bob@example.com, card 4111-1111-1111-1111."), "mail [redacted], card [redacted]."; got != want {
		t.Errorf("RedactText = %q, want %q", got, want)
	}
	in := map[string]any{"email": "a@b.io", "n": 4.0, "list": []any{"x", "c@d.org"}, "a@b.io": true}
	got := d.RedactValue(in)
	want := `{"a@b.io":true,"email":"[redacted]","list":["x","[redacted]"],"n":4}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("RedactValue = %s, want %s", b, want)
	}
	if in["email"] != "a@b.io" {
		t.Error("RedactValue changed its input in place")
	}
	var none Decision
	if none.RedactText("a@b.io") != "a@b.io" {
		t.Error("a decision that is not a redaction changed the text")
	}
}

// A message takes the call's values, and a missing one is empty.
func TestMessageTemplate(t *testing.T) {
	p := mustCompile(t, `{"rules":[{"name":"r","on":"call","effect":"deny",
	  "message":"{{caller.person.email}}|{{args.o.k}}|{{args.list}}|{{args.missing}}|{{tool.name}}|{{caller.key.name}}"}]}`, Options{})
	d := p.Decide(OnCall, &Input{Caller: ci, Tool: Tool{Name: "t"}, Args: json.RawMessage(`{"o":{"k":"v"},"list":[1,2]}`)})
	if want := "|v|[1,2]||t|ci"; d.Message != want {
		t.Errorf("message = %q, want %q", d.Message, want)
	}
}

func TestNilPolicyDecidesNothing(t *testing.T) {
	var p *Policy
	if d := p.Decide(OnCall, &Input{}); d.Effect != "" || p.Has(OnCall) {
		t.Errorf("a nil policy decided %+v", d)
	}
}

// A condition over short values runs untracked; one that scans
// arguments is stopped at the limit.
func TestCostTracking(t *testing.T) {
	p := mustCompile(t, `{"rules": [
	  {"name": "role", "on": "call", "when": "caller.role != \"owner\" && tool.readOnly && args.amount > 5", "effect": "deny"},
	  {"name": "scan", "on": "call", "when": "args.note.contains(\"x\")", "effect": "deny"},
	  {"name": "loop", "on": "call", "when": "caller.scopes.exists(s, s == \"mcp:write\")", "effect": "deny"}
	]}`, Options{})
	for name, want := range map[string]bool{"role": false, "scan": true, "loop": false} {
		if got := p.tracked(name); got != want {
			t.Errorf("rule %q tracked = %v, want %v", name, got, want)
		}
	}
	// A scan of a call's arguments of a few KB cannot reach the limit: it
	// runs untracked up to a size, and tracked past it.
	if n := p.fastUpTo("scan"); n < 4<<10 || n >= 16<<20 {
		t.Errorf("rule scan runs untracked up to %d bytes of input; want from 4 KiB to under 16 MiB", n)
	}
	d := p.Decide(OnCall, &Input{Tool: Tool{Name: "t"}, Args: []byte(`{"note":"a note with an x"}`)})
	if d.Effect != Deny || d.Rule != "scan" {
		t.Errorf("the untracked scan decided %+v, want deny by scan", d)
	}
	// A result's structured content of unknown size is evaluated tracked.
	in := &Input{Result: &Result{Structured: map[string]any{"a": "b"}}}
	if in.size() != -1 {
		t.Errorf("the size of a result with structured content of unknown length = %d, want -1", in.size())
	}
}

// A rule that reads the time decides differently with nothing else
// changing: the gateway judges a list under it anew at every tools/list.
func TestReadsNow(t *testing.T) {
	p := mustCompile(t, `{"rules": [
	  {"name": "office hours", "on": "list", "tools": ["pay"], "when": "now.getHours() < 8", "effect": "hide"},
	  {"name": "viewers", "on": "list", "when": "caller.role == \"viewer\"", "effect": "hide"},
	  {"name": "a variable named like it", "on": "call", "when": "has(args.now) && args.now > 1", "effect": "deny"}
	]}`, Options{})
	for on, want := range map[string]bool{OnList: true, OnCall: false, OnResult: false} {
		if got := p.ReadsNow(on); got != want {
			t.Errorf("ReadsNow(%s) = %v, want %v", on, got, want)
		}
	}
	if p := mustCompile(t, shopPolicy, Options{}); p.ReadsNow(OnList) || !p.ReadsNow(OnCall) {
		t.Errorf("shop policy: ReadsNow(list) = %v, ReadsNow(call) = %v; want false, true (the audit rule reads now)", p.ReadsNow(OnList), p.ReadsNow(OnCall))
	}
	var none *Policy
	if none.ReadsNow(OnList) {
		t.Error("a nil policy reads the time")
	}
}

// A message that names a huge argument many times costs no more than its
// cap: the values are cut as they are put in, not once the whole message
// is built, and a cut never splits a character.
func TestMessageTemplateBounded(t *testing.T) {
	p := mustCompile(t, `{"rules":[{"name":"r","on":"call","effect":"deny","message":"`+strings.Repeat("{{args.x}}", 99)+`"}]}`, Options{})
	args, _ := json.Marshal(map[string]string{"x": strings.Repeat("é", 1<<19)}) // 1 MiB
	in := &Input{Tool: Tool{Name: "t"}, Args: args}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d := p.Decide(OnCall, in)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("one refusal allocated %d MiB", n>>20)
	}
	if len(d.Message) > maxExpanded+len("…") || !utf8.ValidString(d.Message) || !strings.HasSuffix(d.Message, "…") {
		t.Errorf("message of %d bytes (valid UTF-8: %v), want at most %d, cut with …", len(d.Message), utf8.ValidString(d.Message), maxExpanded)
	}
}

// The arguments are decoded once for the points of one call, and again
// after SetArgs (an interceptor rewrote them).
func TestArgsDecodedOncePerCall(t *testing.T) {
	p := mustCompile(t, `{"rules": [
	  {"name": "big", "on": "call", "when": "args.amount > 500", "effect": "deny"},
	  {"name": "echo", "on": "result", "when": "has(args.secret) && result.text.contains(args.secret)", "effect": "redact", "redact": ["s3cret"]}
	]}`, Options{})
	in := &Input{Tool: Tool{Name: "t"}, Args: []byte(`{"amount": 10, "secret": "s3cret"}`)}
	if d := p.Decide(OnCall, in); d.Effect != "" {
		t.Fatalf("call: %+v", d)
	}
	decoded := in.args
	in.Result = &Result{Text: "the s3cret is out"}
	if d := p.Decide(OnResult, in); d.Effect != Redact || d.Rule != "echo" {
		t.Errorf("result: %+v, want redact by echo", d)
	}
	if decoded == nil || fmt.Sprintf("%p", decoded) != fmt.Sprintf("%p", in.args) {
		t.Error("the arguments were decoded again for the rules on result")
	}
	in.Result = nil
	in.SetArgs([]byte(`{"amount": 900}`))
	if d := p.Decide(OnCall, in); d.Effect != Deny || d.Rule != "big" {
		t.Errorf("after SetArgs: %+v, want deny by big", d)
	}
}
