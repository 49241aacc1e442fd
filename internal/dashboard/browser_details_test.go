package dashboard_test

import (
	"strings"
	"testing"

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
