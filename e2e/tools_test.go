package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/store"
)

// The seed guide's order tools, over a tiny in-memory order book.

type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Status   string `json:"status"`
	Total    int    `json:"total"`
}

type GetOrderInput struct {
	ID string `json:"id" desc:"The order id, for example \"1042\""`
}

type SearchOrdersInput struct {
	Customer string `json:"customer" desc:"Customer handle, for example \"ada\""`
	Status   string `json:"status,omitempty" desc:"Only orders in this status" enum:"open,shipped,cancelled"`
	Limit    int    `json:"limit,omitempty" desc:"How many orders to return (1 to 50)" min:"1" max:"50" default:"10"`
}

var orders = []Order{
	{ID: "1042", Customer: "ada", Status: "open", Total: 4200},
	{ID: "1043", Customer: "ada", Status: "shipped", Total: 1999},
	{ID: "1044", Customer: "grace", Status: "open", Total: 500},
}

func addOrderTools(a *core.Agent) error {
	if err := core.AddTool(a, "get_order",
		"Look up one order by its id. Returns the order, or an error if no order has that id. "+
			"To find orders by customer, use search_orders instead.",
		func(ctx context.Context, in GetOrderInput) (Order, error) {
			for _, o := range orders {
				if o.ID == in.ID {
					return o, nil
				}
			}
			return Order{}, fmt.Errorf("no order with id %s: ask the user to confirm the id, or use search_orders", in.ID)
		}, core.ReadOnly()); err != nil {
		return err
	}
	return core.AddTool(a, "search_orders",
		"List orders for a customer, newest first. Returns an empty list when nothing matches.",
		func(ctx context.Context, in SearchOrdersInput) ([]Order, error) {
			out := []Order{}
			for _, o := range orders {
				if o.Customer == in.Customer && (in.Status == "" || o.Status == in.Status) {
					out = append(out, o)
				}
			}
			return out, nil
		}, core.ReadOnly())
}

type Empty struct{}

type SleepInput struct {
	Ms int `json:"ms" min:"0"`
}

func TestToolCallRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, addOrderTools(a))
		must(t, core.AddTool(a, "say", "Returns a fixed string.", func(ctx context.Context, in Empty) (string, error) {
			return "hello from the agent", nil
		}))
		must(t, core.AddTool(a, "nothing", "Returns nil.", func(ctx context.Context, in Empty) (*Order, error) {
			return nil, nil
		}))
		must(t, core.AddTool(a, "shaped", "Returns a shaped result.", func(ctx context.Context, in Empty) (core.ToolResult, error) {
			return core.ToolResult{Content: []core.Content{core.Text("one"), core.Text("two")}, IsError: true}, nil
		}))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)

		if diff := cmp.Diff([]string{"get_order", "nothing", "say", "search_orders", "shaped"}, toolNames(t, cs)); diff != "" {
			t.Errorf("tools/list (-want +got):\n%s", diff)
		}

		res := call(t, cs, "get_order", map[string]any{"id": "1042"})
		if res.IsError {
			t.Fatalf("get_order failed: %s", text(res))
		}
		var got Order
		must(t, json.Unmarshal([]byte(text(res)), &got))
		if diff := cmp.Diff(orders[0], got); diff != "" {
			t.Errorf("get_order text (-want +got):\n%s", diff)
		}
		sc, _ := json.Marshal(res.StructuredContent)
		if !strings.Contains(string(sc), `"customer":"ada"`) {
			t.Errorf("structuredContent = %s, want the order as JSON", sc)
		}

		res = call(t, cs, "search_orders", map[string]any{"customer": "ada", "status": "shipped"})
		if got, want := text(res), `[{"id":"1043","customer":"ada","status":"shipped","total":1999}]`; got != want {
			t.Errorf("search_orders = %s, want %s", got, want)
		}
		if got := text(call(t, cs, "say", nil)); got != "hello from the agent" {
			t.Errorf("say = %q", got)
		}
		if got := text(call(t, cs, "nothing", nil)); got != "null" {
			t.Errorf("nothing = %q, want null", got)
		}
		res = call(t, cs, "shaped", nil)
		if !res.IsError || text(res) != "one\ntwo" {
			t.Errorf("shaped = isError %v, %q; want isError with two parts passed through", res.IsError, text(res))
		}
	})
}

