package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/core/bridging"
	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/store"
)

// The widths every page is checked at: a laptop and a phone.
var widths = []struct {
	name          string
	width, height int64
}{{"1280", 1280, 860}, {"390", 390, 844}}

// bridgeTarget is a bridged server's command line as long as real ones get.
const bridgeTarget = "npx -y @modelcontextprotocol/server-filesystem@2025.7.1 /srv/shared/customer-uploads/2026/quarterly-reports " +
	"/srv/shared/customer-uploads/2026/invoices --read-only --max-file-size=10485760 --log-level=warning --exclude=**/node_modules/**"

// runAgent runs a core agent with opts (the gateway's URL filled in) until
// the test ends, and waits until its replica is connected.
func (w *gw) runAgent(opts core.Options, setup func(a *core.Agent) error) {
	w.t.Helper()
	w.runAgentFrom(core.New, opts, setup)
}

// runAgentFrom is runAgent with the agent made by newAgent.
func (w *gw) runAgentFrom(newAgent func(core.Options) (*core.Agent, error), opts core.Options, setup func(a *core.Agent) error) {
	w.t.Helper()
	opts.URL = w.g.URL()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := newAgent(opts)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := setup(a); err != nil {
		w.t.Fatal(err)
	}
	before := len(w.g.Registry().Replicas(w.project.ID))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	w.t.Cleanup(func() { cancel(); <-done })
	w.waitFor("agent to connect", func() bool { return len(w.g.Registry().Replicas(w.project.ID)) > before })
}

// agentKey makes another agent key in the project.
func (w *gw) agentKeyWith(k store.Key) string {
	w.t.Helper()
	k.ProjectID, k.Kind = w.project.ID, store.KindAgent
	_, secret, err := auth.CreateKey(context.Background(), w.st, k)
	if err != nil {
		w.t.Fatal(err)
	}
	return secret
}

// atSize is a project at real size: a bridged server with a long command
// line, two agents that share a display name, a long audit trail and calls.
func (w *gw) atSize(t *testing.T, ctx context.Context) {
	t.Helper()
	w.agent("eu-1", orderTools(getOrderV1))
	staging := w.agentKeyWith(store.Key{Name: "orders staging", KeyMeta: store.KeyMeta{DisplayName: "orders"}})
	w.runAgent(core.Options{APIKey: staging, Name: "orders", Instance: "staging-1"}, func(a *core.Agent) error {
		return core.AddTool(a, "refund_order", "Refund an order in the staging shop.",
			func(ctx context.Context, in orderIn) (string, error) { return "refunded", nil })
	})
	files := w.agentKeyWith(store.Key{Name: "files bridge"})
	bridged := func(opts core.Options) (*core.Agent, error) {
		return bridging.New(opts, bridging.Bridge{Transport: "stdio", Target: bridgeTarget, Server: "secure-filesystem-server", ServerVersion: "0.6.2"})
	}
	w.runAgentFrom(bridged, core.Options{APIKey: files, Name: "files", Version: "0.6.2"},
		func(a *core.Agent) error {
			return core.AddTool(a, "files__read_text_file", "Read a text file under the allowed directories.",
				func(ctx context.Context, in orderIn) (string, error) { return "text", nil }, core.ReadOnly())
		})
	cs := w.mcpClient()
	for _, id := range []string{"1042", "9"} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_order", Arguments: map[string]any{"id": id}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.g.CallLog().Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// editDescription changes a tool's description through the admin API, as
// the browser's session, so that the audit log has a long entry.
func editDescription(t *testing.T, ctx context.Context, tool, desc string) {
	t.Helper()
	expr := fmt.Sprintf(`fetch('/api/projects/default/tools/%s', {method: 'PATCH', headers: {'Content-Type': 'application/json'},
		body: JSON.stringify({description: %q})}).then(r => r.status)`, tool, desc)
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](expr, chromedp.EvalAwaitPromise))
	if err != nil || status != 200 {
		t.Fatalf("PATCH %s = %d, %v", tool, status, err)
	}
}

