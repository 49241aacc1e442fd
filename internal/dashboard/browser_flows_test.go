package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/store"
)

// editTool opens a tool's Edit dialog, lets fill change it, and saves.
func editTool(t *testing.T, ctx context.Context, tool string, fill ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	// The last save reloads the page: click on the new one, fully loaded,
	// not on nodes of the one going away.
	until(t, ctx, "the Tools page loaded", `document.readyState === 'complete' && document.querySelector('tr[data-tool="`+tool+`"] button[data-edit]') !== null`)
	steps := []chromedp.Action[chromedp.Void]{
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-tool=%q] button[data-edit]`, tool))),
		chromedp.WaitVisible(chromedp.CSS(`#edit-tool`)),
	}
	steps = append(steps, fill...)
	steps = append(steps, chromedp.Click(chromedp.CSS(`#edit-tool button[type=submit]`)))
	run(t, ctx, steps...)
}

func TestBrowserEditTool(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.agent("", orderTools(getOrderV1))
	w.signUp(ctx)

	run(t, ctx, chromedp.Navigate(w.url("/p/default/tools")), chromedp.WaitVisible(chromedp.CSS(`tr[data-tool=get_order]`)))
	editTool(t, ctx, "get_order",
		chromedp.SetValue(chromedp.CSS(`#edit-tool textarea[name=description]`), "Find one order by its id."),
		chromedp.SetValue(chromedp.CSS(`#edit-tool input[name=cacheSeconds]`), "30"),
		chromedp.SetValue(chromedp.CSS(`#edit-tool select[name=access]`), "write"),
	)
	until(t, ctx, "the Edited, Cached 30s and Treated as write pills",
		rowHasPill("get_order", "Edited")+" && "+rowHasPill("get_order", "Cached 30s")+" && "+rowHasPill("get_order", "Treated as write"))
	got, err := w.st.ToolSettings(t.Context(), w.project.ID)
	if err != nil || len(got) != 1 {
		t.Fatalf("saved settings = %+v, %v", got, err)
	}
	want := store.ToolSettings{ProjectID: w.project.ID, Tool: "get_order", Description: "Find one order by its id.", CacheSeconds: 30, Access: store.AccessWrite}
	want.UpdatedAt = got[0].UpdatedAt
	if got[0] != want {
		t.Errorf("saved settings = %+v, want %+v", got[0], want)
	}

	// Disabling dims the row.
	editTool(t, ctx, "search_orders", chromedp.Click(chromedp.CSS(`#edit-tool input[name=disabled]`)))
	until(t, ctx, "search_orders dimmed and Disabled",
		`document.querySelector('tr[data-tool=search_orders]').classList.contains('dim') && `+rowHasPill("search_orders", "Disabled"))

	// A bad value is refused in the dialog, with the API's words.
	run(t, ctx,
		chromedp.Click(chromedp.CSS(`tr[data-tool=create_order] button[data-edit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#edit-tool`)),
		chromedp.SetJavascriptAttribute(chromedp.CSS(`#edit-tool input[name=cacheSeconds]`), "max", "99999"),
		chromedp.SetValue(chromedp.CSS(`#edit-tool input[name=cacheSeconds]`), "4000"),
		chromedp.Click(chromedp.CSS(`#edit-tool button[type=submit]`)),
	)
	until(t, ctx, "the error in the dialog", `(document.querySelector('#edit-tool [data-error]').textContent || '').includes('0 (off) to 3600')`)
}

// TestBrowserEditReachesMCPClient edits and disables tools in the browser
// and watches a real MCP client's tools/list follow.
func TestBrowserEditReachesMCPClient(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.agent("", orderTools(getOrderV1))
	cs := w.mcpClient()
	w.signUp(ctx)
	run(t, ctx, chromedp.Navigate(w.url("/p/default/tools")), chromedp.WaitVisible(chromedp.CSS(`tr[data-tool=get_order]`)))
	editTool(t, ctx, "get_order", chromedp.SetValue(chromedp.CSS(`#edit-tool textarea[name=description]`), "Find one order by its id."))
	until(t, ctx, "the Edited pill", rowHasPill("get_order", "Edited"))
	editTool(t, ctx, "create_order", chromedp.Click(chromedp.CSS(`#edit-tool input[name=disabled]`)))
	until(t, ctx, "the Disabled pill", rowHasPill("create_order", "Disabled"))

	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, tl := range res.Tools {
		seen[tl.Name] = tl.Description
	}
	if seen["get_order"] != "Find one order by its id." {
		t.Errorf("tools/list description of get_order = %q, want the dashboard's", seen["get_order"])
	}
	if _, ok := seen["create_order"]; ok {
		t.Error("tools/list still lists the disabled create_order")
	}
	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "create_order", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "Tool create_order not found") {
		t.Errorf("calling a disabled tool: %v, want Tool create_order not found", err)
	}
}

func TestBrowserReplicaDisable(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.agent("eu-1", orderTools(getOrderV1))
	w.agent("us-1", orderTools(getOrderV1))
	w.signUp(ctx)
	reps := w.g.Registry().Replicas(w.project.ID)
	target := reps[0]

	run(t, ctx, chromedp.Navigate(w.url("/p/default/agents")),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-replica=%q] button`, target.ID))))
	until(t, ctx, "the replica shown disabled",
		fmt.Sprintf(`[...document.querySelectorAll('tr[data-replica=%q] .pill')].some(p => p.textContent === 'Disabled')`, target.ID))
	if !target.Disabled() || reps[1].Disabled() {
		t.Fatalf("after the click: %s disabled %v, %s disabled %v; want only the first", target.ID, target.Disabled(), reps[1].ID, reps[1].Disabled())
	}
	for _, tl := range w.g.Registry().Snapshot(w.project.ID).ToolList {
		for _, r := range tl.Replicas {
			if r == target {
				t.Errorf("tool %s is still served by the disabled replica", tl.Name)
			}
		}
	}
	run(t, ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-replica=%q] button`, target.ID))))
	until(t, ctx, "the replica enabled again",
		fmt.Sprintf(`[...document.querySelectorAll('tr[data-replica=%q] .pill')].some(p => p.textContent === 'Taking calls')`, target.ID))
	if target.Disabled() {
		t.Error("replica still disabled after Enable")
	}
}