func TestToolListAnnotations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, addOrderTools(a))
		must(t, core.AddTool(a, "cancel_order", "Cancel an order.", func(ctx context.Context, in GetOrderInput) (string, error) {
			return "cancelled", nil
		}, core.Destructive(), core.Idempotent(), core.Title("Cancel an order")))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		res, err := cs.ListTools(context.Background(), nil)
		must(t, err)
		byName := map[string]*mcp.Tool{}
		for _, tl := range res.Tools {
			byName[tl.Name] = tl
		}
		get := byName["get_order"]
		if get == nil || get.Annotations == nil || !get.Annotations.ReadOnlyHint {
			t.Fatalf("get_order annotations = %+v, want readOnlyHint", get)
		}
		if !strings.HasPrefix(get.Description, "Look up one order by its id.") {
			t.Errorf("get_order description = %q", get.Description)
		}
		schema, _ := json.Marshal(get.InputSchema)
		if !strings.Contains(string(schema), `"required":["id"]`) {
			t.Errorf("get_order inputSchema = %s, want id required", schema)
		}
		c := byName["cancel_order"]
		if c == nil || c.Annotations == nil || c.Annotations.ReadOnlyHint || c.Annotations.DestructiveHint == nil || !*c.Annotations.DestructiveHint || !c.Annotations.IdempotentHint {
			t.Errorf("cancel_order annotations = %+v, want destructive and idempotent", c.Annotations)
		}
		if c.Title != "Cancel an order" {
			t.Errorf("cancel_order title = %q", c.Title)
		}
		if get.OutputSchema == nil {
			t.Errorf("get_order has no outputSchema; a struct result should advertise one")
		}
	})
}

func TestValidationErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var reached atomic.Int64
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "search_orders", "List orders.", func(ctx context.Context, in SearchOrdersInput) ([]Order, error) {
			reached.Add(1)
			return nil, nil
		}, core.ReadOnly()))
		must(t, core.AddTool(a, "get_order", "Get an order.", func(ctx context.Context, in GetOrderInput) (Order, error) {
			reached.Add(1)
			return Order{}, nil
		}, core.ReadOnly()))
	})
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"search_orders", map[string]any{"customer": "ada", "limit": 51}, "Input validation error: Invalid arguments for tool search_orders: data/limit must be <= 50"},
		{"search_orders", map[string]any{"customer": "ada", "status": "lost"}, "Input validation error: Invalid arguments for tool search_orders: data/status must be equal to one of the allowed values"},
		{"get_order", map[string]any{}, "Input validation error: Invalid arguments for tool get_order: data must have required property 'id'"},
		{"get_order", nil, "Input validation error: Invalid arguments for tool get_order: data must have required property 'id'"},
	}
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		for _, c := range cases {
			res := call(t, cs, c.tool, c.args)
			if !res.IsError || text(res) != c.want {
				t.Errorf("%s(%v) = isError %v %q\nwant isError %q", c.tool, c.args, res.IsError, text(res), c.want)
			}
		}
	})
	if n := reached.Load(); n != 0 {
		t.Errorf("handlers ran %d times for invalid calls; want 0", n)
	}
	if cs := e.calls(); len(cs) != 0 {
		t.Errorf("call log has %d records for invalid calls; want none (not logged, not billed)", len(cs))
	}
}

func TestToolNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOrderTools(a)) })
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
		if err == nil || !strings.Contains(err.Error(), "Tool no_such_tool not found") {
			t.Errorf("call to unknown tool: err = %v, want Tool no_such_tool not found", err)
		}
	})
}

func TestHandlerErrorsAndPanics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, addOrderTools(a))
		must(t, core.AddTool(a, "explode", "Panics.", func(ctx context.Context, in Empty) (string, error) {
			panic("the flux capacitor is empty")
		}))
		must(t, core.AddTool(a, "huge", "Returns more than 4 MiB.", func(ctx context.Context, in Empty) (string, error) {
			return strings.Repeat("x", 5<<20), nil
		}))
		must(t, core.AddTool(a, "unserialisable", "Returns a value JSON cannot hold.", func(ctx context.Context, in Empty) (any, error) {
			return map[string]any{"c": make(chan int)}, nil
		}))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		res := call(t, cs, "get_order", map[string]any{"id": "9999"})
		if want := "no order with id 9999: ask the user to confirm the id, or use search_orders"; !res.IsError || text(res) != want {
			t.Errorf("handler error = isError %v %q, want %q", res.IsError, text(res), want)
		}
		res = call(t, cs, "explode", nil)
		if want := "panic: the flux capacitor is empty"; !res.IsError || text(res) != want {
			t.Errorf("panic = isError %v %q, want %q", res.IsError, text(res), want)
		}
		res = call(t, cs, "huge", nil)
		if !res.IsError || !strings.Contains(text(res), "too large") || !strings.Contains(text(res), "4 MiB") {
			t.Errorf("huge = isError %v %q, want a too-large error naming 4 MiB", res.IsError, text(res))
		}
		res = call(t, cs, "unserialisable", nil)
		if !res.IsError || !strings.HasPrefix(text(res), "Result could not be serialised: ") {
			t.Errorf("unserialisable = isError %v %q", res.IsError, text(res))
		}
	})
	var errs []string
	for _, c := range e.calls() {
		if c.Name == "explode" {
			errs = append(errs, c.Error)
		}
		if !c.Billable || c.Outcome != store.OutcomeError {
			t.Errorf("call log %s: billable %v outcome %q; a failed call that reached the agent is billable", c.Name, c.Billable, c.Outcome)
		}
	}
	if len(errs) != len(versions) || errs[0] != "panic: the flux capacitor is empty" {
		t.Errorf("call log errors for explode = %q", errs)
	}
}

