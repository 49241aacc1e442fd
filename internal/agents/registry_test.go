package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/schema"
)

// nopConn is a connection the registry only ever closes.
type nopConn struct{ Conn }

func (nopConn) Close(string) {}

func replica(id, agentKey string, reg *agentproto.Registration) *Replica {
	return &Replica{ID: id, ProjectID: 1, AgentKey: agentKey, Reg: reg, Conn: nopConn{}, Since: time.Now()}
}

func reg(name string, namespace bool, tools ...string) *agentproto.Registration {
	r := &agentproto.Registration{Protocol: agentproto.Version, Name: name, Namespace: namespace}
	for _, t := range tools {
		r.Tools = append(r.Tools, agentproto.Tool{Name: t, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	return r
}

func names(s *Snapshot) []string {
	var out []string
	for _, t := range s.ToolList {
		out = append(out, t.Name)
	}
	return out
}

func TestExposedNames(t *testing.T) {
	r := New(&Options{Grace: time.Hour})
	r.Add(replica("r1", "k1", reg("orders", false, "get", "list")), nil)
	r.Add(replica("r2", "k2", reg("shop", false, "get")), nil)
	r.Add(replica("r3", "k3", reg("test-radar", true, "run_tests")), nil)
	r.Add(replica("r4", "k4", reg("more", false, "get")), nil)
	want := []string{"get", "get_2", "get_3", "list", "test_radar_run_tests"}
	if diff := cmp.Diff(want, names(r.Snapshot(1))); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if got := r.Snapshot(1).Tools["get_2"].AgentKey; got != "k2" {
		t.Errorf("get_2 belongs to %s, want k2 (registered second)", got)
	}
}

func TestNamesStableAcrossReconnect(t *testing.T) {
	r := New(&Options{Grace: time.Hour})
	a := replica("r1", "k1", reg("a", false, "get"))
	r.Add(a, nil)
	b := replica("r2", "k2", reg("b", false, "get"))
	r.Add(b, nil)
	r.Remove(a) // k1 restarts: its name is kept through the grace period
	snap := r.Snapshot(1)
	if tl := snap.Tools["get"]; tl == nil || tl.AgentKey != "k1" || len(tl.Replicas) != 0 || tl.GraceUntil.IsZero() {
		t.Fatalf("during grace, get = %+v; want k1's, listed without replicas", tl)
	}
	r.Add(replica("r3", "k1", reg("a", false, "get")), nil)
	snap = r.Snapshot(1)
	if snap.Tools["get"].AgentKey != "k1" || snap.Tools["get_2"].AgentKey != "k2" {
		t.Errorf("after reconnect get→%s get_2→%s; want k1, k2", snap.Tools["get"].AgentKey, snap.Tools["get_2"].AgentKey)
	}
}

// A tool outlives its last replica by the grace period, and no longer.
func TestGraceExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace = 30 * time.Millisecond
		r := New(&Options{Grace: grace})
		a := replica("r1", "k1", reg("a", false, "get"))
		r.Add(a, nil)
		snap := r.Snapshot(1)
		r.Remove(a)
		select {
		case <-snap.Changed:
		default:
			t.Fatal("the old snapshot's Changed was not closed")
		}
		time.Sleep(grace - time.Nanosecond)
		synctest.Wait()
		if n := len(r.Snapshot(1).ToolList); n != 1 {
			t.Fatalf("just before the grace period ends, %d tools listed, want 1", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if n := len(r.Snapshot(1).ToolList); n != 0 {
			t.Errorf("once the grace period ended, %d tools listed, want none", n)
		}
	})
}

func TestSetEnabledAndReplicaDisable(t *testing.T) {
	r := New(nil)
	a := replica("r1", "k1", reg("a", false, "get", "put"))
	b := replica("r2", "k1", reg("a", false, "get", "put"))
	r.Add(a, nil)
	r.Add(b, nil)
	for _, rep := range []*Replica{a, b} {
		if err := r.SetEnabled(rep, "put", false); err != nil {
			t.Fatal(err)
		}
	}
	if r.Snapshot(1).Tools["put"].Enabled {
		t.Error("put still enabled")
	}
	if err := r.SetEnabled(a, "nope", false); err == nil {
		t.Error("SetEnabled of an unknown tool: no error")
	}
	r.SetReplicaDisabled(a, true)
	reps := r.Snapshot(1).Tools["get"].Replicas
	if len(reps) != 1 || reps[0] != b {
		t.Errorf("replicas after disabling r1 = %v, want only r2", reps)
	}
	if !slices.Contains(r.Replicas(1), a) {
		t.Error("a disabled replica is still connected and must be listed")
	}
}

func replicaIDs(reps []*Replica) []string {
	out := []string{}
	for _, r := range reps {
		out = append(out, r.ID)
	}
	return out
}

// A rolling deploy: v1 offers t1 and t2, v2 only t1. Each keeps its own
// definitions and schemas, whichever leaves first.
func TestReplicasDifferentToolSets(t *testing.T) {
	schemas := func(tools ...string) map[string]*schema.Schema {
		m := map[string]*schema.Schema{}
		for _, n := range tools {
			s, err := schema.Compile(json.RawMessage(`{"type":"object"}`))
			if err != nil {
				t.Fatal(err)
			}
			m[n] = s
		}
		return m
	}
	for _, leaves := range []string{"v2", "v1"} {
		t.Run(leaves+" leaves", func(t *testing.T) {
			r := New(&Options{Grace: time.Hour})
			v1 := replica("v1", "k1", reg("orders", false, "t1", "t2"))
			v2 := replica("v2", "k1", reg("orders", false, "t1"))
			v2.Reg.Tools[0].Description = "newer"
			r.Add(v1, schemas("t1", "t2"))
			r.Add(v2, schemas("t1"))
			snap := r.Snapshot(1)
			if diff := cmp.Diff([]string{"t1", "t2"}, names(snap)); diff != "" {
				t.Fatalf("listing with both connected (-want +got):\n%s", diff)
			}
			if got := snap.Tools["t1"].Def.Description; got != "newer" {
				t.Errorf("t1 lists %q; want the newest replica's definition", got)
			}
			if diff := cmp.Diff([]string{"v1", "v2"}, replicaIDs(snap.Tools["t1"].Replicas)); diff != "" {
				t.Errorf("t1 replicas (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"v1"}, replicaIDs(snap.Tools["t2"].Replicas)); diff != "" {
				t.Errorf("t2 replicas (-want +got):\n%s", diff)
			}
			gone, stays := v2, v1
			if leaves == "v1" {
				gone, stays = v1, v2
			}
			r.Remove(gone)
			snap = r.Snapshot(1)
			if diff := cmp.Diff([]string{"t1", "t2"}, names(snap)); diff != "" {
				t.Fatalf("listing after %s left (-want +got):\n%s", leaves, diff)
			}
			for _, tl := range snap.ToolList {
				if tl.Schema == nil {
					t.Errorf("%s has no schema", tl.Name)
				}
				for _, rep := range tl.Replicas {
					if rep != stays || tl.SchemaOn(rep) == nil {
						t.Errorf("%s routed to %s (schema %v); want only %s, with its schema", tl.Name, rep.ID, tl.SchemaOn(rep), stays.ID)
					}
				}
			}
			if leaves == "v1" {
				t2 := snap.Tools["t2"]
				if len(t2.Replicas) != 0 || t2.GraceUntil.IsZero() {
					t.Errorf("t2 after its only replica left: %d replicas, grace until %v; want none, in its grace period", len(t2.Replicas), t2.GraceUntil)
				}
			}
		})
	}
}

// set_enabled is each replica's own.
func TestReplicasSetEnabledPerReplica(t *testing.T) {
	r := New(nil)
	a := replica("r1", "k1", reg("a", false, "put"))
	b := replica("r2", "k1", reg("a", false, "put"))
	r.Add(a, nil)
	r.Add(b, nil)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.SetEnabled(a, "put", false))
	put := r.Snapshot(1).Tools["put"]
	if !put.Enabled || len(put.Replicas) != 1 || put.Replicas[0] != b {
		t.Errorf("after r1 switched put off: enabled %v, replicas %v; want enabled, only r2", put.Enabled, replicaIDs(put.Replicas))
	}
	must(r.SetEnabled(b, "put", false))
	if r.Snapshot(1).Tools["put"].Enabled {
		t.Error("put enabled although every replica switched it off")
	}
	must(r.SetEnabled(a, "put", true))
	if put := r.Snapshot(1).Tools["put"]; !put.Enabled || len(put.Replicas) != 1 || put.Replicas[0] != a {
		t.Errorf("after r1 switched put on again: enabled %v, replicas %v; want enabled, only r1", put.Enabled, replicaIDs(put.Replicas))
	}
}

// Replicas that register different definitions of a tool are shown and
// logged once.
func TestReplicasDiffer(t *testing.T) {
	var logs bytes.Buffer
	r := New(&Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	yes, no := true, false
	v1 := replica("v1", "k1", reg("orders", false, "get_order"))
	v1.Reg.Tools[0].Annotations = &agentproto.Annotations{ReadOnlyHint: &yes}
	v2 := replica("v2", "k1", reg("orders", false, "get_order"))
	v2.Reg.Tools[0].Annotations = &agentproto.Annotations{ReadOnlyHint: &no}
	v2.Reg.Tools[0].Description = "Gets an order."
	r.Add(v1, nil)
	r.Add(v2, nil)
	want := []string{`description: "Gets an order." vs ""`, "annotations.readOnlyHint: false vs true"}
	got := r.Snapshot(1).Tools["get_order"].Differs
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("differences (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"description", "readOnlyHint"}, DifferingFields(got)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	r.SetReplicaDisabled(v1, true) // a rebuild that changes nothing about the difference
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logs.String())
	}
	for _, s := range []string{"agent=k1", "tool=get_order", "annotations.readOnlyHint: false vs true", "spacefix keys create --kind agent"} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("warning lacks %q:\n%s", s, logs.String())
		}
	}
	r.Remove(v2)
	if d := r.Snapshot(1).Tools["get_order"].Differs; len(d) != 0 {
		t.Errorf("differences with one replica left: %v", d)
	}
}

