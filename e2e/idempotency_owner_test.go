package e2e

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
)

// Repeat-safe writes are kept per caller: the person for an OAuth call,
// else the client key. The same request id from two callers is two
// deliveries, each caller gets its own result, another caller's arguments
// are a fresh delivery (not "already used"), and each caller's replays go
// on working — on the plain path, the early path, the job path, in every
// era and across gateways.

// ownerDesk offers two repeat-safe tools that say who called them:
// create_order answers at once, slow_order (task support) waits until its
// caller's hold gets a send.
type ownerDesk struct {
	delivered atomic.Int32
	mu        sync.Mutex
	holds     map[string]chan struct{} // by caller (email or key name)
}

func callerName(ctx context.Context) string {
	c, _ := core.CallFrom(ctx)
	if c.Person != nil {
		return c.Person.Email
	}
	return c.KeyName
}

// release lets one slow_order call of who return (a release already
// pending stays the one).
func (o *ownerDesk) release(who string) {
	select {
	case o.hold(who) <- struct{}{}:
	default:
	}
}

// hold returns the channel that releases who's slow_order calls.
func (o *ownerDesk) hold(who string) chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.holds == nil {
		o.holds = map[string]chan struct{}{}
	}
	if o.holds[who] == nil {
		o.holds[who] = make(chan struct{}, 1)
	}
	return o.holds[who]
}

func (o *ownerDesk) setup(t *testing.T) func(a *core.Agent) {
	return func(a *core.Agent) {
		must(t, core.AddTool(a, "create_order", "Creates an order.", func(ctx context.Context, in orderIn) (string, error) {
			n := o.delivered.Add(1)
			return fmt.Sprintf("order %d: %s for %s", n, in.Item, callerName(ctx)), nil
		}, core.IdempotencyKey("requestId")))
		must(t, core.AddTool(a, "slow_order", "Creates a big order; slow.", func(ctx context.Context, in orderIn) (string, error) {
			n := o.delivered.Add(1)
			who := callerName(ctx)
			select {
			case <-o.hold(who):
				return fmt.Sprintf("slow order %d: %s for %s", n, in.Item, who), nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}, core.IdempotencyKey("requestId"), core.TaskSupport(core.TaskOptional)))
	}
}

// ownerCaller is one caller: its session, its name as handlers see it,
// and a session of the same caller on another gateway (or the same one).
type ownerCaller struct {
	cs, again *mcp.ClientSession
	who       string
}

// check runs one request id (and its variants) from callers a and b and
// fails t where one caller's id reaches the other.
func (o *ownerDesk) check(t *testing.T, id string, a, b ownerCaller) {
	t.Helper()
	order := func(cs *mcp.ClientSession, tool, rid, item string) *mcp.CallToolResult {
		t.Helper()
		return call(t, cs, tool, map[string]any{"requestId": rid, "item": item})
	}
	mine := func(who, item string) *regexp.Regexp {
		return regexp.MustCompile(`^order \d+: ` + item + ` for ` + regexp.QuoteMeta(who) + `$`)
	}
	before := o.delivered.Load()

	// The same id and arguments from two callers: two deliveries.
	rA := order(a.cs, "create_order", id, "tea")
	rB := order(b.cs, "create_order", id, "tea")
	if rA.IsError || !mine(a.who, "tea").MatchString(text(rA)) {
		t.Errorf("%s's first call = %q (isError %v), want %s's own order", a.who, text(rA), rA.IsError, a.who)
	}
	if rB.IsError || !mine(b.who, "tea").MatchString(text(rB)) {
		t.Errorf("%s's call with %s's request id = %q (isError %v), want a delivery of its own", b.who, a.who, text(rB), rB.IsError)
	}
	// Another caller's arguments: a fresh delivery, not "already used".
	other := id + "-other"
	order(a.cs, "create_order", other, "tea")
	if r := order(b.cs, "create_order", other, "coffee"); r.IsError || !mine(b.who, "coffee").MatchString(text(r)) {
		t.Errorf("%s's call with other arguments = %q (isError %v), want a delivery of its own", b.who, text(r), r.IsError)
	}
	if n := o.delivered.Load() - before; n != 4 {
		t.Errorf("%d deliveries for two request ids called by two callers, want 4", n)
	}

	// Each caller's replays still work (A's from its other session too).
	before = o.delivered.Load()
	if r := order(a.again, "create_order", id, "tea"); text(r) != text(rA) {
		t.Errorf("%s's repeat = %q, want its first result %q", a.who, text(r), text(rA))
	}
	if r := order(b.cs, "create_order", id, "tea"); text(r) != text(rB) {
		t.Errorf("%s's repeat = %q, want its first result %q", b.who, text(r), text(rB))
	}
	want := fmt.Sprintf(`requestId %q was already used for create_order with other arguments.`, id)
	if r := order(a.again, "create_order", id, "coffee"); !r.IsError || text(r) != want {
		t.Errorf("%s's own id with other arguments = %q (isError %v), want %q", a.who, text(r), r.IsError, want)
	}
	if n := o.delivered.Load() - before; n != 0 {
		t.Errorf("%d deliveries for repeats, want 0", n)
	}

	// A slow tool: A gets a job reference at the wait; B's call with the
	// same id is its own delivery, not A's job; A's job gives A's result.
	jobA := jobID(t, order(a.cs, "slow_order", id, "tea"))
	o.release(b.who)
	slow := func(who string) *regexp.Regexp {
		return regexp.MustCompile(`^slow order \d+: tea for ` + regexp.QuoteMeta(who) + `$`)
	}
	if r := order(b.cs, "slow_order", id, "tea"); r.IsError || !slow(b.who).MatchString(text(r)) {
		t.Errorf("%s's slow_order with %s's request id = %q (isError %v), want its own result", b.who, a.who, text(r), r.IsError)
	}
	if again := jobID(t, order(a.again, "slow_order", id, "tea")); again != jobA {
		t.Errorf("%s's repeat of slow_order = job %s, want its first job %s", a.who, again, jobA)
	}
	o.release(a.who)
	r := call(t, a.again, "spacefix_job", map[string]any{"jobId": jobA})
	if !slow(a.who).MatchString(text(r)) || r.IsError {
		t.Errorf("%s's job = %q (isError %v), want its own result", a.who, text(r), r.IsError)
	}
}

// The call wait of 2 s ends slow_order's wait on A's job; every other call
// answers well within it.
func TestIdempotencyPerCaller(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.settings = &store.ProjectSettings{CallWaitMs: 2000} })
	o := new(ownerDesk)
	e.startAgent(core.Options{}, o.setup(t))
	_, ann := e.newKey(store.Key{Name: "ann's laptop", Kind: store.KindClient})
	_, bob := e.newKey(store.Key{Name: "bob's laptop", Kind: store.KindClient})
	alice := newOAuthMember(t, e, "alice@example.com", store.RoleEditor)
	mallory := newOAuthMember(t, e, "mallory@example.com", store.RoleEditor)
	forEachVersion(t, func(t *testing.T, v string) {
		a, b := e.connect(v, ann, nil), e.connect(v, bob, nil)
		o.check(t, "order-1-keys-"+v, ownerCaller{a, a, "ann's laptop"}, ownerCaller{b, b, "bob's laptop"})
		a, b = e.connect(v, alice.access, nil), e.connect(v, mallory.access, nil)
		o.check(t, "order-1-people-"+v, ownerCaller{a, a, "alice@example.com"}, ownerCaller{b, b, "mallory@example.com"})
	})
}

