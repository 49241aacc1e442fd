package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/store"
)

// TestBrowserTasks: a slow tool called by a client without tasks runs as a
// job; the Tasks page lists it, with its caller and progress line, at
// 1280 and 390 px, and an editor's Cancel stops the agent's call, which the
// audit log records.
func TestBrowserTasks(t *testing.T) {
	ctx := browser(t)
	w := startGateway(t)
	if err := w.st.UpdateProjectSettings(context.Background(), w.project.ID, store.ProjectSettings{CallWaitMs: 1000}); err != nil {
		t.Fatal(err)
	}
	cancelled := make(chan struct{}, 1)
	w.agent("eu-1", func(a *core.Agent) error {
		return core.AddTool(a, "quarterly_report", "Builds the quarter's sales report; takes a while.",
			func(ctx context.Context, _ struct{}) (string, error) {
				core.Progress(ctx, "Counting orders: 31 of 92 days")
				<-ctx.Done()
				cancelled <- struct{}{}
				return "", ctx.Err()
			}, core.TaskSupport(core.TaskOptional))
	})
	cs := w.mcpClientWith(newClientKey(t, w.st, w.project, store.Key{Name: "support bot"}))
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "quarterly_report", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	first := res.Content[0].(*mcp.TextContent).Text
	id, _, ok := strings.Cut(strings.TrimPrefix(first, "The tool is still running (job "), ")")
	if !ok || !strings.HasPrefix(id, "task_") {
		t.Fatalf("answer at the wait = %q, want a job reference", first)
	}

	w.signUp(ctx)
	row := `document.querySelector('table.tasks tbody tr')`
	for _, size := range []struct {
		name string
		w, h int64
	}{{"1280", 1280, 860}, {"390", 390, 844}} {
		run(t, ctx, chromedp.EmulateViewport(size.w, size.h), chromedp.Navigate(w.url("/p/default/tasks")),
			chromedp.WaitVisible(chromedp.CSS(`table.tasks`)))
		until(t, ctx, "the running job's row", row+`.textContent.includes('quarterly_report') && `+row+`.textContent.includes('`+id+`')`)
		until(t, ctx, "its caller and progress", row+`.textContent.includes('support bot') && `+row+`.textContent.includes('Counting orders: 31 of 92 days')`)
		until(t, ctx, "the whole row, Cancel included, on screen", `[...document.querySelectorAll('table.tasks tbody tr, table.tasks button')].every(e =>
			e.getBoundingClientRect().right <= window.innerWidth)`)
		screenshot(t, ctx, "tasks-"+size.name)
	}

	run(t, ctx, chromedp.EmulateViewport(1280, 860), chromedp.Navigate(w.url("/p/default/tasks")), chromedp.WaitVisible(chromedp.CSS(`table.tasks`)))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.confirm = () => true; true`)); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.Click(chromedp.CSS(`table.tasks button.danger`)))
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent's call was not cancelled")
	}
	until(t, ctx, "the empty list", `document.querySelector('table.tasks td.empty') !== null`)

	// The client reads the job as cancelled; the audit log has who did it.
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "spacefix_job", Arguments: map[string]any{"jobId": id}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Content[0].(*mcp.TextContent).Text, "Job "+id+" was cancelled before it returned a result. Call the tool again if you still need it."; got != want {
		t.Errorf("spacefix_job after the cancel = %q, want %q", got, want)
	}
	entries, err := w.st.Audit(context.Background(), store.AuditFilter{ProjectID: w.project.ID, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range entries {
		found = found || (e.Action == "task.cancel" && e.Target == "quarterly_report "+id && e.Actor == "ada@example.com")
	}
	if !found {
		t.Errorf("audit entries = %+v, want task.cancel of quarterly_report %s by ada@example.com", entries, id)
	}
}