// sizeShot writes a screenshot to SPACEFIX_SIZE_SHOTS (a directory), for
// looking at the pages at each width.
func sizeShot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("SPACEFIX_SIZE_SHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserPagesFit opens every page of a project at real size at 1280
// and 390 px: no page scrolls sideways, the long values wrap inside their
// cards, and times say their zone.
func TestBrowserPagesFit(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.signUp(ctx)
	w.atSize(t, ctx)
	long := "Look up one order by its id. " + strings.Repeat("Returns the order with its lines, totals, payments and shipments. ", 12) +
		"See https://docs.example.com/shop/api/v2/orders/lookup?include=lines,payments,shipments,returns,notes&format=full"
	editDescription(t, ctx, "get_order", long)
	editDescription(t, ctx, "search_orders", "List orders for a customer.")

	pages := []struct{ name, path, ready string }{
		{"projects", "/", `.card.project`},
		{"overview", "/p/default", `[data-snippet]`},
		{"tools", "/p/default/tools", `tr[data-tool=get_order]`},
		{"agents", "/p/default/agents", `tr[data-replica]`},
		{"keys", "/p/default/keys", `table`},
		{"logs", "/p/default/logs", `tbody[data-log-rows] tr`},
		{"usage", "/p/default/usage", `svg.chart`},
		{"settings", "/p/default/settings", `form.settings`},
		{"members", "/p/default/members", `table`},
		{"policy", "/p/default/policy", `#policy-doc`},
		{"audit", "/p/default/audit", `tr[data-audit]`},
		{"admin", "/admin", `table`},
		{"agent", "/p/default/agents/" + w.firstAgentKey(), `.card`},
		{"me", "/me", `[data-accounts]`},
	}
	for _, size := range widths {
		run(t, ctx, chromedp.EmulateViewport(size.width, size.height))
		for _, p := range pages {
			run(t, ctx, chromedp.Navigate(w.url(p.path)), chromedp.WaitVisible(chromedp.CSS(p.ready)))
			sizeShot(t, ctx, p.name+"-"+size.name)
			wide, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
				const d = document.documentElement;
				if (d.scrollWidth <= window.innerWidth) return "";
				const out = [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
					.slice(-3).map(e => e.tagName.toLowerCase() + (e.className ? '.' + e.className : '') + ' ' + Math.round(e.getBoundingClientRect().right));
				return d.scrollWidth + " > " + window.innerWidth + ": " + out.join(", ");
			})()`))
			if err != nil {
				t.Fatal(err)
			}
			if wide != "" {
				t.Errorf("%s at %s px scrolls sideways: %s", p.name, size.name, wide)
			}
		}
	}
	run(t, ctx, chromedp.EmulateViewport(1280, 860))

	// The bridged replica's whole command line is on the page, and its
	// Disable button inside the card.
	run(t, ctx, chromedp.Navigate(w.url("/p/default/agents")), chromedp.WaitVisible(chromedp.CSS(`tr[data-replica]`)))
	until(t, ctx, "the whole command line", fmt.Sprintf(`document.querySelector('.bridged').textContent.includes(%q)`, bridgeTarget))
	until(t, ctx, "Disable buttons inside the card", `[...document.querySelectorAll('tr[data-replica] button')].every(b =>
		b.getBoundingClientRect().right <= b.closest('.card').getBoundingClientRect().right)`)

	// Times carry their zone; the audit's When stays on one line.
	for _, path := range []string{"/p/default/logs", "/p/default/agents", "/p/default/audit"} {
		run(t, ctx, chromedp.Navigate(w.url(path)), chromedp.WaitVisible(chromedp.CSS(`time`)))
		until(t, ctx, "times on "+path+" with a zone", `[...document.querySelectorAll('time')].every(e => /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+$/.test(e.textContent))`)
	}
	until(t, ctx, "one line per When", `[...document.querySelectorAll('tr[data-audit] td:first-child time')].every(t => t.getBoundingClientRect().height < 24)`)
}

// firstAgentKey is the ID of the project's first agent key.
func (w *gw) firstAgentKey() string {
	w.t.Helper()
	ks, err := w.st.Keys(context.Background(), w.project.ID)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, k := range ks {
		if k.Kind == store.KindAgent {
			return k.ID
		}
	}
	w.t.Fatal("no agent key")
	return ""
}

// thousandTools registers n tools from one agent key with the label and
// display name given.
func (w *gw) manyTools(label, display string, from, n int) {
	w.t.Helper()
	key := w.agentKeyWith(store.Key{Name: label, KeyMeta: store.KeyMeta{DisplayName: display}})
	w.runAgent(core.Options{APIKey: key, Name: "orders", Instance: label}, func(a *core.Agent) error {
		for i := from; i < from+n; i++ {
			desc := fmt.Sprintf("Report %d: %s for one shop, by day.", i, []string{"refunds", "orders", "payments", "returns", "stock"}[i%5])
			if err := core.AddTool(a, fmt.Sprintf("report_%04d", i), desc,
				func(ctx context.Context, in orderIn) (string, error) { return "ok", nil }, core.ReadOnly()); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestBrowserThousandTools: the Tools page with 1,000 tools from two
// agents that share a display name. It shows the first 100 and a count,
// filters by name, description and agent key, pages on with "Show more",
// groups by agent, and tells the two agents apart by their keys' labels.
// It logs how long the page takes to be usable and to filter
// (docs/benchmarks.md).
func TestBrowserThousandTools(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	s := w.project.Settings
	s.MaxTools = 2000
	if err := w.st.UpdateProjectSettings(t.Context(), w.project.ID, s); err != nil {
		t.Fatal(err)
	}
	w.manyTools("orders eu", "orders", 0, 600)
	w.manyTools("orders us", "orders", 600, 400)
	w.waitFor("1,000 tools", func() bool { return len(w.g.Registry().Snapshot(w.project.ID).ToolList) == 1000 })
	w.signUp(ctx)
	run(t, ctx, chromedp.EmulateViewport(1280, 860))

	var loads []float64
	for range 3 {
		run(t, ctx, chromedp.Navigate(w.url("/p/default/tools")), chromedp.WaitVisible(chromedp.CSS(`[data-tool-filter]`)))
		ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd`))
		if err != nil {
			t.Fatal(err)
		}
		detail, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const n = performance.getEntriesByType('navigation')[0];
			return 'request ' + Math.round(n.requestStart) + ' first byte ' + Math.round(n.responseStart) + ' last byte ' + Math.round(n.responseEnd) + ' bytes ' + n.transferSize; })()`))
		t.Log(detail)
		loads = append(loads, ms)
	}
	sizeShot(t, ctx, "tools-1000-1280")
	count := func() string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-tool-count]').textContent + ' | ' +
			document.querySelectorAll('tr[data-tool]:not([hidden])').length`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got, want := count(), "Showing 100 of 1,000 tools. | 100"; got != want {
		t.Errorf("the Tools page with 1,000 tools says %q; want %q", got, want)
	}
	filter := func(q string) float64 {
		t.Helper()
		ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](fmt.Sprintf(`(() => {
			const box = document.querySelector('[data-tool-filter]');
			const t0 = performance.now();
			box.value = %q;
			box.dispatchEvent(new Event('input', {bubbles: true}));
			document.body.offsetHeight; // the layout, too
			return performance.now() - t0;
		})()`, q)))
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	var filters []float64
	for _, c := range []struct{ q, want string }{
		{"report_07", "100 tools of 1,000 match. | 100"},              // by name
		{"refunds", "200 tools of 1,000 match; showing 100. | 100"},   // by description
		{"orders us", "400 tools of 1,000 match; showing 100. | 100"}, // by the key's label
		{"no such tool", "0 tools of 1,000 match. | 0"},
		{"", "Showing 100 of 1,000 tools. | 100"},
	} {
		filters = append(filters, filter(c.q))
		if got := count(); got != c.want {
			t.Errorf("filter %q: the page says %q; want %q", c.q, got, c.want)
		}
	}
	run(t, ctx, chromedp.Click(chromedp.CSS(`[data-show-more]`)))
	if got, want := count(), "Showing 200 of 1,000 tools. | 200"; got != want {
		t.Errorf("after Show more: %q; want %q", got, want)
	}
	t.Logf("Tools page with 1,000 tools: usable (DOMContentLoaded) after %.0f ms (3 loads: %.0f); filter %.1f ms per keystroke (%.1f)",
		median(loads), loads, median(filters), filters)

	// By agent: one heading per agent key, each naming its key's label.
	run(t, ctx, chromedp.SetValue(chromedp.CSS(`select[name=sort]`), "agent")) // a change submits the form
	until(t, ctx, "the page sorted by agent", `location.search === '?sort=agent' && document.readyState === 'complete'`)
	heads, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('tr[data-group-head]')].map(h => h.hidden ? '(hidden) ' + h.textContent : h.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"orders · key orders eu", "(hidden) orders · key orders us"}; fmt.Sprint(heads) != fmt.Sprint(want) {
		t.Errorf("agent headings = %q; want %q", heads, want)
	}
	filter("orders us")
	until(t, ctx, "the other agent's heading", `[...document.querySelectorAll('tr[data-group-head]:not([hidden])')].map(h => h.textContent).join() === 'orders · key orders us'`)
	until(t, ctx, "rows naming the key", `document.querySelector('tr[data-tool]:not([hidden]) [data-agent]').textContent === 'orders · key orders us · 1 replica'`)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
