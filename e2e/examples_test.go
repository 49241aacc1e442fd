package e2e

import (
	"bytes"
	"context"
	"image/png"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/store"
)

// The seed guide's complete example, run as its own process.
func TestOrdersExample(t *testing.T) {
	t.Parallel()
	// A call wait of 1 s and a report of 2 s: sales_report, the slow tool,
	// answers with a job reference, as its 45 s do in real life.
	e := newEnv(t, func(o *envOptions) { o.settings = &store.ProjectSettings{CallWaitMs: 1000} })
	e.run("../examples/orders", "ORDERS_DB="+filepath.Join(t.TempDir(), "orders.db"), "ORDERS_REPORT_SECONDS=2")
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		if got := strings.Join(toolNames(t, cs), " "); got != "create_order get_order sales_report search_orders spacefix_job" {
			t.Fatalf("tools = %s", got)
		}
		// examples/orders-node declares the same (sdk/node/test/example.test.mjs
		// checks it): one service's two implementations must not differ.
		lt, err := cs.ListTools(context.Background(), nil)
		must(t, err)
		annotations := map[string]mcp.ToolAnnotations{}
		for _, tl := range lt.Tools {
			if tl.Annotations != nil {
				annotations[tl.Name] = *tl.Annotations
			}
		}
		no := false
		want := map[string]mcp.ToolAnnotations{"get_order": {ReadOnlyHint: true}, "search_orders": {ReadOnlyHint: true}, "create_order": {IdempotentHint: true},
			"sales_report": {ReadOnlyHint: true}, "spacefix_job": {Title: "Slow tool results", IdempotentHint: true, DestructiveHint: &no, OpenWorldHint: &no}}
		if diff := cmp.Diff(want, annotations); diff != "" {
			t.Errorf("annotations (-want +got):\n%s", diff)
		}
		if got := text(call(t, cs, "get_order", map[string]any{"id": "1042"})); !strings.Contains(got, `"customer":"ada"`) {
			t.Errorf("get_order 1042 = %s", got)
		}
		res := call(t, cs, "get_order", map[string]any{"id": "7"})
		if want := "no order with id 7: ask the user to confirm the id, or use search_orders"; !res.IsError || text(res) != want {
			t.Errorf("get_order 7 = %q", text(res))
		}
		res = call(t, cs, "search_orders", map[string]any{"customer": "ada", "limit": 51})
		if want := "Input validation error: Invalid arguments for tool search_orders: data/limit must be <= 50"; text(res) != want {
			t.Errorf("search_orders limit 51 = %q", text(res))
		}
		if got := text(call(t, cs, "search_orders", map[string]any{"customer": "ada", "status": "open"})); !strings.Contains(got, `"id":"1042"`) || strings.Contains(got, "1043") {
			t.Errorf("search_orders ada open = %s", got)
		}
		// create_order names requestId as its idempotency key: the gateway
		// answers the repeat with the first result, and refuses the id with
		// other arguments before the agent sees it.
		rid, buyer := "req-"+v, "buyer-"+v
		first := text(call(t, cs, "create_order", map[string]any{"requestId": rid, "customer": buyer, "total": 1200}))
		again := text(call(t, cs, "create_order", map[string]any{"requestId": rid, "customer": buyer, "total": 1200}))
		if first != again || !strings.Contains(first, `"total":1200`) {
			t.Errorf("create_order twice with one requestId: %s then %s; want the same order", first, again)
		}
		res = call(t, cs, "create_order", map[string]any{"requestId": rid, "customer": buyer, "total": 1300})
		if want := `requestId "` + rid + `" was already used for create_order with other arguments.`; !res.IsError || text(res) != want {
			t.Errorf("create_order with the requestId and another total = %q (isError %v), want %q", text(res), res.IsError, want)
		}
		if got := text(call(t, cs, "search_orders", map[string]any{"customer": buyer})); strings.Count(got, `"id":`) != 1 {
			t.Errorf("orders of %s after three create_order with one requestId = %s, want one", buyer, got)
		}
		rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "orders://open"})
		must(t, err)
		if !strings.Contains(rr.Contents[0].Text, `"id":"1042"`) {
			t.Errorf("orders://open = %s", rr.Contents[0].Text)
		}
		// The slow tool: a job reference at the wait (an isError result:
		// the tool returns a struct, so it has an output schema), then the
		// report through the gateway's job tool.
		id := structJobID(t, call(t, cs, "sales_report", map[string]any{}))
		var report string
		for deadline := time.Now().Add(20 * time.Second); report == "" && time.Now().Before(deadline); {
			r := call(t, cs, "spacefix_job", map[string]any{"jobId": id}) // waits up to the call wait itself
			if got := text(r); !strings.HasPrefix(got, "Job "+id+" (sales_report) is still running") {
				report = got
			} else if !strings.Contains(got, " months. Call spacefix_job") {
				t.Errorf("spacefix_job while running = %q, want its progress line", got)
			}
		}
		if !strings.Contains(report, `"orders":`) || !strings.Contains(report, `"byStatus":{`) {
			t.Errorf("sales_report through spacefix_job = %q, want the report", report)
		}
		gp, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "summarise_order", Arguments: map[string]string{"id": "1042"}})
		must(t, err)
		if txt := gp.Messages[0].Content.(*mcp.TextContent).Text; !strings.HasPrefix(txt, "Summarise this order politely, in two sentences:\n{") {
			t.Errorf("summarise_order = %q", txt)
		}
	})
}

func TestChartExample(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.run("../examples/chart")
	cs := e.connect("2025-11-25", e.clientKey, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {},
	})
	params := &mcp.CallToolParams{Name: "plot_bars", Arguments: map[string]any{"title": "Sales", "values": []float64{3, 1, 4, 1, 5}}}
	params.SetProgressToken("p")
	res, err := cs.CallTool(context.Background(), params)
	must(t, err)
	img, ok := res.Content[0].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" {
		t.Fatalf("plot_bars = %#v", res.Content)
	}
	if _, err := png.Decode(bytes.NewReader(img.Data)); err != nil {
		t.Errorf("the image is not a PNG: %v", err)
	}
	if text(res) != "Sales" {
		t.Errorf("caption = %q", text(res))
	}
}

// The identity example: its tool hands the call's identity token to its
// backend, which verifies it against the gateway's JWKS and says who is
// calling; a token for another audience it refuses.
func TestIdentityExample(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	setAudience(t, e, e.agentKeyID(), idAudience)
	e.run("../examples/identity", "IDENTITY_AUDIENCE="+idAudience)
	cs := e.connect("2026-07-28", e.clientKey, nil)
	got := text(call(t, cs, "whoami", map[string]any{}))
	if !strings.HasPrefix(got, "caller key:key_") || !strings.HasSuffix(got, ` in project `+e.project.Name+`, scopes "mcp:read mcp:write"`) {
		t.Errorf("whoami = %q", got)
	}
	setAudience(t, e, e.agentKeyID(), "https://elsewhere.example.com")
	const refused = "the backend refused the identity token: go-jose/go-jose/jwt: validation failed, invalid audience claim (aud)"
	waitFor(t, "the backend to refuse a token for another audience", func() bool {
		res := call(t, cs, "whoami", map[string]any{})
		return res.IsError && text(res) == refused
	})
}
