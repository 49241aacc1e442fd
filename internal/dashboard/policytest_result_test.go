package dashboard_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/store"
)

// POST …/policy/test with a sample result: the rules on result decide,
// and the answer carries the result as the caller would get it.
func TestPolicyTestResult(t *testing.T) {
	e := newEnv(t)
	admin := e.admin()
	owner := e.member(admin, "olga@example.com", store.RoleOwner)
	e.connect("r-1", "", tool("get_order", "Look up.", true))
	bot, _, err := auth.CreateKey(t.Context(), e.st, store.Key{ProjectID: e.project.ID, Kind: store.KindClient, Name: "support bot"})
	if err != nil {
		t.Fatal(err)
	}
	admin.mustCall(http.StatusOK, "PUT", policyPath, map[string]any{"rules": []any{
		map[string]any{"name": "watch-errors", "on": "result", "when": "result.isError", "effect": "deny", "mode": "audit"},
		map[string]any{"name": "owners-see-everything", "on": "result", "when": `caller.role == "owner"`, "effect": "allow"},
		map[string]any{"name": "no-secrets", "on": "result", "when": `result.text.contains("secret")`, "effect": "deny",
			"message": "The result of {{tool.name}} carried a secret."},
		map[string]any{"name": "pii", "on": "result", "effect": "redact", "redact": []string{`[\w.]+@[\w.]+\w`}},
	}}, nil)

	mail := map[string]any{"content": []any{map[string]any{"type": "text", "text": "mail ann@example.com"}},
		"structuredContent": map[string]any{"email": "ann@example.com", "total": 12.5}}
	none := apitypes.PolicyDecision{Effect: "none", Audit: []apitypes.PolicyHit{}}
	for _, tt := range []struct {
		name string
		body map[string]any
		want apitypes.PolicyResultShaped
	}{
		{"redacted for a key", map[string]any{"tool": "get_order", "asKey": bot.ID, "result": mail}, apitypes.PolicyResultShaped{
			PolicyDecision: apitypes.PolicyDecision{Effect: "redact", Rule: "pii", Audit: []apitypes.PolicyHit{}},
			Shaped:         []byte(`{"content":[{"type":"text","text":"mail [redacted]"}],"structuredContent":{"email":"[redacted]","total":12.5}}`)}},
		{"as it is for an owner", map[string]any{"tool": "get_order", "asPerson": "olga@example.com", "result": mail}, apitypes.PolicyResultShaped{
			PolicyDecision: apitypes.PolicyDecision{Effect: "allow", Rule: "owners-see-everything", Audit: []apitypes.PolicyHit{}},
			Shaped:         []byte(`{"content":[{"type":"text","text":"mail ann@example.com"}],"structuredContent":{"email":"ann@example.com","total":12.5}}`)}},
		{"denied, an error recorded by an audit rule", map[string]any{"tool": "get_order", "asKey": bot.ID, "result": map[string]any{
			"content": []any{map[string]any{"type": "text", "text": "the secret is 42"}}, "isError": true}}, apitypes.PolicyResultShaped{
			PolicyDecision: apitypes.PolicyDecision{Effect: "deny", Rule: "no-secrets", Message: "The result of get_order carried a secret.",
				Audit: []apitypes.PolicyHit{{Rule: "watch-errors", Effect: "deny"}}},
			Shaped: []byte(`{"content":[{"type":"text","text":"The result of get_order carried a secret."}],"isError":true}`)}},
	} {
		var got apitypes.PolicyTestResult
		owner.mustCall(http.StatusOK, "POST", policyPath+"/test", tt.body, &got)
		if got.List.Effect != "none" || got.Call.Effect != "none" || got.Result == nil {
			t.Errorf("%s: %+v; want list and call undecided and a result", tt.name, got)
			continue
		}
		var compact bytes.Buffer
		json.Compact(&compact, got.Result.Shaped) // the API indents its answers
		got.Result.Shaped = compact.Bytes()
		if diff := cmp.Diff(tt.want, *got.Result); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}

	// Without a sample, no result in the answer.
	var got apitypes.PolicyTestResult
	owner.mustCall(http.StatusOK, "POST", policyPath+"/test", map[string]any{"tool": "get_order", "asKey": bot.ID}, &got)
	if diff := cmp.Diff(apitypes.PolicyTestResult{List: none, Call: none}, got); diff != "" {
		t.Errorf("without a result (-want +got):\n%s", diff)
	}
	for _, bad := range []any{"mail ann@example.com", []any{1}, map[string]any{"content": "text"}} {
		res := owner.call("POST", policyPath+"/test", map[string]any{"tool": "get_order", "asKey": bot.ID, "result": bad}, nil)
		if want := `result: want a tool result as MCP has it`; res.StatusCode != http.StatusBadRequest || !strings.HasPrefix(res.apiError(), want) {
			t.Errorf("result %v: %d %q; want 400 %q", bad, res.StatusCode, res.apiError(), want)
		}
	}
}
