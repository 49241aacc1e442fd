package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/store"
)

// policyAnswer is GET …/policy.
type policyAnswer struct {
	Version      int64            `json:"version"`
	UpdatedAt    *string          `json:"updatedAt"`
	UpdatedBy    string           `json:"updatedBy"`
	Rules        []map[string]any `json:"rules"`
	Interceptors []map[string]any `json:"interceptors"`
}

const policyPath = "/api/projects/shop/policy"

var amountLimit = map[string]any{
	"name": "amount-limit", "on": "call", "tools": []string{"refund*"},
	"when":   `args.amount > 500 && caller.role != "owner"`,
	"effect": "deny", "message": "Refunds over 500 need an owner.",
}

// settingsChanges returns and forgets the Settings changes published.
func (n *notifier) settingsChanges() []changes.Change {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []changes.Change
	for _, c := range n.kinds {
		if c.Kind == changes.Settings {
			out = append(out, c)
		}
	}
	n.ids, n.kinds = nil, nil
	return out
}

func TestPolicyRoles(t *testing.T) {
	e := newEnv(t)
	admin := e.admin()
	viewer := e.member(admin, "vic@example.com", store.RoleViewer)
	editor := e.member(admin, "eve@example.com", store.RoleEditor)
	owner := e.member(admin, "olga@example.com", store.RoleOwner)
	e.connect("r-1", "", tool("refund", "Refund an order.", false))

	var got policyAnswer
	viewer.mustCall(http.StatusOK, "GET", policyPath, nil, &got)
	if got.Version != 0 || got.UpdatedAt != nil || got.Rules == nil || len(got.Rules) != 0 {
		t.Errorf("a project that never saved a policy: %+v; want version 0, updatedAt null and rules []", got)
	}
	doc := map[string]any{"rules": []any{amountLimit}}
	for name, c := range map[string]*client{"viewer": viewer, "editor": editor} {
		res := c.call("PUT", policyPath, doc, nil)
		if res.StatusCode != http.StatusForbidden || res.apiError() != `This change needs the owner role in project "shop"; you are a `+name+`. Ask an owner of the project (its Members page lists them).` {
			t.Errorf("PUT as %s: %d %q; want 403 naming the owner role", name, res.StatusCode, res.apiError())
		}
	}
	res := viewer.call("POST", policyPath+"/check", doc, nil)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(res.apiError(), "needs the editor or owner role") {
		t.Errorf("check as viewer: %d %q; want 403", res.StatusCode, res.apiError())
	}
	res = viewer.call("POST", policyPath+"/test", map[string]any{"tool": "refund"}, nil)
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("test as viewer: %d %q; want 403", res.StatusCode, res.apiError())
	}
	var check apitypes.PolicyCheck
	editor.mustCall(http.StatusOK, "POST", policyPath+"/check", doc, &check)
	if !check.OK || len(check.Errors) != 0 {
		t.Errorf("check as editor = %+v; want ok", check)
	}
	owner.mustCall(http.StatusOK, "PUT", policyPath, doc, &got)
	if got.Version != 1 || got.UpdatedBy != "olga@example.com" || got.UpdatedAt == nil || len(got.Rules) != 1 || got.Rules[0]["name"] != "amount-limit" {
		t.Errorf("PUT as owner answered %+v; want version 1 by olga with the rule", got)
	}
	viewer.mustCall(http.StatusOK, "GET", policyPath, nil, &got)
	if got.Version != 1 || len(got.Rules) != 1 {
		t.Errorf("GET after the save = %+v", got)
	}
}