// Two gateways on PostgreSQL and NATS: the agent on A, caller A on A
// (and again on B), caller B on B.
func TestIdempotencyPerCallerTwoGateways(t *testing.T) {
	t.Parallel()
	var pg string
	bus := startNATS(t)
	ga := newEnv(t, onPostgres(&pg), func(o *envOptions) {
		o.settings = &store.ProjectSettings{CallWaitMs: 2000}
		o.config = func(c *gateway.Config) {
			c.Bus, c.BusHeartbeat = bus, 250*time.Millisecond
			c.PublicURL, c.AllowedHosts = "https://mcp.example.com", []string{"*"} // one token for both gateways
		}
	})
	gb := ga.sibling()
	ga.url, gb.url = "http://"+ga.gw.Addr(), "http://"+gb.gw.Addr()
	o := new(ownerDesk)
	ga.startAgent(core.Options{}, o.setup(t))
	_, ann := ga.newKey(store.Key{Name: "ann's laptop", Kind: store.KindClient})
	_, bob := ga.newKey(store.Key{Name: "bob's laptop", Kind: store.KindClient})
	alice := newOAuthMember(t, ga, "alice@example.com", store.RoleEditor)
	mallory := newOAuthMember(t, ga, "mallory@example.com", store.RoleEditor)
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			for _, pair := range []struct {
				name             string
				aSecret, bSecret string
				aWho, bWho       string
			}{
				{"keys", ann, bob, "ann's laptop", "bob's laptop"},
				{"people", alice.access, mallory.access, "alice@example.com", "mallory@example.com"},
			} {
				a, aAgain, b := ga.connect(v, pair.aSecret, nil), gb.connect(v, pair.aSecret, nil), gb.connect(v, pair.bSecret, nil)
				waitFor(t, "B to list create_order", func() bool { return len(toolNames(t, b)) >= 3 })
				o.check(t, "order-1-"+pair.name+"-"+v, ownerCaller{a, aAgain, pair.aWho}, ownerCaller{b, b, pair.bWho})
			}
		})
	}
}
