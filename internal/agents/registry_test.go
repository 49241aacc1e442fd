package agents

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/agentproto"
)

type nopConn struct{}

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

func TestGraceExpires(t *testing.T) {
	r := New(&Options{Grace: 30 * time.Millisecond})
	a := replica("r1", "k1", reg("a", false, "get"))
	r.Add(a, nil)
	snap := r.Snapshot(1)
	r.Remove(a)
	select {
	case <-snap.Changed:
	default:
		t.Fatal("the old snapshot's Changed was not closed")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(r.Snapshot(1).ToolList) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("tool still listed long after the grace period")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSetEnabledAndReplicaDisable(t *testing.T) {
	r := New(nil)
	a := replica("r1", "k1", reg("a", false, "get", "put"))
	b := replica("r2", "k1", reg("a", false, "get", "put"))
	r.Add(a, nil)
	r.Add(b, nil)
	if err := r.SetEnabled(1, "k1", "put", false); err != nil {
		t.Fatal(err)
	}
	if r.Snapshot(1).Tools["put"].Enabled {
		t.Error("put still enabled")
	}
	if err := r.SetEnabled(1, "k1", "nope", false); err == nil {
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