func TestPolicyBadRuleSavesNothing(t *testing.T) {
	e := newEnv(t)
	admin := e.admin()
	admin.mustCall(http.StatusOK, "PUT", policyPath, map[string]any{"rules": []any{amountLimit}}, nil)
	e.notified.take()

	bad := map[string]any{"rules": []any{amountLimit, map[string]any{
		"name": "weekday", "on": "call", "effect": "deny",
		"when": "caller.role == \"viewer\" &&\n  args.amount >",
	}}}
	res := admin.call("PUT", policyPath, bad, nil)
	var pe apitypes.PolicyError
	json.Unmarshal(res.body, &pe)
	if res.StatusCode != http.StatusBadRequest || pe.Rule != "weekday" || pe.Index != 1 || pe.Field != "when" || pe.Line != 2 || pe.Column == 0 ||
		!strings.HasPrefix(pe.Error, `rule "weekday": when at line 2, column `) {
		t.Fatalf("PUT of a rule that does not compile: %d %s; want 400 naming rule weekday, when, line 2", res.StatusCode, res.body)
	}
	var got policyAnswer
	admin.mustCall(http.StatusOK, "GET", policyPath, nil, &got)
	if got.Version != 1 || len(got.Rules) != 1 {
		t.Errorf("after a refused PUT: version %d with %d rules; want version 1 unchanged", got.Version, len(got.Rules))
	}
	if n := e.notified.settingsChanges(); len(n) != 0 {
		t.Errorf("a refused PUT published %v", n)
	}

	// Refusals that are not about one rule's expression.
	for _, tt := range []struct {
		body any
		want apitypes.PolicyError
	}{
		{map[string]any{"rules": []any{map[string]any{"name": "x", "on": "call", "efect": "deny"}}},
			apitypes.PolicyError{Index: -1, Error: `The policy is not valid JSON of the expected shape: json: unknown field "efect". See docs/policy.md.`}},
		{json.RawMessage("null"), apitypes.PolicyError{Index: -1, Error: `The policy is not a JSON object: it is null. Send {"rules": [...]}; see docs/policy.md.`}},
		{map[string]any{"rules": []any{map[string]any{"name": "x", "on": "list", "effect": "deny"}}},
			apitypes.PolicyError{Rule: "x", Field: "effect", Error: `rule "x": effect: "deny" cannot be used on list; use one of allow, hide`}},
		{map[string]any{"rules": []any{}, "interceptors": []any{map[string]any{"url": "ftp://x"}}},
			apitypes.PolicyError{Index: -1, Field: "url", Interceptor: new(int), Error: `interceptor 1: url: "ftp://x" is not an http(s) URL`}},
	} {
		res := admin.call("PUT", policyPath, tt.body, nil)
		var got apitypes.PolicyError
		json.Unmarshal(res.body, &got)
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("PUT %v: status %d, want 400", tt.body, res.StatusCode)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("PUT %v: refusal (-want +got):\n%s", tt.body, diff)
		}
	}

	// A body over 1 MiB is refused unread.
	huge := map[string]any{"rules": []any{map[string]any{"name": "big", "on": "call", "effect": "deny", "message": strings.Repeat("x", 1<<20)}}}
	if res := admin.call("PUT", policyPath, huge, nil); res.StatusCode != http.StatusRequestEntityTooLarge ||
		res.apiError() != "The policy is larger than 1048576 bytes; a policy keeps at most 200 rules." {
		t.Errorf("PUT of 1 MiB: %d %q; want 413", res.StatusCode, res.apiError())
	}

	// The check answers every rule's error at once, without saving.
	var check apitypes.PolicyCheck
	admin.mustCall(http.StatusOK, "POST", policyPath+"/check", map[string]any{"rules": []any{
		map[string]any{"name": "a", "on": "call", "effect": "deny", "when": "args.x ==="},
		amountLimit,
		map[string]any{"name": "b", "on": "result", "effect": "redact"},
	}}, &check)
	if check.OK || len(check.Errors) != 2 || check.Errors[0].Rule != "a" || check.Errors[0].Line != 1 ||
		check.Errors[1] != (apitypes.PolicyError{Rule: "b", Index: 2, Field: "redact", Error: `rule "b": redact: a redact rule needs at least one pattern`}) {
		t.Errorf("check = %+v; want rule a's expression and rule b's missing patterns", check)
	}
	admin.mustCall(http.StatusOK, "GET", policyPath, nil, &got)
	if got.Version != 1 {
		t.Errorf("check saved: version %d", got.Version)
	}
}

func TestPolicyStaleVersion(t *testing.T) {
	e := newEnv(t)
	admin := e.admin()
	admin.mustCall(http.StatusOK, "PUT", policyPath, map[string]any{"rules": []any{}, "version": 0}, nil)
	admin.mustCall(http.StatusOK, "PUT", policyPath, map[string]any{"rules": []any{amountLimit}, "version": 1}, nil)
	res := admin.call("PUT", policyPath, map[string]any{"rules": []any{}, "version": 1}, nil)
	want := `The policy of project "shop" changed since you read it: you edited version 1, and version 2 was saved by ada@example.com. Reload it, apply your change again and save.`
	if res.StatusCode != http.StatusConflict || res.apiError() != want {
		t.Errorf("PUT of version 1 after 2: %d %q; want 409 %q", res.StatusCode, res.apiError(), want)
	}
	// Without a version, the save goes on top of the newest.
	var got policyAnswer
	admin.mustCall(http.StatusOK, "PUT", policyPath, map[string]any{"rules": []any{}}, &got)
	if got.Version != 3 || len(got.Rules) != 0 {
		t.Errorf("PUT without version = %+v; want version 3", got)
	}
}

