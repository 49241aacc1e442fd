package e2e

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/users"
)

// adminPost calls the admin API with a fresh admin API token.
func (e *env) adminPost(path string) int {
	e.t.Helper()
	_, token, err := users.CreateAPIToken(context.Background(), e.store, "e2e", 0)
	must(e.t, err)
	req, err := http.NewRequest(http.MethodPost, e.url+path, nil)
	must(e.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	must(e.t, err)
	res.Body.Close()
	return res.StatusCode
}

// A revoked key's view goes at once, with its sessions, through the change
// path; another key's view is built on its first request.
func TestViewDroppedOnRevoke(t *testing.T) {
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOrderTools(a)) })
	k, secret := e.newKey(store.Key{Kind: store.KindClient, Name: "soon revoked"})
	cs := e.connect("2025-11-25", secret, nil)
	call(t, cs, "get_order", map[string]any{"id": "1042"})
	if n := e.gw.Views(); n != 1 {
		t.Fatalf("views after one key connected = %d, want 1", n)
	}

	if code := e.adminPost("/api/projects/" + e.project.Name + "/keys/" + k.ID + "/revoke"); code != http.StatusOK {
		t.Fatalf("revoke: status %d, want 200", code)
	}
	if n := e.gw.Views(); n != 0 {
		t.Errorf("views after revoking the only key that had one = %d, want 0", n)
	}
	if n := e.gw.Sessions(k.ID); n != 0 {
		t.Errorf("a revoked key still has %d sessions", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_order", Arguments: map[string]any{"id": "1042"}}); err == nil {
		t.Error("a revoked key's session still calls tools")
	}

	_, other := e.newKey(store.Key{Kind: store.KindClient, Name: "new"})
	cs2 := e.connect("2026-07-28", other, nil)
	if res := call(t, cs2, "get_order", map[string]any{"id": "1042"}); res.IsError {
		t.Errorf("a new key's call = %q", text(res))
	}
	if n := e.gw.Views(); n != 1 {
		t.Errorf("views after a new key's call = %d, want 1", n)
	}
}

// A view with neither sessions nor requests for ViewIdle goes; one with a
// session stays, and a dropped key's next request builds its view again.
func TestViewDroppedWhenIdle(t *testing.T) {
	e := newEnv(t, func(o *envOptions) {
		o.config = func(c *gateway.Config) { c.ViewIdle = 100 * time.Millisecond }
	})
	e.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOrderTools(a)) })
	_, sessionKey := e.newKey(store.Key{Kind: store.KindClient, Name: "with a session"})
	withSession := e.connect("2025-11-25", sessionKey, nil) // first: the older use
	call(t, withSession, "get_order", map[string]any{"id": "1042"})
	stateless := e.connect("2026-07-28", e.clientKey, nil)
	call(t, stateless, "get_order", map[string]any{"id": "1042"})
	if n := e.gw.Views(); n != 2 {
		t.Fatalf("views = %d, want 2", n)
	}

	waitFor(t, "the stateless key's idle view to be dropped", func() bool { return e.gw.Views() == 1 })
	if res := call(t, withSession, "get_order", map[string]any{"id": "1042"}); res.IsError {
		t.Errorf("the kept view's session: %q", text(res))
	}
	if res := call(t, stateless, "get_order", map[string]any{"id": "1042"}); res.IsError {
		t.Errorf("a dropped view's key calls again: %q", text(res))
	}
	if n := e.gw.Views(); n != 2 {
		t.Errorf("views after the dropped key's next call = %d, want 2", n)
	}
}

// An agent connecting empties the cached results of its own tools only.
func TestChangeAgentConnectClearsItsCache(t *testing.T) {
	e := newEnv(t)
	var alpha, beta atomic.Int64
	addCounter := func(name string, n *atomic.Int64) func(a *core.Agent) {
		return func(a *core.Agent) {
			must(t, core.AddTool(a, name, "Count.", func(ctx context.Context, in struct{}) (string, error) {
				n.Add(1)
				return "ok", nil
			}))
		}
	}
	e.startAgent(core.Options{}, addCounter("alpha_count", &alpha))
	_, betaKey := e.newKey(store.Key{Kind: store.KindAgent, Name: "beta"})
	e.startAgent(core.Options{APIKey: betaKey}, addCounter("beta_count", &beta))
	e.save(store.ToolSettings{Tool: "alpha_count", CacheSeconds: 300})
	e.save(store.ToolSettings{Tool: "beta_count", CacheSeconds: 300})

	cs := e.connect("2026-07-28", e.clientKey, nil)
	for range 2 {
		call(t, cs, "alpha_count", map[string]any{})
		call(t, cs, "beta_count", map[string]any{})
	}
	if alpha.Load() != 1 || beta.Load() != 1 {
		t.Fatalf("handler runs = %d, %d; want 1, 1 (the second calls hit the cache)", alpha.Load(), beta.Load())
	}

	var again atomic.Int64
	e.startAgent(core.Options{}, addCounter("alpha_count", &again)) // a second replica of alpha's key
	call(t, cs, "alpha_count", map[string]any{})
	call(t, cs, "beta_count", map[string]any{})
	if got := alpha.Load() + again.Load(); got != 2 {
		t.Errorf("alpha_count ran %d times, want 2: its agent connected, so its cached result goes", got)
	}
	if got := beta.Load(); got != 1 {
		t.Errorf("beta_count ran %d times, want 1: another agent connecting keeps its cached result", got)
	}
}