// Resources and prompts, too, go only to the replicas that offer them.
func TestReplicasResourcesAndPrompts(t *testing.T) {
	r := New(&Options{Grace: time.Hour})
	v1 := replica("v1", "k1", reg("orders", false))
	v1.Reg.Resources = []agentproto.Resource{{URI: "orders://open", Name: "Open orders"}}
	v1.Reg.Prompts = []agentproto.Prompt{{Name: "summarise_order"}}
	v2 := replica("v2", "k1", reg("orders", false, "get"))
	r.Add(v1, nil)
	r.Add(v2, nil)
	snap := r.Snapshot(1)
	if diff := cmp.Diff([]string{"v1"}, replicaIDs(snap.Resources["orders://open"].Replicas)); diff != "" {
		t.Errorf("resource replicas (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"v1"}, replicaIDs(snap.Prompts["summarise_order"].Replicas)); diff != "" {
		t.Errorf("prompt replicas (-want +got):\n%s", diff)
	}
	r.Remove(v1)
	snap = r.Snapshot(1)
	if res := snap.Resources["orders://open"]; res == nil || len(res.Replicas) != 0 || res.GraceUntil.IsZero() {
		t.Errorf("resource after its only replica left = %+v; want listed in its grace period, without replicas", res)
	}
}

// TestConnectStormGathersChanges: agents that register while the snapshot
// is being rebuilt wait for one rebuild that takes them all, so a storm of
// N connecting agents costs a few rebuilds and publications, not N (each
// O(N), re-syncing every client's view). Every Add still returns only once
// its replica is in the snapshot.
func TestConnectStormGathersChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := changes.New(nil)
		r := New(&Options{Grace: time.Hour, Changes: bus})
		var mu sync.Mutex
		var heard []changes.Change
		hold := make(chan struct{})
		first := true
		bus.Subscribe(func(c changes.Change) {
			mu.Lock()
			heard = append(heard, c)
			wait := first
			first = false
			mu.Unlock()
			if wait {
				<-hold // the first rebuild is slow: the others arrive meanwhile
			}
		})

		const n = 200
		var wg sync.WaitGroup
		wg.Go(func() { r.Add(replica("r0", "k0", reg("a0", true, "t")), nil) })
		synctest.Wait() // r0's rebuild is held in the subscriber
		if !r.flushing(1) {
			t.Fatal("r0's Add is held, and no rebuild is under way")
		}
		added := make(chan string, n)
		for i := 1; i <= n; i++ {
			wg.Go(func() {
				k := fmt.Sprintf("k%d", i)
				r.Add(replica(fmt.Sprintf("r%d", i), k, reg(fmt.Sprintf("a%d", i), true, "t")), nil)
				if _, ok := r.Snapshot(1).Tools[fmt.Sprintf("a%d_t", i)]; !ok {
					t.Errorf("Add of %s returned before its tool was in the snapshot", k)
				}
				added <- k
			})
		}
		synctest.Wait() // every Add waits for the rebuild after r0's
		if got := r.pending(1); got != n {
			t.Errorf("%d agent keys wait for the next rebuild, want %d", got, n)
		}
		if len(added) != 0 {
			t.Errorf("%d Adds returned while the rebuild that must include them was held", len(added))
		}
		close(hold)
		wg.Wait()

		if got := len(r.Snapshot(1).ToolList); got != n+1 {
			t.Errorf("snapshot lists %d tools, want %d", got, n+1)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(heard) > 3 {
			t.Fatalf("%d publications for %d connecting agents, want at most 3", len(heard), n+1)
		}
		seen := map[string]bool{}
		for _, c := range heard {
			if c.Kind != changes.AgentConnected {
				t.Errorf("change kind %s, want %s", c.Kind, changes.AgentConnected)
			}
			for _, k := range c.AgentKeys {
				seen[k] = true
			}
		}
		if len(seen) != n+1 {
			t.Errorf("the changes name %d agent keys, want %d", len(seen), n+1)
		}
	})
}