func TestPolicyHeadersWriteOnly(t *testing.T) {
	e := newEnv(t)
	admin := e.admin()
	const secret = "Bearer ic-secret-9f2"
	doc := map[string]any{"rules": []any{amountLimit}, "interceptors": []any{
		map[string]any{"name": "pii", "url": "http://127.0.0.1:9/mcp", "headers": map[string]string{"Authorization": secret}, "timeout": "500ms"},
	}}
	res := admin.mustCall(http.StatusOK, "PUT", policyPath, doc, nil)
	if strings.Contains(res.text(), "ic-secret") {
		t.Errorf("PUT answer shows the header value: %s", res.body)
	}
	if n := e.notified.settingsChanges(); len(n) != 1 || n[0].Project != e.project.ID {
		t.Errorf("published after a save: %v; want one Settings change for the project", n)
	}

	// A GET shows the value masked; sending the answer back keeps the secret.
	res = admin.mustCall(http.StatusOK, "GET", policyPath, nil, nil)
	var got policyAnswer
	json.Unmarshal(res.body, &got)
	if strings.Contains(res.text(), "ic-secret") || got.Interceptors[0]["headers"].(map[string]any)["Authorization"] != "••••••" {
		t.Fatalf("GET shows %s; want the header value masked", res.body)
	}
	round := map[string]any{"version": got.Version, "rules": got.Rules, "interceptors": got.Interceptors}
	admin.mustCall(http.StatusOK, "PUT", policyPath, round, &got)
	if got.Version != 2 {
		t.Errorf("round trip saved version %d, want 2", got.Version)
	}
	sp, err := e.st.Policy(context.Background(), e.project.ID)
	if err != nil || !strings.Contains(string(sp.Document), secret) {
		t.Errorf("stored after the round trip: %s, %v; want the secret kept", sp.Document, err)
	}

	// A masked value for a header never saved is refused.
	bad := map[string]any{"rules": []any{}, "interceptors": []any{
		map[string]any{"name": "pii", "url": "http://127.0.0.1:9/mcp", "headers": map[string]string{"X-Other": "••••••"}},
	}}
	res = admin.call("PUT", policyPath, bad, nil)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(res.apiError(), `"X-Other" is sent as "••••••"`) {
		t.Errorf("PUT of a masked header never saved: %d %s", res.StatusCode, res.body)
	}

	// A kept value goes only where it was saved for.
	moved := map[string]any{"rules": []any{}, "interceptors": []any{
		map[string]any{"name": "pii", "url": "https://elsewhere.example/mcp", "headers": map[string]string{"Authorization": "••••••"}},
	}}
	res = admin.call("PUT", policyPath, moved, nil)
	if res.StatusCode != http.StatusBadRequest || res.apiError() != `interceptor 1: headers: "Authorization" is sent as "••••••", which keeps the saved value, but the interceptor's address changed; send the value again for the new address` {
		t.Errorf("PUT of a masked header to a new url: %d %s", res.StatusCode, res.body)
	}

	// The audit log has before and after, masked.
	var page struct {
		Entries []struct {
			Actor, Action, Target string
			Before, After         json.RawMessage
		}
	}
	res = admin.mustCall(http.StatusOK, "GET", "/api/projects/shop/audit?action=policy.update", nil, &page)
	if strings.Contains(res.text(), "ic-secret") {
		t.Errorf("the audit log shows the header value: %s", res.body)
	}
	if len(page.Entries) != 2 {
		t.Fatalf("audit entries = %d, want 2 (one per save)", len(page.Entries))
	}
	first := page.Entries[1]
	var before, after struct {
		Version      int64
		Rules        []struct{ Name string }
		Interceptors []struct{ Headers map[string]string }
	}
	json.Unmarshal(first.Before, &before)
	json.Unmarshal(first.After, &after)
	if first.Actor != "ada@example.com" || first.Target != "shop" || before.Version != 0 || len(before.Rules) != 0 ||
		after.Version != 1 || len(after.Rules) != 1 || after.Rules[0].Name != "amount-limit" || after.Interceptors[0].Headers["Authorization"] != "••••••" {
		t.Errorf("first policy.update entry = %+v before %s after %s", first, first.Before, first.After)
	}
}

