package dashboard_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserCreatedKeyListed: a client key made on the Keys page is in
// the Keys table at once, without a reload, and its secret stays on screen
// (a reload would lose it: it is shown once).
func TestBrowserCreatedKeyListed(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.signUp(ctx)

	run(t, ctx, chromedp.Navigate(w.url("/p/default/keys")), chromedp.WaitVisible(chromedp.CSS(`tbody[data-refresh=keys]`)))
	until(t, ctx, "the Keys page loaded", `document.readyState === 'complete'`)
	// A mark on the page: a reload would drop it.
	until(t, ctx, "a mark on the page", `(window.notReloaded = true)`)
	run(t, ctx,
		chromedp.SetValue(chromedp.CSS(`form[data-then=show-secret] input[name=name]`), "Ada's laptop"),
		chromedp.Click(chromedp.CSS(`form[data-then=show-secret] button[type=submit]`)),
	)
	until(t, ctx, "the new key in the Keys table",
		`[...document.querySelectorAll('tbody[data-refresh=keys] tr')].some(r => r.textContent.includes("Ada's laptop") && r.textContent.includes('Live'))`)
	until(t, ctx, "the page not reloaded, the secret still shown",
		`window.notReloaded === true && !document.querySelector('[data-reveal]').hidden && document.querySelector('[data-secret]').textContent.startsWith('sfx_client_')`)
	// The new row's Revoke button works as a served one does.
	until(t, ctx, "confirm answered yes", `(window.confirm = () => true, true)`)
	run(t, ctx, chromedp.Click(chromedp.CSS(`tbody[data-refresh=keys] tr:first-child button.danger`)))
	until(t, ctx, "a revoked key after Revoke",
		`[...document.querySelectorAll('tbody[data-refresh=keys] tr')].some(r => r.textContent.includes('Revoked'))`)
}
