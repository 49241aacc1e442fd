package dashboard_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/spacefix/spacefix/internal/store"
)

// TestBrowserEditStartsWithText: the Edit dialog starts with the text
// models see, so changing one word is one word's work; saved unchanged,
// it stays no override (no Edited pill) and keeps following the agent.
func TestBrowserEditStartsWithText(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.agent("", orderTools(getOrderV1))
	w.signUp(ctx)

	run(t, ctx, chromedp.Navigate(w.url("/p/default/tools")), chromedp.WaitVisible(chromedp.CSS(`tr[data-tool=get_order]`)))
	run(t, ctx, chromedp.Click(chromedp.CSS(`tr[data-tool=get_order] button[data-edit]`)), chromedp.WaitVisible(chromedp.CSS(`#edit-tool`)))
	until(t, ctx, "the registered text in the box", `document.querySelector('#edit-tool textarea[name=description]').value === `+jsString(getOrderV1))
	run(t, ctx, chromedp.Click(chromedp.CSS(`#edit-tool button[data-close]`)))

	edited := strings.Replace(getOrderV1, "Look up", "Find", 1)
	editTool(t, ctx, "get_order", chromedp.SetValue(chromedp.CSS(`#edit-tool textarea[name=description]`), edited))
	until(t, ctx, "the Edited pill", rowHasPill("get_order", "Edited"))
	editTool(t, ctx, "search_orders", chromedp.SetValue(chromedp.CSS(`#edit-tool input[name=cacheSeconds]`), "10"))
	until(t, ctx, "the Cached 10s pill", rowHasPill("search_orders", "Cached 10s"))

	got := map[string]string{}
	ss, err := w.st.ToolSettings(t.Context(), w.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		got[s.Tool] = s.Description
	}
	if got["get_order"] != edited || got["search_orders"] != "" {
		t.Errorf("saved descriptions = %q; want get_order %q and search_orders none (it follows the agent)", got, edited)
	}
	if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](rowHasPill("search_orders", "Edited"))); ok {
		t.Error("search_orders saved with its registered text shows Edited")
	}
}

