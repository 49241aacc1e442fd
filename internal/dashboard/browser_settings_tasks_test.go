package dashboard_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// The Settings page's Running tasks per caller: shown at its default,
// saved, and a value the gateway refuses (the browser's own min/max
// checks taken off, as an old page or a hand-edited form would send it)
// shows the gateway's message under the form.
func TestBrowserMaxRunningTasks(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.signUp(ctx)
	run(t, ctx, chromedp.Navigate(w.url("/p/default/settings")))
	until(t, ctx, "the Settings page loaded", `document.readyState === 'complete'`)
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('input[name=maxRunningTasks]').value`))
	if err != nil || shown != "100" {
		t.Errorf("Running tasks per caller shows %q (%v), want the default 100", shown, err)
	}
	run(t, ctx, chromedp.SetValue(chromedp.CSS(`input[name=maxRunningTasks]`), "3"),
		chromedp.Click(chromedp.CSS(`form.settings button[type=submit]`)))
	until(t, ctx, "the saved toast", `!document.getElementById('toast').hidden`)
	if p, _ := w.st.Project(t.Context(), "default"); p.Settings.MaxRunningTasks != 3 {
		t.Fatalf("stored %d, want 3", p.Settings.MaxRunningTasks)
	}

	run(t, ctx, chromedp.Navigate(w.url("/p/default/settings")),
		chromedp.WaitVisible(chromedp.CSS(`input[name=maxRunningTasks]`)))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const i = document.querySelector('input[name=maxRunningTasks]'); i.removeAttribute('min'); i.removeAttribute('max'); i.value = '10001'; return true; })()`)); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.Click(chromedp.CSS(`form.settings button[type=submit]`)))
	const want = "maxRunningTasks: running tasks per caller are 1 to 10000, not 10001"
	until(t, ctx, "the gateway's refusal under the form", `(() => { const e = document.querySelector('form.settings [data-error]'); return e && !e.hidden && e.textContent.includes(`+"`"+want+"`"+`); })()`)
	if p, _ := w.st.Project(t.Context(), "default"); p.Settings.MaxRunningTasks != 3 {
		t.Errorf("stored %d after a refused save, want 3 still", p.Settings.MaxRunningTasks)
	}
}