// eventWait bounds how long a test waits for something that should happen
// promptly (a cancellation, a notification). It is a bound for failures, not
// a demand on speed: a passing run never waits it out, and a loaded machine
// running the suite in parallel must not fail a correct gateway.
const eventWait = 30 * time.Second

func TestTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cancelled := make(chan string, 8)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "slow", "Sleeps.", func(ctx context.Context, in SleepInput) (string, error) {
			select {
			case <-ctx.Done():
				cancelled <- "cancelled"
				return "", ctx.Err()
			case <-time.After(time.Duration(in.Ms) * time.Millisecond):
				return "done", nil
			}
		}, core.Timeout(700*time.Millisecond)))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		res := call(t, cs, "slow", map[string]any{"ms": 5000})
		if want := `Request for tool "slow" timed out after 700ms`; !res.IsError || text(res) != want {
			t.Errorf("slow = isError %v %q, want %q", res.IsError, text(res), want)
		}
		select {
		case <-cancelled:
		case <-time.After(eventWait):
			t.Errorf("the handler's context was not cancelled after the timeout")
		}
		if got := text(call(t, cs, "slow", map[string]any{"ms": 10})); got != "done" {
			t.Errorf("fast call after a timeout = %q", got)
		}
	})
	var timeouts int
	for _, c := range e.calls() {
		if c.Outcome == store.OutcomeTimeout {
			timeouts++
		}
	}
	if timeouts != len(versions) {
		t.Errorf("call log has %d timeouts, want %d", timeouts, len(versions))
	}
}

func TestProjectCallWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.settings = &store.ProjectSettings{CallWaitMs: 1000} })
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "slow", "Sleeps.", func(ctx context.Context, in SleepInput) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}))
	})
	cs := e.connect("2025-11-25", e.clientKey, nil)
	res := call(t, cs, "slow", map[string]any{"ms": 5000})
	if want := `Request for tool "slow" timed out after 1000ms`; text(res) != want {
		t.Errorf("slow = %q, want %q", text(res), want)
	}
}

func TestReplicasShareCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var hits [2]atomic.Int64
	for i := range 2 {
		e.startAgent(core.Options{Instance: fmt.Sprint("r", i)}, func(a *core.Agent) {
			must(t, core.AddTool(a, "whoami", "Says which replica answered.", func(ctx context.Context, in Empty) (string, error) {
				hits[i].Add(1)
				time.Sleep(5 * time.Millisecond) // the behaviour: calls overlap, so both replicas get some
				return fmt.Sprint(i), nil
			}))
		})
	}
	cs := e.connect("2025-11-25", e.clientKey, nil)
	const n = 40
	for range n {
		call(t, cs, "whoami", nil)
	}
	a, b := hits[0].Load(), hits[1].Load()
	if a+b != n {
		t.Fatalf("replicas served %d+%d calls, want %d in all (each call exactly once)", a, b, n)
	}
	if a < n/4 || b < n/4 {
		t.Errorf("replicas served %d and %d of %d calls; want the load spread", a, b, n)
	}
}

func TestReadOnlyKeyAndAllowList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, addOrderTools(a))
		must(t, core.AddTool(a, "create_order", "Create an order.", func(ctx context.Context, in GetOrderInput) (string, error) {
			return "created", nil
		}))
	})
	_, ro := e.newKey(store.Key{Kind: store.KindClient, Name: "ro", ReadOnly: true})
	_, only := e.newKey(store.Key{Kind: store.KindClient, Name: "only", Tools: []string{"get_order", "create_order"}})
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, ro, nil)
		if diff := cmp.Diff([]string{"get_order", "search_orders"}, toolNames(t, cs)); diff != "" {
			t.Errorf("read-only key tools (-want +got):\n%s", diff)
		}
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_order", Arguments: map[string]any{"id": "1"}}); err == nil || !strings.Contains(err.Error(), "Tool create_order not found") {
			t.Errorf("read-only key calling a write: err = %v", err)
		}
		cs = e.connect(v, only, nil)
		if diff := cmp.Diff([]string{"create_order", "get_order"}, toolNames(t, cs)); diff != "" {
			t.Errorf("allow-list key tools (-want +got):\n%s", diff)
		}
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_orders", Arguments: map[string]any{"customer": "ada"}}); err == nil || !strings.Contains(err.Error(), "Tool search_orders not found") {
			t.Errorf("allow-list key calling an unlisted tool: err = %v", err)
		}
	})
}

func TestToolListChanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, v := range []string{"2025-06-18", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			changed := make(chan struct{}, 16)
			resChanged := make(chan struct{}, 16)
			promptsChanged := make(chan struct{}, 16)
			cs := e.connect(v, e.clientKey, &mcp.ClientOptions{
				ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
				ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { resChanged <- struct{}{} },
				PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { promptsChanged <- struct{}{} },
			})
			if got := toolNames(t, cs); len(got) != 0 {
				t.Fatalf("tools before any agent = %v", got)
			}
			ra := e.startAgent(core.Options{}, func(a *core.Agent) {
				must(t, addOrderTools(a))
				must(t, a.Resource("orders://open", core.ResourceOptions{Name: "Open orders"}, func(context.Context) (any, error) { return nil, nil }))
				must(t, a.Prompt("summarise_order", core.PromptOptions{}, func(context.Context, map[string]string) (core.PromptResult, error) {
					return core.PromptText("x"), nil
				}))
			})
			for what, ch := range map[string]chan struct{}{"tools": changed, "resources": resChanged, "prompts": promptsChanged} {
				select {
				case <-ch:
				case <-time.After(eventWait):
					t.Fatalf("no notifications/%s/list_changed when an agent connected", what)
				}
			}
			if diff := cmp.Diff([]string{"get_order", "search_orders"}, toolNames(t, cs)); diff != "" {
				t.Errorf("tools after connect (-want +got):\n%s", diff)
			}
			ra.stop()
			deadline := time.After(eventWait)
			for len(toolNames(t, cs)) > 0 {
				select {
				case <-changed:
				case <-deadline:
					t.Fatal("no notifications/tools/list_changed after the agent left")
				}
			}
		})
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOrderTools(a)) })
	k, secret := e.newKey(store.Key{Kind: store.KindClient, Name: "soon revoked"})
	forEachVersion(t, func(t *testing.T, v string) {
		if _, err := e.tryConnect(v, "sfx_client_not-a-key", nil); err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
			t.Errorf("unknown key: err = %v, want 401", err)
		}
		if _, err := e.tryConnect(v, e.agentKey, nil); err == nil {
			t.Errorf("agent key at the MCP endpoint: connected, want 401")
		}
		cs := e.connect(v, secret, nil)
		call(t, cs, "get_order", map[string]any{"id": "1042"})
	})
	must(t, e.store.RevokeKey(context.Background(), k.ID))
	// The condition, not a wall-time budget: under t.Parallel on a busy
	// machine a second says nothing about the gateway.
	var refused error
	waitFor(t, "the revoked key to be refused", func() bool {
		cs, err := e.tryConnect("2025-11-25", secret, nil)
		if err == nil {
			cs.Close()
			return false
		}
		refused = err
		return true
	})
	if !strings.Contains(refused.Error(), "401") && !strings.Contains(strings.ToLower(refused.Error()), "unauthorized") {
		t.Errorf("revoked key: err = %v, want 401", refused)
	}
}

func TestCallLogAndUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOrderTools(a)) })
	cs := e.connect("2026-07-28", e.clientKey, nil)
	for range 3 {
		call(t, cs, "get_order", map[string]any{"id": "1042"})
	}
	call(t, cs, "get_order", map[string]any{"id": "nope"})
	call(t, cs, "search_orders", map[string]any{"customer": "ada", "limit": 0}) // invalid: not billed

	cl := e.calls()
	if len(cl) != 4 {
		t.Fatalf("call log has %d records, want 4", len(cl))
	}
	for _, c := range cl {
		if c.Name != "get_order" || c.Kind != "tool" || c.KeyID == "" || c.Replica == "" || c.Duration <= 0 {
			t.Errorf("call log record %+v is missing fields", c)
		}
	}
	if cl[0].Outcome != store.OutcomeError || !strings.HasPrefix(cl[0].Error, "no order with id nope") {
		t.Errorf("newest record = %s %q, want the failed call", cl[0].Outcome, cl[0].Error)
	}
	day := time.Now().UTC().Truncate(24 * time.Hour)
	u, err := e.store.Usage(context.Background(), e.project.ID, day, day)
	must(t, err)
	if len(u) != 1 || u[0].Name != "get_order" || u[0].Calls != 4 {
		t.Errorf("usage = %+v, want 4 billable get_order calls today", u)
	}
}