func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`)
	return "'" + r.Replace(s) + "'"
}

// TestBrowserSetupOwnsFirstProject: the admin who ran setup is the owner
// of the first project, shown on its Members page in a card with the
// cards' spacing; the only admin is offered neither Take admin nor
// Remove, and the server refuses both with a sentence saying what to do.
func TestBrowserSetupOwnsFirstProject(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.signUp(ctx)
	ms, err := w.st.Members(t.Context(), w.project.ID)
	if err != nil || len(ms) != 1 || ms[0].Email != "ada@example.com" || ms[0].Role != store.RoleOwner {
		t.Fatalf("members of default after setup = %+v, %v; want ada, owner", ms, err)
	}
	run(t, ctx, chromedp.Navigate(w.url("/p/default/members")), chromedp.WaitVisible(chromedp.CSS(`#members`)))
	until(t, ctx, "ada as owner", `document.querySelector('#members select[name=role]').value === 'owner'`)
	gap, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(() => { const a = document.querySelector('#members').getBoundingClientRect();
		return document.querySelector('#members + .card').getBoundingClientRect().top - a.bottom; })()`))
	if err != nil || gap < 16 {
		t.Errorf("gap under the members card = %v px, %v; want the cards' 18", gap, err)
	}

	run(t, ctx, chromedp.Navigate(w.url("/admin")), chromedp.WaitVisible(chromedp.CSS(`tr[data-user]`)))
	offered, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('tr[data-user] button')].map(b => b.textContent).join()
		+ '|' + document.querySelector('[data-last-admin]').textContent`))
	if err != nil || offered != "|The only admin" {
		t.Errorf("the only admin's row offers %q, %v; want no buttons and \"The only admin\"", offered, err)
	}
	for _, method := range []string{"PATCH", "DELETE"} {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch('/api/users/1', {method: '`+method+`', headers: {'Content-Type': 'application/json'},
			body: '{"admin":false}'}).then(async r => r.status + ' ' + (await r.json()).error)`, chromedp.EvalAwaitPromise))
		if want := "409 ada@example.com is the last admin of this gateway. Make someone else an admin first."; err != nil || got != want {
			t.Errorf("%s /api/users/1 on the only admin = %q, %v; want %q", method, got, err, want)
		}
	}
}

// TestBrowserOverviewSnippets: at 1280 and 390 px the set-up snippets
// wrap between words only (never inside --header or a key), the counts
// say "1 replica", and once a key is filled in the line asking to replace
// YOUR_CLIENT_KEY is gone.
func TestBrowserOverviewSnippets(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.agent("", orderTools(getOrderV1))
	w.signUp(ctx)
	for _, size := range widths {
		run(t, ctx, chromedp.EmulateViewport(size.width, size.height),
			chromedp.Navigate(w.url("/p/default")), chromedp.WaitVisible(chromedp.CSS(`[data-snippet]`)))
		broken, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-snippet] .tok')]
			.filter(t => t.getClientRects().length > 1).map(t => t.textContent)`))
		if err != nil || len(broken) > 0 {
			t.Errorf("at %s px, words broken over two lines: %q, %v", size.name, broken, err)
		}
	}
	icon, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch('/favicon.ico').then(r => r.status + ' ' + r.headers.get('Content-Type'))`, chromedp.EvalAwaitPromise))
	if err != nil || icon != "200 image/x-icon" {
		t.Errorf("GET /favicon.ico = %q, %v; want 200 image/x-icon", icon, err)
	}
	until(t, ctx, "1 replica", `[...document.querySelectorAll('.stat span')].some(s => s.textContent === 'replica connected')`)
	run(t, ctx, chromedp.EmulateViewport(1280, 860), chromedp.Click(chromedp.CSS(`button[data-fill-key]`)))
	until(t, ctx, "the key in the snippets", `document.querySelector('[data-snippet]').textContent.includes('sfx_client_')`)
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('main').innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "YOUR_CLIENT_KEY") || !strings.Contains(text, "The snippets below carry a new client key") {
		t.Errorf("after filling in a key the page says:\n%s\nwant no YOUR_CLIENT_KEY and the line saying the key is in", text)
	}
}

// TestBrowserOAuthAsks: the sign-in page an OAuth request leads to names
// the app; consent starts at read only, and the next time at the
// person's last choice for that app.
func TestBrowserOAuthAsks(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.signUp(ctx)
	codes := make(chan string, 1)
	app := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		codes <- r.URL.Query().Get("code")
		fmt.Fprint(rw, "back in the app")
	}))
	defer app.Close()
	callback := app.URL + "/callback"
	res, err := http.Post(w.url("/oauth/register"), "application/json", strings.NewReader(
		`{"client_name":"Claude Desktop","redirect_uris":["`+callback+`"],"token_endpoint_auth_method":"none"}`))
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		ClientID string `json:"client_id"`
	}
	json.NewDecoder(res.Body).Decode(&reg)
	res.Body.Close()
	verifier := strings.Repeat("v", 50)
	sum := sha256.Sum256([]byte(verifier))
	challenge := base64.RawURLEncoding.EncodeToString(sum[:])
	authorize := w.url("/oauth/authorize?" + url.Values{"response_type": {"code"}, "client_id": {reg.ClientID},
		"redirect_uri": {callback}, "state": {"s1"}, "scope": {"mcp:read mcp:write"},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "resource": {w.url("/mcp")}}.Encode())

	run(t, ctx, chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)), chromedp.WaitVisible(chromedp.CSS(`input[name=password]`)),
		chromedp.Navigate(authorize), chromedp.WaitVisible(chromedp.CSS(`input[name=password]`)))
	until(t, ctx, "the app named", `document.querySelector('[data-oauth-app]').innerText.startsWith('Claude Desktop asks to use your tools.')`)
	run(t, ctx,
		chromedp.SetValue(chromedp.CSS(`input[name=email]`), "ada@example.com"),
		chromedp.SetValue(chromedp.CSS(`input[name=password]`), "correct horse battery"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#approve`)))
	until(t, ctx, "read only chosen", `document.querySelector('input[name=access]:checked').value === 'read'`)
	run(t, ctx, chromedp.Click(chromedp.CSS(`input[name=access][value=write]`)), chromedp.Click(chromedp.CSS(`#approve`)))
	var code string
	select {
	case code = <-codes:
	case <-time.After(15 * time.Second):
		t.Fatal("timed out waiting for the browser to come back to the app with a code")
	}
	res, err = http.PostForm(w.url("/oauth/token"), url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {callback}, "client_id": {reg.ClientID}, "code_verifier": {verifier}, "resource": {w.url("/mcp")}})
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("token exchange: %v %v", res, err)
	}
	res.Body.Close()
	w.waitFor("the app connected", func() bool {
		gs, err := w.st.OAuthGrants(t.Context(), w.project.ID)
		return err == nil && len(gs) == 1
	})
	run(t, ctx, chromedp.Navigate(authorize), chromedp.WaitVisible(chromedp.CSS(`#approve`)))
	until(t, ctx, "the last choice, read and write", `document.querySelector('input[name=access]:checked').value === 'write'`)
}
