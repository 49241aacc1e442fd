package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/spacefix/spacefix/internal/store"
)

// signIn signs the browser in as a person with the tests' password.
func (e *env) signIn(t *testing.T, ctx context.Context, email string) {
	t.Helper()
	run(t, ctx,
		chromedp.Navigate(e.srv.URL+"/login"),
		chromedp.SetValue(chromedp.CSS(`input[name=email]`), email),
		chromedp.SetValue(chromedp.CSS(`input[name=password]`), "correct horse battery"),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.cards`)),
	)
}

// sideways is a JS expression: "" when the page does not scroll sideways,
// else what sticks out.
const sideways = `(() => {
	const d = document.documentElement;
	if (d.scrollWidth <= window.innerWidth) return "";
	const out = [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
		.slice(-3).map(e => e.tagName.toLowerCase() + (e.className ? '.' + e.className : '') + ' ' + Math.round(e.getBoundingClientRect().right));
	return d.scrollWidth + " > " + window.innerWidth + ": " + out.join(", ");
})()`

// TestBrowserConnectedAccounts: the agent's page lists the one connected
// account (its person, when it was connected and when it expires) at 1280
// and 390 px without scrolling sideways; Disconnect takes it away, and the
// person's own page then offers Connect; there too Disconnect takes an
// account away.
func TestBrowserConnectedAccounts(t *testing.T) {
	ctx := browser(t)
	e, f := upstreamEnv(t)
	admin := e.admin()
	e.signIn(t, ctx, "ada@example.com")
	shots := t.TempDir()
	if dir := os.Getenv("SPACEFIX_SIZE_SHOTS"); dir != "" {
		shots = dir
	}
	page := e.srv.URL + "/p/shop/agents/" + e.agentKey.ID
	for _, size := range widths {
		ada := e.put(f, "ada@example.com", "at-ada-secret")
		run(t, ctx, chromedp.EmulateViewport(size.width, size.height),
			chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`[data-accounts] tr[data-account]`)))
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-accounts] tr[data-account]')].map(r => r.innerText.replace(/\s+/g, ' ').trim())`))
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 {
			t.Fatalf("at %s px the Connected accounts list = %q; want one account", size.name, rows)
		}
		for _, want := range []string{"ada@example.com", fmt.Sprintf("as person-%d at mcp.example.test", ada), "UTC", "Disconnect"} {
			until(t, ctx, "the row to say "+want, fmt.Sprintf(`document.querySelector('[data-accounts] tr[data-account]').innerText.includes(%q)`, want))
		}
		wide, err := chromedp.Run(ctx, chromedp.Evaluate[string](sideways))
		if err != nil {
			t.Fatal(err)
		}
		if wide != "" {
			t.Errorf("the agent page at %s px scrolls sideways: %s", size.name, wide)
		}
		until(t, ctx, "Disconnect inside the card", `(() => { const b = document.querySelector('[data-accounts] button.danger');
			return b.getBoundingClientRect().right <= b.closest('.card').getBoundingClientRect().right && b.getBoundingClientRect().right <= window.innerWidth; })()`)
		shot(t, ctx, filepath.Join(shots, "connected-accounts-"+size.name+".png"))
		if size.name == "1280" {
			screenshot(t, ctx, "connected-accounts")
		}

		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.confirm = () => true; true`)); err != nil {
			t.Fatal(err)
		}
		run(t, ctx, chromedp.Click(chromedp.CSS(`[data-accounts] button.danger`)))
		until(t, ctx, "the account gone", `document.readyState === 'complete' && !document.querySelector('[data-accounts] tr[data-account]') &&
			document.querySelector('[data-no-accounts]').innerText === 'No one has connected an account yet.'`)
		if as, err := e.st.UpstreamAccounts(t.Context(), store.UpstreamFilter{AgentKeyID: e.agentKey.ID}); err != nil || len(as) != 0 {
			t.Fatalf("accounts stored after Disconnect at %s px = %d, %v; want none", size.name, len(as), err)
		}
		until(t, ctx, "Connect offered", `document.querySelector('a[data-connect]').innerText === 'Connect your mcp.example.test account'`)

		// The person's own page: the agent, not connected, with Connect.
		run(t, ctx, chromedp.Navigate(e.srv.URL+"/me"), chromedp.WaitVisible(chromedp.CSS(`[data-accounts] tr[data-account]`)))
		until(t, ctx, "Connect on Your accounts", fmt.Sprintf(`document.querySelector('tr[data-account] a[data-connect]').getAttribute('href') === '/connect/%s?return=/me' &&
			document.querySelector('tr[data-account]').innerText.includes('Not connected')`, e.agentKey.ID))
		// Your name: typed, saved, there after a reload and in the store.
		name := "Ada Lovelace (" + size.name + ")"
		run(t, ctx, chromedp.SetValue(chromedp.CSS(`[data-your-name] input[name=name]`), name),
			chromedp.Click(chromedp.CSS(`[data-your-name] button[type=submit]`)))
		until(t, ctx, "the name saved", `document.getElementById('toast').textContent === 'Saved. Agents see your new name within a minute.'`)
		run(t, ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-your-name] input[name=name]`)))
		until(t, ctx, "the name after a reload", fmt.Sprintf(`document.querySelector('[data-your-name] input[name=name]').value === %q`, name))
		if u, _, err := e.st.UserByEmail(t.Context(), "ada@example.com"); err != nil || u.Name != name {
			t.Errorf("the name in the store at %s px = %q, %v; want %q", size.name, u.Name, err, name)
		}
		if wide, err := chromedp.Run(ctx, chromedp.Evaluate[string](sideways)); err != nil || wide != "" {
			t.Errorf("Your accounts at %s px scrolls sideways: %s %v", size.name, wide, err)
		}
		shot(t, ctx, filepath.Join(shots, "your-accounts-"+size.name+".png"))

		// Connected again, it is listed there with Disconnect, which takes
		// it away and offers Connect again.
		e.put(f, "ada@example.com", "at-ada-secret")
		run(t, ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`tr[data-account] button.danger`)))
		until(t, ctx, "the account on Your accounts", `document.querySelector('tr[data-account]').innerText.includes('mcp.example.test') && !document.querySelector('a[data-connect]')`)
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.confirm = () => true; true`)); err != nil {
			t.Fatal(err)
		}
		run(t, ctx, chromedp.Click(chromedp.CSS(`tr[data-account] button.danger`)))
		until(t, ctx, "Connect again on Your accounts", `document.readyState === 'complete' && !!document.querySelector('tr[data-account] a[data-connect]')`)
	}
	var audit auditPage
	admin.mustCall(http.StatusOK, "GET", "/api/projects/shop/audit?action=upstream.disconnect", nil, &audit)
	if len(audit.Entries) != 2*len(widths) || audit.Entries[0].Actor != "ada@example.com" {
		t.Errorf("upstream.disconnect entries = %+v; want two by ada per width", audit.Entries)
	}
}

// shot writes the whole page to a file.
func shot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