func TestPolicyTest(t *testing.T) {
	e := newEnv(t)
	admin := e.admin()
	e.member(admin, "eve@example.com", store.RoleEditor)
	owner := e.member(admin, "olga@example.com", store.RoleOwner)
	refund := tool("refund", "Refund an order.", false)
	e.connect("r-1", "", refund, tool("get_order", "Look up.", true))
	rw, _, err := auth.CreateKey(t.Context(), e.st, store.Key{ProjectID: e.project.ID, Kind: store.KindClient, Name: "support bot"})
	if err != nil {
		t.Fatal(err)
	}
	ro, _, err := auth.CreateKey(t.Context(), e.st, store.Key{ProjectID: e.project.ID, Kind: store.KindClient, Name: "reader", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	admin.mustCall(http.StatusOK, "PUT", policyPath, map[string]any{"rules": []any{
		map[string]any{"name": "readers-see-reads", "on": "list", "when": `!("mcp:write" in caller.scopes) && !tool.readOnly`, "effect": "hide"},
		map[string]any{"name": "watch-bot", "on": "call", "when": `caller.key.name == "support bot"`, "effect": "deny", "mode": "audit"},
		amountLimit,
		map[string]any{"name": "ask-editors", "on": "call", "tools": []string{"refund"}, "when": `caller.role == "editor" && tool.destructive`,
			"effect": "confirm", "message": "Refund {{args.amount}} for {{caller.person.email}}?"},
	}}, nil)

	none := apitypes.PolicyDecision{Effect: "none", Audit: []apitypes.PolicyHit{}}
	for _, tt := range []struct {
		name string
		body map[string]any
		want apitypes.PolicyTestResult
	}{
		{"key over the limit", map[string]any{"tool": "refund", "args": map[string]any{"amount": 900}, "asKey": rw.ID}, apitypes.PolicyTestResult{
			List: none,
			Call: apitypes.PolicyDecision{Effect: "deny", Rule: "amount-limit", Message: "Refunds over 500 need an owner.",
				Audit: []apitypes.PolicyHit{{Rule: "watch-bot", Effect: "deny"}}}}},
		{"read-only key", map[string]any{"tool": "refund", "args": map[string]any{"amount": 10}, "asKey": ro.ID}, apitypes.PolicyTestResult{
			List: apitypes.PolicyDecision{Effect: "hide", Rule: "readers-see-reads", Audit: []apitypes.PolicyHit{}}, Call: none}},
		{"owner", map[string]any{"tool": "refund", "args": map[string]any{"amount": 900}, "asPerson": "olga@example.com"}, apitypes.PolicyTestResult{
			List: none, Call: none}},
		{"editor", map[string]any{"tool": "refund", "args": map[string]any{"amount": 90}, "asPerson": "EVE@example.com"}, apitypes.PolicyTestResult{
			List: none, Call: apitypes.PolicyDecision{Effect: "confirm", Rule: "ask-editors", Message: "Refund 90 for eve@example.com?", Audit: []apitypes.PolicyHit{}}}},
		{"draft", map[string]any{"tool": "get_order", "asPerson": "olga@example.com", "document": map[string]any{"rules": []any{
			map[string]any{"name": "nobody", "on": "call", "effect": "deny"}}}}, apitypes.PolicyTestResult{
			List: none, Call: apitypes.PolicyDecision{Effect: "deny", Rule: "nobody", Message: `This call was refused by rule "nobody" of the project's policy.`, Audit: []apitypes.PolicyHit{}}}},
	} {
		var got apitypes.PolicyTestResult
		owner.mustCall(http.StatusOK, "POST", policyPath+"/test", tt.body, &got)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}

	for _, tt := range []struct {
		body   map[string]any
		status int
		want   string
	}{
		{map[string]any{"tool": "nope", "asKey": rw.ID}, http.StatusNotFound, "Project \"shop\" has no tool \"nope\". `spacefix tools list` (or the Tools page) lists the tools its clients see."},
		{map[string]any{"tool": "refund", "asPerson": "stranger@example.com"}, http.StatusBadRequest, `asPerson: stranger@example.com is not a member of project "shop"; its Members page lists who is`},
		{map[string]any{"tool": "refund", "asKey": "key_nope"}, http.StatusBadRequest, "asKey: project \"shop\" has no client key \"key_nope\"; `spacefix keys list` lists them"},
		{map[string]any{"tool": "refund", "asKey": e.agentKey.ID}, http.StatusBadRequest, "has no client key"},
		{map[string]any{"tool": "refund", "args": []int{1}, "asKey": rw.ID}, http.StatusBadRequest, "args: want the call's arguments as a JSON object"},
	} {
		res := owner.call("POST", policyPath+"/test", tt.body, nil)
		if res.StatusCode != tt.status || !strings.Contains(res.apiError(), tt.want) {
			t.Errorf("test %v: %d %q; want %d %q", tt.body, res.StatusCode, res.apiError(), tt.status, tt.want)
		}
	}
	// A draft that does not compile is refused with its position.
	res := owner.call("POST", policyPath+"/test", map[string]any{"tool": "refund", "asKey": rw.ID,
		"document": map[string]any{"rules": []any{map[string]any{"name": "x", "on": "call", "effect": "deny", "when": "args.("}}}}, nil)
	var pe apitypes.PolicyError
	json.Unmarshal(res.body, &pe)
	if res.StatusCode != http.StatusBadRequest || pe.Rule != "x" || pe.Line != 1 {
		t.Errorf("a draft that does not compile: %d %s", res.StatusCode, res.body)
	}
}
