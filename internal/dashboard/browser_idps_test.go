package dashboard_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/spacefix/spacefix/internal/store"
)

// TestBrowserIdPs: an admin adds a trusted identity provider on the Admin
// page, reads a refusal that says what to fix, sees the entry whole at
// 1280 and 390 px, and removes it; both changes are audited.
func TestBrowserIdPs(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.signUp(ctx)
	const issuer = "https://login.microsoftonline.com/9a8b7c6d-1111-2222-3333-1234567890ab/v2.0"
	form := `form[data-api="POST /api/idps"]`
	run(t, ctx, chromedp.EmulateViewport(1280, 860), chromedp.Navigate(w.url("/admin")), chromedp.WaitVisible(chromedp.CSS(`[data-idps]`)),
		chromedp.SetValue(chromedp.CSS(form+` input[name=issuer]`), "http://idp.example.com"),
		chromedp.Click(chromedp.CSS(form+` button[type=submit]`)))
	until(t, ctx, "the refusal", `document.querySelector('`+form+` [data-error]').textContent ===
		'issuer "http://idp.example.com" must use https (http only on a loopback address, for tests).'`)
	run(t, ctx,
		chromedp.SetValue(chromedp.CSS(form+` input[name=issuer]`), issuer),
		chromedp.SetValue(chromedp.CSS(form+` input[name=allowedClients]`), "https://app.example.com/oauth/client-metadata.json, client_abc"),
		chromedp.SetValue(chromedp.CSS(form+` select[name=provisionProject]`), "default"),
		chromedp.SetValue(chromedp.CSS(form+` select[name=provisionRole]`), "viewer"),
		chromedp.Click(chromedp.CSS(form+` button[type=submit]`)))
	row := `document.querySelector('tr[data-idp="` + issuer + `"]')`
	until(t, ctx, "the new entry", row+` !== null && `+row+`.textContent.includes('default (viewer)') && `+row+`.textContent.includes('client_abc')`)
	for _, size := range widths {
		run(t, ctx, chromedp.EmulateViewport(size.width, size.height), chromedp.Navigate(w.url("/admin")), chromedp.WaitVisible(chromedp.CSS(`[data-idps]`)))
		until(t, ctx, "the page without sideways scrolling", `document.documentElement.scrollWidth <= window.innerWidth`)
		until(t, ctx, "the whole entry, Remove included, on screen", `[...document.querySelectorAll('tr[data-idp] td, tr[data-idp] button')].every(e =>
			e.getBoundingClientRect().right <= window.innerWidth)`)
		screenshot(t, ctx, "admin-idps-"+size.name)
	}
	run(t, ctx, chromedp.EmulateViewport(1280, 860), chromedp.Navigate(w.url("/admin")), chromedp.WaitVisible(chromedp.CSS(`[data-idps]`)))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.confirm = () => true; true`)); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.Click(chromedp.CSS(`tr[data-idp] button.danger`)))
	until(t, ctx, "the empty list", `document.querySelector('[data-idps] td.empty') !== null`)
	es, err := w.st.Audit(context.Background(), store.AuditFilter{Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range es {
		if e.Target == issuer && e.Actor == "ada@example.com" {
			actions = append(actions, e.Action)
		}
	}
	if len(actions) != 2 {
		t.Errorf("audit entries for the issuer by ada = %v; want idp.add and idp.remove", actions)
	}
}
