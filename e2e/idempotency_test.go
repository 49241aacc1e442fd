package e2e

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
)

// orderIn is create_order's input: a request id and what to order.
type orderIn struct {
	RequestID string `json:"requestId" desc:"The id of this order request"`
	Item      string `json:"item"`
}

// orderDesk is a write tool with an idempotency key that counts what reaches
// it. gate, if set, holds each delivery until it is closed or the call's
// context ends.
type orderDesk struct {
	delivered atomic.Int32
	mu        sync.Mutex
	calls     []core.Call // as each delivery saw itself
	started   chan string // the request id of each delivery, if set
	gate      chan struct{}
	timeout   time.Duration // the tool's own wait; 0 is the project's
}

func (o *orderDesk) setup(t *testing.T) func(a *core.Agent) {
	return func(a *core.Agent) {
		opts := []core.ToolOption{core.IdempotencyKey("requestId")}
		if o.timeout > 0 {
			opts = append(opts, core.Timeout(o.timeout))
		}
		must(t, core.AddTool(a, "create_order", "Creates an order.", func(ctx context.Context, in orderIn) (string, error) {
			n := o.delivered.Add(1)
			c, _ := core.CallFrom(ctx)
			o.mu.Lock()
			o.calls = append(o.calls, c)
			o.mu.Unlock()
			if o.started != nil {
				o.started <- in.RequestID
			}
			if o.gate != nil {
				select {
				case <-o.gate:
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
			return fmt.Sprintf("order %d: %s", n, in.Item), nil
		}, opts...))
	}
}

func (o *orderDesk) seen() []core.Call {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.calls)
}

// A repeat-safe tool called twice with one request id reaches its agent
// once and gives both calls the same result; the second is a replay in
// the call log, not billed. The same id with other arguments is refused
// before any agent, and tools/list tells the model to reuse the id.
func TestIdempotencyReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := new(orderDesk)
	e.startAgent(core.Options{}, o.setup(t))
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		id := "r-" + v
		first := call(t, cs, "create_order", map[string]any{"requestId": id, "item": "tea"})
		again := call(t, cs, "create_order", map[string]any{"item": "tea", "requestId": id}) // other key order: the same arguments
		if first.IsError || text(first) != text(again) || again.IsError {
			t.Errorf("results: %q then %q; want the same, no error", text(first), text(again))
		}
		other := call(t, cs, "create_order", map[string]any{"requestId": id, "item": "coffee"})
		want := fmt.Sprintf(`requestId %q was already used for create_order with other arguments.`, id)
		if !other.IsError || text(other) != want {
			t.Errorf("other arguments: isError %v %q, want %q", other.IsError, text(other), want)
		}
	})
	if n := o.delivered.Load(); n != int32(len(versions)) {
		t.Errorf("%d deliveries, want %d (one per request id)", n, len(versions))
	}

	cs := e.connect("2025-11-25", e.clientKey, nil)
	lt, err := cs.ListTools(context.Background(), nil)
	must(t, err)
	schema := fmt.Sprint(lt.Tools[0].InputSchema)
	if !strings.Contains(schema, "The id of this order request. Reuse the same value when you retry this call, so it takes effect only once.") {
		t.Errorf("listed schema = %s; want the reuse sentence after the argument's description", schema)
	}

	var replays, billed int
	byID := map[string]store.Call{}
	for _, c := range e.calls() {
		byID[c.CallID] = c
	}
	for _, c := range e.calls() {
		switch {
		case c.Replay:
			replays++
			if c.Billable || byID[c.RetryOf].Replay || byID[c.RetryOf].CallID == "" {
				t.Errorf("replay %+v: want unbilled, naming the delivered call it repeats", c)
			}
		case c.Billable:
			billed++
		}
	}
	if replays != len(versions) || billed != len(versions) {
		t.Errorf("call log: %d replays, %d billed; want %d of each", replays, billed, len(versions))
	}
}

