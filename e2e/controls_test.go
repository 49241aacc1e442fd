package e2e

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/store"
)

// save stores tool settings as the dashboard does and applies them.
func (e *env) save(ts store.ToolSettings) {
	e.t.Helper()
	ts.ProjectID = e.project.ID
	if _, err := e.store.SaveToolSettings(context.Background(), ts); err != nil {
		e.t.Fatal(err)
	}
	e.gw.SettingsChanged(e.project.ID)
}

func (e *env) saveProject(s store.ProjectSettings) {
	e.t.Helper()
	must(e.t, e.store.UpdateProjectSettings(context.Background(), e.project.ID, s))
	e.gw.SettingsChanged(e.project.ID)
}

func descriptions(t *testing.T, cs *mcp.ClientSession) map[string]string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	must(t, err)
	out := map[string]string{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl.Description
	}
	return out
}

func TestToolControls(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var lookups atomic.Int64
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, addOrderTools(a))
		must(t, core.AddTool(a, "lookup", "Looks things up.", func(ctx context.Context, in SearchOrdersInput) (string, error) {
			lookups.Add(1)
			if in.Customer == "fail" {
				return "", context.DeadlineExceeded
			}
			return "found " + in.Customer, nil
		}))
	})
	_, ro := e.newKey(store.Key{Kind: store.KindClient, ReadOnly: true})
	forEachVersion(t, func(t *testing.T, v string) {
		changed := make(chan struct{}, 16)
		cs := e.connect(v, e.clientKey, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		})
		roCS := e.connect(v, ro, nil)

		// Description models see.
		e.save(store.ToolSettings{Tool: "get_order", Description: "Fetch one order by id."})
		if got := descriptions(t, cs)["get_order"]; got != "Fetch one order by id." {
			t.Errorf("edited description = %q", got)
		}
		if v != "2026-07-28" {
			select {
			case <-changed:
			case <-time.After(5 * time.Second):
				t.Error("no tools/list_changed after a description edit")
			}
		}
		e.save(store.ToolSettings{Tool: "get_order"})
		if got := descriptions(t, cs)["get_order"]; !strings.HasPrefix(got, "Look up one order by its id.") {
			t.Errorf("restored description = %q", got)
		}

		// Disabled.
		e.save(store.ToolSettings{Tool: "search_orders", Disabled: true})
		if _, ok := descriptions(t, cs)["search_orders"]; ok {
			t.Error("a disabled tool is still listed")
		}
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_orders", Arguments: map[string]any{"customer": "ada"}})
		if err == nil || !strings.Contains(err.Error(), "Tool search_orders not found") {
			t.Errorf("call to a disabled tool: %v", err)
		}
		e.save(store.ToolSettings{Tool: "search_orders"})

		// Reads or writes.
		if diff := cmp.Diff([]string{"get_order", "search_orders"}, toolNames(t, roCS)); diff != "" {
			t.Errorf("read-only key before override (-want +got):\n%s", diff)
		}
		e.save(store.ToolSettings{Tool: "lookup", Access: store.AccessRead})
		e.save(store.ToolSettings{Tool: "get_order", Access: store.AccessWrite})
		if diff := cmp.Diff([]string{"lookup", "search_orders"}, toolNames(t, roCS)); diff != "" {
			t.Errorf("read-only key after overrides (-want +got):\n%s", diff)
		}
		e.save(store.ToolSettings{Tool: "lookup"})
		e.save(store.ToolSettings{Tool: "get_order"})

		// Cache: key order does not matter, errors are not cached, a save
		// empties it, and hits are neither logged nor billed.
		e.save(store.ToolSettings{Tool: "lookup", CacheSeconds: 30})
		lookups.Store(0)
		logged := len(e.calls())
		call(t, cs, "lookup", map[string]any{"customer": "ada", "limit": 5})
		res := call(t, cs, "lookup", map[string]any{"limit": 5, "customer": "ada"})
		if text(res) != "found ada" || lookups.Load() != 1 {
			t.Errorf("second identical call = %q after %d handler runs; want a cache hit", text(res), lookups.Load())
		}
		call(t, cs, "lookup", map[string]any{"customer": "fail"})
		call(t, cs, "lookup", map[string]any{"customer": "fail"})
		if lookups.Load() != 3 {
			t.Errorf("handler ran %d times; errors must not be cached", lookups.Load())
		}
		if got := len(e.calls()) - logged; got != 3 {
			t.Errorf("%d calls logged; want 3 (the hit is not logged)", got)
		}
		res = call(t, cs, "lookup", map[string]any{"customer": "ada", "limit": 0})
		if !res.IsError || lookups.Load() != 3 {
			t.Errorf("an invalid call must be refused before the cache: %q", text(res))
		}
		e.save(store.ToolSettings{Tool: "lookup", CacheSeconds: 30})
		call(t, cs, "lookup", map[string]any{"customer": "ada", "limit": 5})
		if lookups.Load() != 4 {
			t.Errorf("a settings save did not empty the cache")
		}
		e.save(store.ToolSettings{Tool: "lookup"})
	})
}

func TestCommunityAgentPrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	k, secret := e.newKey(store.Key{Kind: store.KindAgent, Name: "radar key"})
	must(t, e.store.SetKeyMeta(context.Background(), k.ID, store.KeyMeta{DisplayName: "Test radar", Author: "Ada Lovelace", Community: true}))
	e.startAgent(core.Options{APIKey: secret}, func(a *core.Agent) {
		must(t, core.AddTool(a, "run_tests", "Runs the tests.", func(ctx context.Context, in Empty) (string, error) { return "ok", nil }))
	})
	cs := e.connect("2025-11-25", e.clientKey, nil)
	if got, want := descriptions(t, cs)["run_tests"], `[Custom agent "Test radar" by Ada Lovelace, community code] Runs the tests.`; got != want {
		t.Errorf("description = %q, want %q", got, want)
	}
}

func TestApproveToolChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.saveProject(store.ProjectSettings{ApproveToolChanges: true})
	ra := e.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOrderTools(a)) })
	cs := e.connect("2025-11-25", e.clientKey, nil)
	if got := toolNames(t, cs); len(got) != 0 {
		t.Fatalf("new tools are visible before approval: %v", got)
	}
	snap := e.gw.Registry().Snapshot(e.project.ID)
	def := access.Definition(snap.Tools["get_order"].Def)
	_, err := e.store.ApproveTool(context.Background(), e.project.ID, "get_order", def)
	must(t, err)
	e.gw.SettingsChanged(e.project.ID)
	if diff := cmp.Diff([]string{"get_order"}, toolNames(t, cs)); diff != "" {
		t.Errorf("after approving get_order (-want +got):\n%s", diff)
	}
	ra.stop()
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "get_order", "A new, unapproved description.", func(ctx context.Context, in GetOrderInput) (Order, error) {
			return orders[0], nil
		}, core.ReadOnly()))
	})
	waitFor(t, "the restarted agent", func() bool { return len(e.gw.Registry().Snapshot(e.project.ID).Tools["get_order"].Replicas) == 1 })
	if got := descriptions(t, cs)["get_order"]; !strings.HasPrefix(got, "Look up one order by its id.") {
		t.Errorf("a changed tool shows %q; want the last approved description", got)
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.saveProject(store.ProjectSettings{RateLimitPerMinute: 2})
	e.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOrderTools(a)) })
	cs := e.connect("2026-07-28", e.clientKey, nil)
	call(t, cs, "get_order", map[string]any{"id": "1042"})
	call(t, cs, "get_order", map[string]any{"id": "1042"})
	res := call(t, cs, "get_order", map[string]any{"id": "1042"})
	if !res.IsError || !strings.HasPrefix(text(res), "Rate limit exceeded: this key may make 2 calls per minute. Try again in ") {
		t.Errorf("third call in a minute = %q", text(res))
	}
	if n := len(e.calls()); n != 2 {
		t.Errorf("%d calls logged; a refused call is not logged", n)
	}
}