func TestBrowserApproveChangedTool(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	stopV1 := w.agent("", orderTools(getOrderV1))
	w.signUp(ctx)

	run(t, ctx, chromedp.Navigate(w.url("/p/default/settings")),
		chromedp.Click(chromedp.CSS(`input[name=approveToolChanges]`)),
		chromedp.Click(chromedp.CSS(`form.settings button[type=submit]`)))
	until(t, ctx, "the saved toast", `!document.getElementById('toast').hidden`)
	if p, _ := w.st.Project(t.Context(), "default"); !p.Settings.ApproveToolChanges {
		t.Fatal("Approve tool changes not saved")
	}
	if as, _ := w.st.Approvals(t.Context(), w.project.ID); len(as) != 3 {
		t.Fatalf("approvals after switching consent on = %d, want the 3 registered tools approved", len(as))
	}

	// The agent redeploys with a changed description.
	const v2 = "Look up one order by its id, with its lines and totals."
	w.agent("", orderTools(v2))
	stopV1()
	w.waitFor("the new definition", func() bool {
		tl := w.g.Registry().Snapshot(w.project.ID).Tools["get_order"]
		return tl != nil && tl.Def.Description == v2
	})
	run(t, ctx, chromedp.Navigate(w.url("/p/default/tools")))
	until(t, ctx, "the Pending pill", rowHasPill("get_order", "Pending"))
	run(t, ctx, chromedp.Click(chromedp.CSS(`tr[data-tool=get_order] details summary`)))
	screenshot(t, ctx, "tools-pending")
	run(t, ctx, chromedp.Click(chromedp.CSS(`tr[data-tool=get_order] button.primary`)))
	until(t, ctx, "Pending gone", `document.querySelector('tr[data-tool=get_order]') && !(`+rowHasPill("get_order", "Pending")+`)`)

	as, err := w.st.Approvals(t.Context(), w.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := string(access.Definition(w.g.Registry().Snapshot(w.project.ID).Tools["get_order"].Def))
	for _, a := range as {
		if a.Tool == "get_order" && string(a.Definition) != want {
			t.Errorf("approved definition = %s, want %s", a.Definition, want)
		}
	}
}

// TestBrowserApprovalReachesMCPClient checks that clients keep the approved
// definition while a change is pending, and get the new one once approved.
func TestBrowserApprovalReachesMCPClient(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	stopV1 := w.agent("", orderTools(getOrderV1))
	cs := w.mcpClient()
	w.signUp(ctx)
	run(t, ctx, chromedp.Navigate(w.url("/p/default/settings")),
		chromedp.Click(chromedp.CSS(`input[name=approveToolChanges]`)),
		chromedp.Click(chromedp.CSS(`form.settings button[type=submit]`)))
	until(t, ctx, "the saved toast", `!document.getElementById('toast').hidden`)

	const v2 = "Look up one order by its id, with its lines and totals."
	w.agent("", orderTools(v2))
	stopV1()
	description := func() string {
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			if tl.Name == "get_order" {
				return tl.Description
			}
		}
		return ""
	}
	w.waitFor("v2 registered", func() bool { return w.g.Registry().Snapshot(w.project.ID).Tools["get_order"].Def.Description == v2 })
	if got := description(); got != getOrderV1 {
		t.Errorf("while pending, clients see %q, want the approved %q", got, getOrderV1)
	}
	run(t, ctx, chromedp.Navigate(w.url("/p/default/tools")))
	until(t, ctx, "the Pending pill", rowHasPill("get_order", "Pending"))
	run(t, ctx, chromedp.Click(chromedp.CSS(`tr[data-tool=get_order] button.primary`)))
	until(t, ctx, "Pending gone", `!(`+rowHasPill("get_order", "Pending")+`)`)
	w.waitFor("clients to see the approved change", func() bool { return description() == v2 })
}

// Two services started with one agent key (the Go and the Node example, say)
// disagree on whether get_order is a read: the Agents and Tools pages show it.
func TestBrowserReplicasDiffer(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	w.agent("", orderTools(getOrderV1))
	w.agent("", func(a *core.Agent) error {
		return core.AddTool(a, "get_order", getOrderV1,
			func(ctx context.Context, in orderIn) (string, error) { return "other service", nil })
	})
	w.signUp(ctx)
	run(t, ctx, chromedp.Navigate(w.url("/p/default/agents")))
	until(t, ctx, "the Agents page to mark the key",
		`[...document.querySelectorAll('.pill')].some(p => p.textContent === 'Replicas differ: get_order readOnlyHint')`)
	until(t, ctx, "the Agents page to say what differs and what to do",
		`document.querySelector('[data-replicas-differ]').textContent.includes('annotations.readOnlyHint: unset vs true') &&
		 document.querySelector('[data-replicas-differ]').textContent.includes('spacefix keys create --kind agent')`)
	screenshotView(t, ctx, "agents-replicas-differ")
	run(t, ctx, chromedp.Navigate(w.url("/p/default/tools")))
	until(t, ctx, "the Tools page to mark get_order", rowHasPill("get_order", "Replicas differ: readOnlyHint"))
	until(t, ctx, "search_orders unmarked", `!`+rowHasPill("search_orders", "Replicas differ: readOnlyHint"))
}
