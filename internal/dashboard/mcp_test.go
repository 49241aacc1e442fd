package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/users"
)

// These tests change settings through the admin API, as the dashboard's
// scripts and the CLI do, and watch a real MCP client.

// admin sends an admin API request with a fresh token and decodes the answer.
func (w *gw) admin(method, path string, body, out any) {
	w.t.Helper()
	if w.token == "" {
		_, secret, err := users.CreateAPIToken(context.Background(), w.st, "test", 0)
		if err != nil {
			w.t.Fatal(err)
		}
		w.token = secret
	}
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, w.g.URL()+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		var e struct{ Error string }
		json.NewDecoder(res.Body).Decode(&e)
		w.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, e.Error)
	}
	if out != nil {
		json.NewDecoder(res.Body).Decode(out)
	}
}

func listTools(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

func names(m map[string]*mcp.Tool) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func TestCacheSetFromDashboard(t *testing.T) {
	w := startGateway(t)
	var served atomic.Int64
	w.agent("", func(a *core.Agent) error {
		return core.AddTool(a, "search_orders", "List orders for a customer.",
			func(ctx context.Context, in searchIn) ([]string, error) { served.Add(1); return []string{"1042"}, nil }, core.ReadOnly())
	})
	w.admin("PATCH", "/api/projects/default/tools/search_orders", map[string]any{"cacheSeconds": 30}, nil)
	cs := w.mcpClient()
	call := func(args string) string {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "search_orders", Arguments: json.RawMessage(args)})
		if err != nil || res.IsError {
			t.Fatalf("call %s: %v %+v", args, err, res)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	first := call(`{"customer":"ada","limit":5}`)
	if again := call(`{"limit":5,"customer":"ada"}`); again != first || served.Load() != 1 {
		t.Errorf("the same arguments in another key order reached the agent: served %d times", served.Load())
	}
	call(`{"customer":"grace","limit":5}`)
	if served.Load() != 2 {
		t.Errorf("other arguments served %d times, want 2", served.Load())
	}
	// A cache hit is neither logged nor billed.
	if err := w.g.CallLog().Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var logged []json.RawMessage
	w.admin("GET", "/api/projects/default/calls", nil, &logged)
	if len(logged) != 2 {
		t.Errorf("%d calls logged, want 2 (hits are not logged)", len(logged))
	}
	// Saving the tool's settings empties the cache.
	w.admin("PATCH", "/api/projects/default/tools/search_orders", map[string]any{"cacheSeconds": 60}, nil)
	call(`{"customer":"ada","limit":5}`)
	if served.Load() != 3 {
		t.Errorf("after a save, served %d times, want 3", served.Load())
	}
}

func TestReadOnlyKeyAndAccessOverride(t *testing.T) {
	w := startGateway(t)
	w.agent("", orderTools(getOrderV1))
	var made struct{ Secret string }
	w.admin("POST", "/api/projects/default/keys", map[string]any{"kind": "client", "name": "reader", "readOnly": true}, &made)
	cs := w.mcpClientWith(made.Secret)
	if got := names(listTools(t, cs)); !slices.Equal(got, []string{"get_order", "search_orders"}) {
		t.Fatalf("a read-only key sees %v, want the two reads", got)
	}
	w.admin("PATCH", "/api/projects/default/tools/create_order", map[string]any{"access": "read"}, nil)
	w.admin("PATCH", "/api/projects/default/tools/get_order", map[string]any{"access": "write"}, nil)
	if got := names(listTools(t, cs)); !slices.Equal(got, []string{"create_order", "search_orders"}) {
		t.Errorf("after the overrides a read-only key sees %v, want create_order and search_orders", got)
	}
	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_order", Arguments: map[string]any{"id": "1042"}})
	if err == nil || !strings.Contains(err.Error(), "Tool get_order not found") {
		t.Errorf("read-only key calling a tool treated as a write: %v", err)
	}
}

func TestRateLimitFromDashboard(t *testing.T) {
	w := startGateway(t)
	w.agent("", orderTools(getOrderV1))
	w.admin("PATCH", "/api/projects/default/settings", map[string]any{"rateLimitPerMinute": 2}, nil)
	cs := w.mcpClient()
	var last string
	for range 3 {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_order", Arguments: map[string]any{"id": "1042"}})
		switch {
		case err != nil:
			last = err.Error()
		case res.IsError:
			last = res.Content[0].(*mcp.TextContent).Text
		default:
			last = ""
		}
	}
	if !strings.Contains(last, "Rate limit exceeded: this key may make 2 calls per minute. Try again in") {
		t.Errorf("third call in a minute: %q, want the rate limit message", last)
	}
}

func TestCommunityPrefixReachesClient(t *testing.T) {
	w := startGateway(t)
	w.agent("", orderTools(getOrderV1))
	cs := w.mcpClient()
	var agents struct{ Keys []struct{ ID string } }
	w.admin("GET", "/api/projects/default/agents", nil, &agents)
	w.admin("PATCH", "/api/projects/default/agent-keys/"+agents.Keys[0].ID,
		map[string]any{"displayName": "Orders", "author": "Shop team", "community": true}, nil)
	want := `[Custom agent "Orders" by Shop team, community code] ` + getOrderV1
	if got := listTools(t, cs)["get_order"].Description; got != want {
		t.Errorf("description = %q, want %q", got, want)
	}
}