// Concurrent calls with one request id: one delivery, and every caller
// gets its result.
func TestIdempotencyConcurrent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := &orderDesk{started: make(chan string, 8), gate: make(chan struct{})}
	e.startAgent(core.Options{}, o.setup(t))
	cs := e.connect("2025-11-25", e.clientKey, nil)
	const n = 6
	results := make(chan string, n)
	for range n {
		go func() {
			r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_order", Arguments: map[string]any{"requestId": "r-1", "item": "tea"}})
			if err != nil {
				results <- "error: " + err.Error()
				return
			}
			results <- text(r)
		}()
	}
	receive(t, o.started, "the first delivery")
	// Every other call is waiting on the first now, or will find its
	// result; none reaches the agent.
	close(o.gate)
	for range n {
		if got := receive(t, results, "a caller's result"); got != "order 1: tea" {
			t.Errorf("a caller got %q, want %q", got, "order 1: tea")
		}
	}
	if d := o.delivered.Load(); d != 1 {
		t.Errorf("%d deliveries, want 1", d)
	}
}

// A call that timed out has an unknown outcome: its repeat is delivered
// again, and the handler sees which call it repeats and why.
func TestIdempotencyRetryAfterTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := &orderDesk{gate: make(chan struct{}), timeout: 300 * time.Millisecond}
	e.startAgent(core.Options{}, o.setup(t))
	cs := e.connect("2025-11-25", e.clientKey, nil)
	args := map[string]any{"requestId": "r-7", "item": "tea"}
	first := call(t, cs, "create_order", args)
	if want := `Request for tool "create_order" timed out after 300ms`; !first.IsError || text(first) != want {
		t.Fatalf("first call: isError %v %q, want %q", first.IsError, text(first), want)
	}
	close(o.gate)
	again := call(t, cs, "create_order", args)
	if again.IsError || text(again) != "order 2: tea" {
		t.Errorf("retry: isError %v %q, want order 2: tea", again.IsError, text(again))
	}
	seen := o.seen()
	if len(seen) != 2 {
		t.Fatalf("%d deliveries, want 2", len(seen))
	}
	if seen[0].RetryOf != "" || seen[1].RetryOf != seen[0].ID || seen[1].RetryReason != "timeout" {
		t.Errorf("deliveries saw RetryOf %q/%q, RetryReason %q; want \"\", %q, timeout", seen[0].RetryOf, seen[1].RetryOf, seen[1].RetryReason, seen[0].ID)
	}
	// The retry's result is kept: a third call is a replay.
	if third := call(t, cs, "create_order", args); text(third) != "order 2: tea" || o.delivered.Load() != 2 {
		t.Errorf("third call %q after %d deliveries; want a replay of order 2", text(third), o.delivered.Load())
	}
	var retry store.Call
	for _, c := range e.calls() {
		if c.RetryOf != "" && !c.Replay {
			retry = c
		}
	}
	if retry.RetryOf != seen[0].ID || retry.CallID != seen[1].ID {
		t.Errorf("call log: the retry %+v; want call %s, a retry of %s", retry, seen[1].ID, seen[0].ID)
	}
}

// Two gateways on PostgreSQL and NATS: the same request id arriving at
// both at once is delivered once, and both callers get its result.
func TestIdempotencyTwoGateways(t *testing.T) {
	t.Parallel()
	var url string
	a := newEnv(t, onPostgres(&url), onBus(startNATS(t)))
	b := a.sibling()
	o := &orderDesk{started: make(chan string, 4), gate: make(chan struct{})}
	a.startAgent(core.Options{}, o.setup(t))
	csA := a.connect("2025-11-25", a.clientKey, nil)
	csB := b.connect("2025-11-25", b.clientKey, nil)
	waitFor(t, "B to list create_order", func() bool { return slices.Contains(toolNames(t, csB), "create_order") })
	for round := range 3 {
		args := map[string]any{"requestId": fmt.Sprintf("r-%d", round), "item": "tea"}
		results := make(chan string, 2)
		for _, cs := range []*mcp.ClientSession{csA, csB} {
			go func() {
				r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_order", Arguments: args})
				if err != nil {
					results <- "error: " + err.Error()
					return
				}
				results <- text(r)
			}()
		}
		receive(t, o.started, "the delivery")
		o.gate <- struct{}{}
		r1, r2 := receive(t, results, "a result"), receive(t, results, "a result")
		if r1 != r2 || !strings.HasSuffix(r1, ": tea") {
			t.Errorf("round %d: results %q and %q; want the same order", round, r1, r2)
		}
	}
	if d := o.delivered.Load(); d != 3 {
		t.Errorf("%d deliveries for 3 request ids called on both gateways, want 3", d)
	}
}

