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

var _ = store.RoleOwner
