package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/agents"
)

// LooseInput is t1's input in v2 of the rolling deploy below: the id may be
// a number there.
type LooseInput struct {
	ID any `json:"id"`
}

// A rolling deploy: v1 of an agent offers t1 and t2, v2 (same agent key)
// offers t1 only. While both are connected the listing is the union; when
// v2 leaves, t2 still works on v1. This used to crash the gateway with a
// nil pointer in the validator (v1's t2 had no schema left).
func TestReplicasDifferentToolSets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	v1 := e.startAgent(core.Options{Instance: "v1"}, func(a *core.Agent) {
		must(t, core.AddTool(a, "t1", "One.", func(ctx context.Context, in GetOrderInput) (string, error) { return "v1 t1 " + in.ID, nil }))
		must(t, core.AddTool(a, "t2", "Two.", func(ctx context.Context, in GetOrderInput) (string, error) { return "v1 t2 " + in.ID, nil }))
	})
	defer v1.stop()
	v2 := e.startAgent(core.Options{Instance: "v2"}, func(a *core.Agent) {
		must(t, core.AddTool(a, "t1", "One.", func(ctx context.Context, in LooseInput) (string, error) { return "v2 t1", nil }))
	})
	cs := e.connect("2025-11-25", e.clientKey, nil)
	if diff := cmp.Diff([]string{"t1", "t2"}, toolNames(t, cs)); diff != "" {
		t.Fatalf("tools with v1 and v2 connected (-want +got):\n%s", diff)
	}
	// t2 goes only to the replica that offers it.
	for range 6 {
		if got := text(call(t, cs, "t2", map[string]any{"id": "1"})); got != "v1 t2 1" {
			t.Fatalf("t2 answered %q, want v1's answer", got)
		}
	}
	// Each replica validates with its own schema: v1 wants a string id,
	// v2 takes a number.
	res := call(t, cs, "t1", map[string]any{"id": 7, "instance": "v1"})
	if want := "Input validation error: Invalid arguments for tool t1: data/id must be string"; !res.IsError || text(res) != want {
		t.Errorf("t1 on v1 with a number id = isError %v %q, want %q", res.IsError, text(res), want)
	}
	if res := call(t, cs, "t1", map[string]any{"id": 7, "instance": "v2"}); res.IsError || text(res) != "v2 t1" {
		t.Errorf("t1 on v2 with a number id = isError %v %q, want v2's answer", res.IsError, text(res))
	}

	v2.stop()
	waitFor(t, "v2 to leave", func() bool { return len(e.gw.Registry().All()) == 1 })
	for _, name := range []string{"t2", "t1"} {
		if got := text(call(t, cs, name, map[string]any{"id": "2"})); got != "v1 "+name+" 2" {
			t.Errorf("%s after v2 left answered %q, want v1's answer", name, got)
		}
	}
	// The gateway is still there.
	if diff := cmp.Diff([]string{"t1", "t2"}, toolNames(t, cs)); diff != "" {
		t.Errorf("tools after v2 left (-want +got):\n%s", diff)
	}
}

// Two different services started with one agent key: one WARN names the
// key, the tool and what differs.
func TestReplicasDifferWarn(t *testing.T) {
	t.Parallel()
	logs := new(syncBuffer)
	e := newEnv(t, func(o *envOptions) { o.logs = logs })
	e.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOrderTools(a)) })
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "get_order",
			"Look up one order by its id. Returns the order, or an error if no order has that id. "+
				"To find orders by customer, use search_orders instead.",
			func(ctx context.Context, in GetOrderInput) (Order, error) { return Order{}, nil }))
	})
	waitFor(t, "the warning", func() bool { return strings.Contains(logs.String(), "level=WARN") })
	var warns []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") {
			warns = append(warns, l)
		}
	}
	if len(warns) != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", len(warns), strings.Join(warns, "\n"))
	}
	for _, want := range []string{"agent=" + e.gw.Registry().All()[0].AgentKey, "tool=get_order", `differs="annotations.readOnlyHint: unset vs true"`, "spacefix keys create --kind agent"} {
		if !strings.Contains(warns[0], want) {
			t.Errorf("warning lacks %q: %s", want, warns[0])
		}
	}
}

// Run-time enable/disable is each replica's own: replica A switches a tool
// off, replica B switches it on, and the tool stays listed with every call
// going to B. When A reconnects it registers with its own state (off), and
// B's is untouched.
func TestSetEnabledPerReplica(t *testing.T) {
	e := newEnv(t)
	who := func(name string) func(a *core.Agent) {
		return func(a *core.Agent) {
			must(t, core.AddTool(a, "who", "Says which replica answers.", func(ctx context.Context, in Empty) (string, error) { return name, nil }))
		}
	}
	a := e.startAgent(core.Options{Instance: "a"}, who("a"))
	b := e.startAgent(core.Options{Instance: "b"}, who("b"))
	cs := e.connect("2025-11-25", e.clientKey, nil)
	replicas := func() []string {
		var out []string
		if tool := e.gw.Registry().Snapshot(e.project.ID).Tools["who"]; tool != nil {
			for _, r := range tool.Replicas {
				out = append(out, r.Instance)
			}
		}
		slices.Sort(out)
		return out
	}
	waitFor(t, "both replicas to serve who", func() bool { return slices.Equal(replicas(), []string{"a", "b"}) })

	must(t, a.agent.SetEnabled("who", false))
	must(t, b.agent.SetEnabled("who", true))
	waitFor(t, "only b to serve who", func() bool { return slices.Equal(replicas(), []string{"b"}) })
	calls := func(when string) {
		t.Helper()
		if diff := cmp.Diff([]string{"who"}, toolNames(t, cs)); diff != "" {
			t.Fatalf("tools %s (-want +got):\n%s", when, diff)
		}
		for range 6 {
			if got := text(call(t, cs, "who", nil)); got != "b" {
				t.Fatalf("who %s answered %q, want b (a switched it off)", when, got)
			}
		}
	}
	calls("after a switched it off and b on")

	// A's connection drops; it reconnects and registers with its own state.
	var old *agents.Replica
	for _, r := range e.gw.Registry().All() {
		if r.Instance == "a" {
			old = r
		}
	}
	if old == nil {
		t.Fatal("replica a is not connected")
	}
	old.Conn.Close("the test drops the connection")
	waitFor(t, "a to reconnect", func() bool {
		return slices.ContainsFunc(e.gw.Registry().All(), func(r *agents.Replica) bool { return r.Instance == "a" && r != old })
	})
	if diff := cmp.Diff([]string{"b"}, replicas()); diff != "" {
		t.Fatalf("replicas serving who after a reconnected (-want +got):\n%s", diff)
	}
	calls("after a reconnected")

	// Each side switches back on its own.
	must(t, a.agent.SetEnabled("who", true))
	must(t, b.agent.SetEnabled("who", false))
	waitFor(t, "only a to serve who", func() bool { return slices.Equal(replicas(), []string{"a"}) })
	for range 6 {
		if got := text(call(t, cs, "who", nil)); got != "a" {
			t.Fatalf("who answered %q, want a (b switched it off)", got)
		}
	}
}
