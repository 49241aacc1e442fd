package dashboard_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestPolicyPage: the Policy page lists the saved rules and interceptors
// for every member, never an interceptor's header value, and offers the
// editor to owners only, Try it to editors and owners, with its optional
// sample result (labelled, described, its answer hidden until asked).
func TestPolicyPage(t *testing.T) {
	e := newEnv(t)
	owner := e.admin()
	doc := `{"rules": [{"name": "cap-total", "on": "call", "tools": ["create_order"], "when": "args.total > 500", "effect": "deny", "message": "Too much."}],
		"interceptors": [{"name": "pii", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer s3cret-header-value"}}]}`
	if _, err := e.st.SavePolicy(t.Context(), e.project.ID, 0, []byte(doc), "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	res := owner.get("/p/shop/policy")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /p/shop/policy: %d %s", res.StatusCode, res.body)
	}
	page := res.text()
	for _, want := range []string{`data-rule="cap-total"`, "args.total &gt; 500", "Version 1, saved by ada@example.com", "header Authorization",
		`&#34;Authorization&#34;: &#34;••••••&#34;`, `data-policy-save`, `form class="stack" data-try`, `<script src="/static/policy.js" defer>`,
		`<label for="try-result">Result (optional)</label>`, `aria-describedby="try-result-help try-result-error"`,
		`plain text (one text item), or a tool result as MCP has it, in JSON starting with <code>{</code>`,
		`<dt data-try-on-result hidden>Result as the caller would get it</dt>`,
		`data-interceptor-server="pii" data-state="not listed yet"`, `this gateway has not asked it yet.`} {
		if !strings.Contains(page, want) {
			t.Errorf("the owner's Policy page lacks %q", want)
		}
	}
	if strings.Contains(page, "s3cret") {
		t.Error("the Policy page shows an interceptor's header value")
	}
	if strings.Contains(page, "compile on this gateway") {
		t.Error("the Policy page calls a policy that compiles broken")
	}
}
