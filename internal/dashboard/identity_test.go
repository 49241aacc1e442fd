package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/spacefix/spacefix/internal/store"
)

// TestAgentKeyIdentityAudience: an editor turns a key's identity tokens
// on and off from the Edit dialog's API; each change is audited as
// key.identity; a viewer may not; a bad audience is refused in words that
// say what to type.
func TestAgentKeyIdentityAudience(t *testing.T) {
	e := newEnv(t)
	admin := e.admin()
	editor := e.member(admin, "eve@example.com", store.RoleEditor)
	viewer := e.member(admin, "vic@example.com", store.RoleViewer)
	path := "/api/projects/shop/agent-keys/" + e.agentKey.ID

	var out struct {
		IdentityAudience string `json:"identityAudience"`
	}
	editor.mustCall(http.StatusOK, "PATCH", path, map[string]any{"identityAudience": " https://orders.example.com "}, &out)
	if out.IdentityAudience != "https://orders.example.com" {
		t.Errorf("PATCH answered identityAudience %q", out.IdentityAudience)
	}
	if k, _ := e.st.Key(t.Context(), e.agentKey.ID); k.IdentityAudience != "https://orders.example.com" {
		t.Errorf("stored audience = %q", k.IdentityAudience)
	}
	if got := e.notified.take(); len(got) == 0 {
		t.Error("no change published: gateways would keep the old setting until their controls expire")
	}
	ki := only(t, admin, "shop", "key.identity")
	if ki.Actor != "eve@example.com" || ki.Target != e.agentKey.ID {
		t.Errorf("key.identity = %+v; want eve's, on %s", ki, e.agentKey.ID)
	}
	sameJSON(t, "key.identity before", ki.Before, `{"identityAudience":""}`)
	sameJSON(t, "key.identity after", ki.After, `{"identityAudience":"https://orders.example.com"}`)
	var page auditPage
	admin.mustCall(http.StatusOK, "GET", "/api/projects/shop/audit?action=agent_key.update", nil, &page)
	if len(page.Entries) != 0 {
		t.Errorf("a patch of the audience alone logged agent_key.update too: %+v", page.Entries)
	}

	res := admin.get("/p/shop/agents")
	if !strings.Contains(res.text(), "Identity tokens</span> for <code class=\"wrap\">https://orders.example.com</code>") {
		t.Error("the Agents page does not say the key gets identity tokens")
	}
	if !strings.Contains(res.text(), `&#34;identityAudience&#34;:&#34;https://orders.example.com&#34;`) {
		t.Error("the Edit button's data lacks the audience, so the dialog would open empty")
	}

	for _, tt := range []struct {
		c      *client
		body   map[string]any
		status int
		msg    string
	}{
		{viewer, map[string]any{"identityAudience": "x"}, http.StatusForbidden, ""},
		{editor, map[string]any{"identityAudience": "orders backend"}, http.StatusBadRequest,
			"identityAudience: the identity audience may not contain spaces or control characters; use a URL or a name such as https://orders.example.com"},
		{editor, map[string]any{"identityAudience": "https://" + strings.Repeat("a", 200)}, http.StatusBadRequest,
			"identityAudience: the identity audience has 208 bytes; use at most 200, for example https://orders.example.com"},
	} {
		r := tt.c.call("PATCH", path, tt.body, nil)
		if r.StatusCode != tt.status || (tt.msg != "" && r.apiError() != tt.msg) {
			t.Errorf("PATCH %v = %d %q; want %d %q", tt.body, r.StatusCode, r.apiError(), tt.status, tt.msg)
		}
	}
	if k, _ := e.st.Key(t.Context(), e.agentKey.ID); k.IdentityAudience != "https://orders.example.com" {
		t.Errorf("after refused patches the audience is %q", k.IdentityAudience)
	}

	// Empty turns it off, audited again; the same value again is no change.
	editor.mustCall(http.StatusOK, "PATCH", path, map[string]any{"identityAudience": ""}, nil)
	editor.mustCall(http.StatusOK, "PATCH", path, map[string]any{"identityAudience": ""}, nil)
	admin.mustCall(http.StatusOK, "GET", "/api/projects/shop/audit?action=key.identity", nil, &page)
	if len(page.Entries) != 2 {
		t.Fatalf("key.identity entries = %+v; want 2 (on, off)", page.Entries)
	}
	sameJSON(t, "key.identity off", page.Entries[0].After, `{"identityAudience":""}`)
	if k, _ := e.st.Key(t.Context(), e.agentKey.ID); k.IdentityAudience != "" {
		t.Errorf("after turning it off the audience is %q", k.IdentityAudience)
	}
}

// TestBrowserIdentityAudience: Agents → key → Edit sets the identity
// audience; the row then says the key gets identity tokens, and the
// dialog opens with the audience filled in.
func TestBrowserIdentityAudience(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.signUp(ctx)
	const aud = "https://orders.example.com"

	run(t, ctx, chromedp.Navigate(w.url("/p/default/agents")), chromedp.WaitVisible(chromedp.CSS(`button[data-edit-key]`)))
	run(t, ctx, chromedp.Click(chromedp.CSS(`button[data-edit-key]`)), chromedp.WaitVisible(chromedp.CSS(`#edit-key`)),
		chromedp.SetValue(chromedp.CSS(`#edit-key input[name=identityAudience]`), aud),
		chromedp.Click(chromedp.CSS(`#edit-key button[type=submit]`)))
	until(t, ctx, "the row to say the key gets identity tokens", `(document.querySelector('[data-identity-audience]')?.textContent || '').includes('`+aud+`')`)
	ks, err := w.st.Keys(t.Context(), w.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range ks {
		if k.Kind == store.KindAgent && k.IdentityAudience != aud {
			t.Errorf("stored audience of %s = %q, want %q", k.ID, k.IdentityAudience, aud)
		}
	}
	run(t, ctx, chromedp.Click(chromedp.CSS(`button[data-edit-key]`)), chromedp.WaitVisible(chromedp.CSS(`#edit-key`)))
	until(t, ctx, "the dialog to open with the audience", `document.querySelector('#edit-key input[name=identityAudience]').value === '`+aud+`'`)
}