// Gateways sharing a store mirror each other's agents, and may hear of an
// agent that registered earlier after one that registered later. Every
// gateway ends with the names of the order of registration: the agent
// registered first keeps the contested name, whatever order a gateway
// heard of them in.
func TestContestedNamesFollowRegistration(t *testing.T) {
	t0 := time.Now()
	at := func(id, key string, since time.Time, tools ...string) *Replica {
		rep := replica(id, key, reg(key, false, tools...))
		rep.Since = since
		return rep
	}
	heardInOrder := New(&Options{Grace: time.Hour})
	heardInOrder.Add(at("r1", "k1", t0, "get", "list"), nil)
	heardInOrder.Add(at("r2", "k2", t0.Add(time.Second), "get"), nil)
	heardInOrder.Add(at("r3", "k3", t0.Add(2*time.Second), "get"), nil)

	heardLate := New(&Options{Grace: time.Hour})
	heardLate.Add(at("r3", "k3", t0.Add(2*time.Second), "get"), nil)
	heardLate.Add(at("r2", "k2", t0.Add(time.Second), "get"), nil)
	if got := heardLate.Snapshot(1).Tools["get"].AgentKey; got != "k2" {
		t.Errorf("get belongs to %s before k1 is heard of, want k2 (registered before k3)", got)
	}
	heardLate.Add(at("r1", "k1", t0, "get", "list"), nil)

	for _, r := range []*Registry{heardInOrder, heardLate} {
		s := r.Snapshot(1)
		got := map[string]string{}
		for name, tool := range s.Tools {
			got[name] = tool.AgentKey
		}
		want := map[string]string{"get": "k1", "list": "k1", "get_2": "k2", "get_3": "k3"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("names (-want +got):\n%s", diff)
		}
	}

	// An older replica of an agent, heard of late, moves the agent up.
	r := New(&Options{Grace: time.Hour})
	r.Add(at("r1", "k1", t0.Add(time.Second), "get"), nil)
	r.Add(at("r2", "k2", t0.Add(2*time.Second), "get"), nil)
	r.Add(at("r0", "k2", t0, "get"), nil)
	if got := r.Snapshot(1).Tools["get"].AgentKey; got != "k2" {
		t.Errorf("get belongs to %s, want k2: one of its replicas registered first", got)
	}
}

// When the agent that held a contested name leaves for good (its grace
// period over), the next in order of registration takes it, on every
// gateway alike.
func TestContestedNameHolderGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(&Options{Grace: time.Millisecond})
		x := replica("r1", "k1", reg("x", false, "get"))
		r.Add(x, nil)
		r.Add(replica("r2", "k2", reg("y", false, "get")), nil)
		r.Add(replica("r3", "k3", reg("z", false, "get")), nil)
		r.Remove(x)
		time.Sleep(time.Millisecond) // the grace period
		synctest.Wait()
		s := r.Snapshot(1)
		if s.Tools["get"] == nil || s.Tools["get"].AgentKey != "k2" || s.Tools["get_2"] == nil || s.Tools["get_2"].AgentKey != "k3" || s.Tools["get_3"] != nil {
			t.Errorf("after k1 left: %v, want get→k2, get_2→k3", names(s))
		}
	})
}
