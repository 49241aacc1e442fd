package dashboard_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/dashboard"
	"github.com/spacefix/spacefix/internal/quickstart"
)

// What a newcomer saw in the first hour: the Usage chart's y-axis, the
// Logs' key column, the Tools table's headings.
func TestBrowserFirstHourPages(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.agent("", orderTools(getOrderV1))
	w.signUp(ctx)

	// The Overview shows the Inspector lines serve prints, the call with its
	// id quoted as a JSON string.
	run(t, ctx, chromedp.Navigate(w.url("/p/default")), chromedp.WaitVisible(chromedp.CSS(`[data-snippet]`)))
	snippets, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-snippet]')].map(p => p.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	auth := "Bearer YOUR_CLIENT_KEY"
	for _, want := range []string{quickstart.InspectorList(w.url("/mcp"), auth), quickstart.InspectorCall(w.url("/mcp"), auth)} {
		if !slices.Contains(snippets, want) {
			t.Errorf("the Overview lacks the snippet\n  %s\nit has:\n  %s", want, strings.Join(snippets, "\n  "))
		}
	}

	// Seven calls today: the y-axis goes 0, 2, 4, 6, 8 and the bar of 7
	// ends between the lines labelled 6 and 8.
	cs := w.mcpClient()
	for i := range 7 {
		if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_order", Arguments: map[string]any{"id": "1042"}}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if err := w.g.CallLog().Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.Navigate(w.url("/p/default/usage")), chromedp.WaitVisible(chromedp.CSS(`svg.chart rect`)))
	labels, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`[...document.querySelectorAll('svg.chart text[text-anchor=end]')].map(t => t.textContent).join(' ')`))
	if err != nil {
		t.Fatal(err)
	}
	if labels != "0 2 4 6 8" {
		t.Errorf("the usage chart's y-axis reads %q, want %q", labels, "0 2 4 6 8")
	}

	// Logs name the client key by its label, in the table and the filter,
	// and so does a row the live tail adds.
	run(t, ctx, chromedp.Navigate(w.url("/p/default/logs")), chromedp.WaitVisible(chromedp.CSS(`tbody[data-log-rows] tr`)))
	until(t, ctx, "the key's label in the first row",
		`document.querySelector('tbody[data-log-rows] tr td:nth-child(4)').textContent.trim() === 'first client key'`)
	until(t, ctx, "the key's label in the filter",
		`[...document.querySelectorAll('select[name=key] option')].some(o => o.textContent === 'first client key' && o.value.startsWith('key_'))`)
	until(t, ctx, "the live tail to connect", liveTailOpen)
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_order", Arguments: map[string]any{"id": "1042"}}); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, "the live row with the key's label",
		`(r => r !== null && r.querySelector('td:nth-child(4)').textContent === 'first client key')(document.querySelector('tbody[data-log-rows] tr.new'))`)
	// The live rows write a duration as the page's own rows do.
	until(t, ctx, "app.js to write 45017.6 ms as 45.0 s",
		`callDuration(45017.6) === '45.0 s' && callDuration(12.34) === '12.3 ms'`)

	// Every column of the Tools table with content has a heading.
	run(t, ctx, chromedp.Navigate(w.url("/p/default/tools")), chromedp.WaitVisible(chromedp.CSS(`tr[data-tool=get_order]`)))
	heads, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`[...document.querySelectorAll('table thead th')].map(h => h.textContent).join('|')`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Tool|Description models see|Counts as|State|"; heads != want {
		t.Errorf("the Tools table's headings are %q, want %q (the pills column is State)", heads, want)
	}
}

// "Keep me signed in" survives a browser restart and lasts 30 days; a plain
// sign-in is a browser-session cookie and ends with the browser.
func TestBrowserFirstHourKeepSignedIn(t *testing.T) {
	path := chromium(t)
	w := startGateway(t)
	profile := t.TempDir()
	ctx := browserProfile(t, path, profile)
	w.signUp(ctx)

	for _, keep := range []bool{false, true} {
		// Sign out and in again through the sign-in page.
		run(t, ctx, chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)), chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)))
		steps := []chromedp.Action[chromedp.Void]{
			chromedp.SetValue(chromedp.CSS(`input[name=email]`), "ada@example.com"),
			chromedp.SetValue(chromedp.CSS(`input[name=password]`), "correct horse battery"),
		}
		if keep {
			steps = append(steps, chromedp.Click(chromedp.CSS(`input[name=keep]`)))
		}
		steps = append(steps, chromedp.Click(chromedp.CSS(`button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`.cards .card.project`)))
		run(t, ctx, steps...)

		cookie := sessionCookie(t, ctx, w.url("/"))
		switch {
		case !keep && !cookie.Session:
			t.Errorf("a plain sign-in set a cookie that outlives the browser (expires %v)", time.Unix(int64(cookie.Expires), 0))
		case keep && cookie.Session:
			t.Errorf("\"keep me signed in\" set a browser-session cookie")
		case keep:
			if left := time.Until(time.Unix(int64(cookie.Expires), 0)); left < 29*24*time.Hour || left > 30*24*time.Hour+time.Minute {
				t.Errorf("\"keep me signed in\" lasts %v, want 30 days", left.Round(time.Hour))
			}
		}

		// Restart the browser on the same profile.
		if err := chromedp.Cancel(ctx); err != nil {
			t.Fatalf("close the browser: %v", err)
		}
		ctx = browserProfile(t, path, profile)
		run(t, ctx, chromedp.Navigate(w.url("/")))
		until(t, ctx, "the page after the restart", `document.querySelector('.cards .card.project, input[name=password]') !== null`)
		signedIn, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('.cards .card.project') !== null`))
		if err != nil {
			t.Fatal(err)
		}
		if signedIn != keep {
			t.Errorf("keep me signed in %v: after a browser restart signed in = %v, want %v", keep, signedIn, keep)
		}
		if !signedIn {
			// Sign in plainly to reach the sign-out button again.
			run(t, ctx,
				chromedp.SetValue(chromedp.CSS(`input[name=email]`), "ada@example.com"),
				chromedp.SetValue(chromedp.CSS(`input[name=password]`), "correct horse battery"),
				chromedp.Click(chromedp.CSS(`button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`.cards .card.project`)))
		}
	}
}

// browserProfile starts a headless Chromium on a given profile directory,
// so a test can restart the browser and keep what it stored.
func browserProfile(t *testing.T, path, profile string) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(profile))
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// sessionCookie returns the browser's dashboard session cookie.
func sessionCookie(t *testing.T, ctx context.Context, url string) *network.Cookie {
	t.Helper()
	res, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Cookies {
		if c.Name == dashboard.SessionCookieName(url) {
			return c
		}
	}
	t.Fatalf("no %s cookie for %s", dashboard.SessionCookieName(url), url)
	return nil
}
