package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/store"
)

// TestBrowserPages opens every page of a lived-in project in the browser,
// checks what each must show, and (with SPACEFIX_SCREENSHOTS=1) writes the
// screenshots in docs/screenshots.
func TestBrowserPages(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.agent("eu-1", orderTools(getOrderV1))
	w.agent("us-1", orderTools(getOrderV1))
	w.liveIn(t)

	run(t, ctx, chromedp.Navigate(w.url("/login")), chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)))
	screenshot(t, ctx, "login")
	w.signUp(ctx)

	pages := []struct{ name, path, ready string }{
		{"projects", "/", `.card.project`},
		{"overview", "/p/default", `[data-snippet]`},
		{"tools", "/p/default/tools", `tr[data-tool=get_order]`},
		{"agents", "/p/default/agents", `tr[data-replica]`},
		{"keys", "/p/default/keys", `table`},
		{"logs", "/p/default/logs", `tbody[data-log-rows] tr`},
		{"usage", "/p/default/usage", `svg.chart rect`},
		{"settings", "/p/default/settings", `form.settings`},
		{"admin", "/admin", `table`},
	}
	for _, p := range pages {
		run(t, ctx, chromedp.Navigate(w.url(p.path)), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		if p.name == "logs" {
			screenshotView(t, ctx, p.name)
			continue
		}
		screenshot(t, ctx, p.name)
	}

	// The Edit dialog, open.
	run(t, ctx, chromedp.Navigate(w.url("/p/default/tools")),
		chromedp.Click(chromedp.CSS(`tr[data-tool=search_orders] button[data-edit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#edit-tool`)))
	screenshot(t, ctx, "tools-edit")

	// A key made on the overview page fills the snippets.
	run(t, ctx, chromedp.Navigate(w.url("/p/default")), chromedp.Click(chromedp.CSS(`button[data-fill-key]`)))
	until(t, ctx, "the key in the snippets", `document.querySelector('[data-snippet]').textContent.includes('sfx_client_')`)

	// The live tail shows a call made after the page opened.
	run(t, ctx, chromedp.Navigate(w.url("/p/default/logs")), chromedp.WaitVisible(chromedp.CSS(`tbody[data-log-rows]`)))
	until(t, ctx, "the live tail to connect", liveTailOpen)
	cs := w.mcpClient()
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_order", Arguments: map[string]any{"id": "1042"}}); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, "the live row", `document.querySelector('tbody[data-log-rows] tr.new') !== null`)
}

// liveIn gives the project what makes its pages worth a look: calls through
// a real MCP client, older usage, tool settings, agent key metadata and
// client keys.
func (w *gw) liveIn(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	cs := w.mcpClient()
	for i, args := range []map[string]any{{"id": "1042"}, {"id": "1042"}, {"id": "9"}} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_order", Arguments: args}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_orders", Arguments: map[string]any{"customer": "ada"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.g.CallLog().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var past []store.Call
	now := time.Now().UTC()
	for day := 1; day < 14; day++ {
		for i := range 5 + (day*7)%11 {
			name := []string{"get_order", "search_orders", "create_order"}[i%3]
			past = append(past, store.Call{Time: now.AddDate(0, 0, -day), ProjectID: w.project.ID, Kind: "tool", Name: name,
				KeyID: "key_ci", Outcome: store.OutcomeOK, Duration: time.Duration(i+3) * time.Millisecond, Billable: true})
		}
	}
	if err := w.st.AppendCalls(ctx, past); err != nil {
		t.Fatal(err)
	}
	for _, s := range []store.ToolSettings{
		{ProjectID: w.project.ID, Tool: "search_orders", CacheSeconds: 30, Access: store.AccessRead},
		{ProjectID: w.project.ID, Tool: "create_order", Disabled: true},
		{ProjectID: w.project.ID, Tool: "cancel_order", Description: "Cancel an open order.", Access: store.AccessWrite},
	} {
		if _, err := w.st.SaveToolSettings(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	keys, _ := w.st.Keys(ctx, w.project.ID)
	for _, k := range keys {
		if k.Kind == store.KindAgent {
			w.st.SetKeyMeta(ctx, k.ID, store.KeyMeta{DisplayName: "Orders", Author: "Shop team"})
		}
	}
	newClientKey(t, w.st, w.project, store.Key{Name: "support bot", ReadOnly: true})
	newClientKey(t, w.st, w.project, store.Key{Name: "CI", Tools: []string{"get_order", "search_orders"}})
}