// Records past their window are pruned, and the id is new again; a
// record outlives a restart of the gateway.
func TestIdempotencyPruneAndRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := new(orderDesk)
	e.startAgent(core.Options{}, o.setup(t))
	cs := e.connect("2025-11-25", e.clientKey, nil)
	args := map[string]any{"requestId": "r-1", "item": "tea"}
	first := text(call(t, cs, "create_order", args))

	// A restart: a new gateway on the same store answers the repeat.
	e.gw.Shutdown(context.Background())
	st := e.openStore()
	t.Cleanup(func() { st.Close() })
	g, err := gateway.New(e.cfg, st)
	must(t, err)
	must(t, g.Start())
	t.Cleanup(func() { g.Close() })
	e2 := *e
	e2.gw, e2.url = g, g.URL()
	e2.startAgent(core.Options{}, o.setup(t))
	cs2 := e2.connect("2025-11-25", e.clientKey, nil)
	if got := text(call(t, cs2, "create_order", args)); got != first || o.delivered.Load() != 1 {
		t.Errorf("after a restart: %q after %d deliveries; want %q, one delivery", got, o.delivered.Load(), first)
	}

	// Past the window (24 hours by default), pruning deletes the record.
	// The test prunes 25 hours early; a gateway that answered a replay
	// keeps its copy of the finished record until the record's own expiry
	// (which pruning never precedes), so the id is new again on a gateway
	// that has no copy: a third one on the same store.
	n, err := st.PruneRequests(context.Background(), time.Now().Add(25*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("PruneRequests = %d, %v; want 1", n, err)
	}
	g.Shutdown(context.Background())
	st3 := e.openStore()
	t.Cleanup(func() { st3.Close() })
	g3, err := gateway.New(e.cfg, st3)
	must(t, err)
	must(t, g3.Start())
	t.Cleanup(func() { g3.Close() })
	e3 := *e
	e3.gw, e3.url = g3, g3.URL()
	e3.startAgent(core.Options{}, o.setup(t))
	cs3 := e3.connect("2025-11-25", e.clientKey, nil)
	if got := text(call(t, cs3, "create_order", args)); got != "order 2: tea" {
		t.Errorf("after the window: %q, want a new delivery (order 2: tea)", got)
	}
}

// repeatBench runs TestIdempotencyCost's measurements (docs/benchmarks.md,
// "Repeat-safe writes"); without it the test does nothing.
var repeatBench = flag.Bool("repeat-bench", false, "measure a replay against a cache hit and a first call against a plain one")

// TestIdempotencyCost measures, through a real gateway and a go-sdk
// session, one caller: a plain call, a cache hit, a first call of a
// repeat-safe tool (its claim in the store) and a replay.
func TestIdempotencyCost(t *testing.T) {
	if !*repeatBench {
		return
	}
	e := newEnv(t)
	o := new(orderDesk)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		o.setup(t)(a)
		for _, name := range []string{"plain_order", "cached_order"} {
			must(t, core.AddTool(a, name, "Creates an order.", func(ctx context.Context, in orderIn) (string, error) {
				return "order: " + in.Item, nil
			}))
		}
	})
	e.save(store.ToolSettings{Tool: "cached_order", CacheSeconds: 3600})
	cs := e.connect("2025-11-25", e.clientKey, nil)
	measure := func(name string, args func(i int) map[string]any) {
		call(t, cs, name, args(-1)) // warm, and the one delivery a replay or hit repeats
		i := 0
		r := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				i++
				if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args(i)}); err != nil {
					b.Fatal(err)
				}
			}
		})
		t.Logf("%-28s %8.1f µs/call  (%d calls)", name+" "+fmt.Sprint(args(0)["requestId"] != args(1)["requestId"]), float64(r.NsPerOp())/1000, r.N)
	}
	same := func(int) map[string]any { return map[string]any{"requestId": "r-same", "item": "tea"} }
	measure("plain_order", same)
	measure("cached_order", same)
	measure("create_order", same) // replays
	measure("create_order", func(i int) map[string]any { return map[string]any{"requestId": fmt.Sprintf("r-%d", i), "item": "tea"} })
}
