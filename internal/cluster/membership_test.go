package cluster

import (
	"encoding/json"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/schema"
	"github.com/spacefix/spacefix/internal/secrets"
)

// offBus returns gateway id's part of the bus without joining it: its
// bookkeeping works on a real registry, and nothing may be sent (no NATS
// connection), so a test reaches only what the bus handlers decide.
func offBus(t *testing.T, id string) *Cluster {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	ch := changes.New(log)
	return newCluster(Options{
		Gateway: id, Addr: "127.0.0.1:1",
		Registry: agents.New(&agents.Options{Changes: ch, Logger: log}), Changes: ch,
		Compile:   func(*agentproto.Registration) (map[string]*schema.Schema, error) { return nil, nil },
		Heartbeat: testBeat, Logger: log,
	})
}

// mirroredIDs returns the ids of the replicas reg holds for other
// gateways, sorted.
func mirroredIDs(reg *agents.Registry) []string {
	ids := []string{}
	for _, rep := range reg.All() {
		if rep.Gateway != "" {
			ids = append(ids, rep.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// mirrored returns reg's entry of replica id held by another gateway, or
// nil.
func mirrored(reg *agents.Registry, id string) *agents.Replica {
	for _, rep := range reg.All() {
		if rep.ID == id && rep.Gateway != "" {
			return rep
		}
	}
	return nil
}

// testReg is the registration of the replicas in these tests.
var testReg = &agentproto.Registration{Tools: []agentproto.Tool{
	{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
	{Name: "hang", InputSchema: json.RawMessage(`{"type":"object"}`)},
}}

// up is the announcement of replica id by gateway gw, number seq.
func up(gw, id string, seq uint64) repMsg {
	return repMsg{Op: "up", Gw: gw, Seq: seq, Rep: repInfo{ID: id, Gateway: gw, Project: 1, AgentKey: "key_a", Reg: testReg}}
}

// A heartbeat from a gateway not heard of adds it, at the address it
// gives; the next one from it is not new.
func TestHeartbeatFromNewPeerAddsIt(t *testing.T) {
	c := offBus(t, "gw-a")
	if isNew, _, _ := c.heard(heartbeat{Gw: "gw-b", Addr: "10.0.0.2:8080", EveryMs: 100}); !isNew {
		t.Error("the first heartbeat of gw-b was not new")
	}
	if got := c.Peers(); got != 1 {
		t.Errorf("Peers() = %d after a heartbeat, want 1", got)
	}
	if addr, ok := c.PeerAddr("gw-b"); addr != "10.0.0.2:8080" || !ok {
		t.Errorf("PeerAddr(gw-b) = %q, %v; want 10.0.0.2:8080, true", addr, ok)
	}
	if isNew, _, _ := c.heard(heartbeat{Gw: "gw-b", Addr: "10.0.0.2:8080", EveryMs: 100}); isNew {
		t.Error("the second heartbeat of gw-b was new again")
	}
	if got := c.Peers(); got != 1 {
		t.Errorf("Peers() = %d after two heartbeats of one gateway, want 1", got)
	}
	if _, ok := c.PeerAddr("gw-c"); ok {
		t.Error("PeerAddr of a gateway never heard of is known")
	}
}

// A heartbeat heard once Close began adds nobody.
func TestHeartbeatAfterCloseIgnored(t *testing.T) {
	c := offBus(t, "gw-a")
	c.closed = true
	if isNew, ask, lost := c.heard(heartbeat{Gw: "gw-b", Seq: 3, EveryMs: 100}); isNew || ask != nil || lost {
		t.Errorf("heard after Close = %v, %+v, %v; want nothing", isNew, ask, lost)
	}
	if got := c.Peers(); got != 0 {
		t.Errorf("Peers() = %d, want 0", got)
	}
}

// A gateway that stops beating is dropped once three of its intervals
// passed without a word, not before: its mirrored replicas leave the
// registry and their connections end. One that keeps beating stays.
func TestSilentPeerDroppedWithItsReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := offBus(t, "gw-a")
		reg := c.opts.Registry
		for _, gw := range []string{"gw-b", "gw-c"} {
			c.heard(heartbeat{Gw: gw, EveryMs: 100})
		}
		for seq, id := range []string{"r1", "r2"} {
			c.apply(up("gw-b", id, uint64(seq+1)))
		}
		c.apply(up("gw-c", "r3", 1))
		if got := mirroredIDs(reg); !slices.Equal(got, []string{"r1", "r2", "r3"}) {
			t.Fatalf("mirrored %v, want r1, r2, r3", got)
		}
		r1 := mirrored(reg, "r1")

		// gw-c beats every 100 ms, gw-b says nothing more.
		for range 3 {
			time.Sleep(100 * time.Millisecond)
			c.heard(heartbeat{Gw: "gw-c", EveryMs: 100})
			c.dropSilent()
		}
		if got := c.Peers(); got != 2 {
			t.Fatalf("Peers() = %d exactly three intervals after gw-b's last heartbeat, want 2", got)
		}
		time.Sleep(time.Millisecond)
		c.dropSilent()
		if got := c.Peers(); got != 1 {
			t.Errorf("Peers() = %d once gw-b missed three heartbeats, want 1", got)
		}
		if _, ok := c.PeerAddr("gw-b"); ok {
			t.Error("gw-b is still a peer")
		}
		if got := mirroredIDs(reg); !slices.Equal(got, []string{"r3"}) {
			t.Errorf("mirrored %v after gw-b was dropped, want r3", got)
		}
		select {
		case <-r1.Conn.Done():
		default:
			t.Error("the connection of gw-b's replica r1 did not end")
		}
	})
}

// A peer that did not say its interval is dropped after three of this
// gateway's.
func TestMembersSilentDefaultInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := make(members)
		quiet, _ := ms.get("gw-b") // never said its interval
		slow, _ := ms.get("gw-c")
		slow.every = time.Second
		time.Sleep(300*time.Millisecond + time.Nanosecond)
		gone := ms.silent(100 * time.Millisecond)
		if len(gone) != 1 || gone[0] != quiet {
			t.Fatalf("silent after 300 ms = %v, want gw-b alone", gone)
		}
		if _, ok := ms["gw-b"]; ok {
			t.Error("gw-b was returned but not taken out")
		}
		time.Sleep(3 * time.Second)
		if gone := ms.silent(100 * time.Millisecond); len(gone) != 1 || gone[0] != slow {
			t.Errorf("silent after 3.3 s = %v, want gw-c", gone)
		}
		if len(ms) != 0 {
			t.Errorf("%d members left, want 0", len(ms))
		}
	})
}

// With a key file, a peer's address is used only when its heartbeat signs
// it with one of the file's keys: a gateway of another key file, or a
// party on the bus posing as a gateway, has nothing forwarded to it, and
// is not spared the per-address cap.
func TestHeartbeatAddressMustBeSigned(t *testing.T) {
	k1, k2 := secrets.NewKey(), secrets.NewKey()
	c := offBus(t, "gw-a")
	c.opts.Peers = NewForwardAuth(testBox(t, k1, k2), nil)
	same := NewForwardAuth(testBox(t, k2, k1), nil) // the file after a rotation
	other := NewForwardAuth(testBox(t, secrets.NewKey()), nil)
	for _, hb := range []heartbeat{
		{Gw: "gw-b", Addr: "10.0.0.2:8080", AddrMAC: same.SignAddr("gw-b", "10.0.0.2:8080")},
		{Gw: "gw-c", Addr: "10.0.0.3:8080", AddrMAC: other.SignAddr("gw-c", "10.0.0.3:8080")},
		{Gw: "gw-d", Addr: "10.0.0.4:8080"},
		{Gw: "gw-e", Addr: "10.0.0.5:8080", AddrMAC: same.SignAddr("gw-b", "10.0.0.2:8080")},
	} {
		hb.EveryMs = 100
		c.heard(hb)
	}
	if got := c.Peers(); got != 4 {
		t.Errorf("Peers() = %d, want 4: every heartbeat is heard", got)
	}
	if addr, ok := c.PeerAddr("gw-b"); addr != "10.0.0.2:8080" || !ok {
		t.Errorf("PeerAddr(gw-b) = %q, %v; want its signed address", addr, ok)
	}
	for _, gw := range []string{"gw-c", "gw-d", "gw-e"} {
		if addr, ok := c.PeerAddr(gw); ok {
			t.Errorf("PeerAddr(%s) = %q: an address not signed with the key file is used", gw, addr)
		}
	}
	for ip, want := range map[string]bool{"10.0.0.2": true, "10.0.0.3": false, "10.0.0.4": false, "10.0.0.5": false} {
		if got := c.IsPeerIP(netip.MustParseAddr(ip)); got != want {
			t.Errorf("IsPeerIP(%s) = %v, want %v", ip, got, want)
		}
	}
	// A forged heartbeat cannot move gw-b's address; gw-b's own next one
	// puts it back.
	c.heard(heartbeat{Gw: "gw-b", Addr: "10.6.6.6:80", EveryMs: 100})
	if addr, ok := c.PeerAddr("gw-b"); ok {
		t.Errorf("after a forged heartbeat PeerAddr(gw-b) = %q", addr)
	}
	c.heard(heartbeat{Gw: "gw-b", Addr: "10.0.0.2:8080", AddrMAC: same.SignAddr("gw-b", "10.0.0.2:8080"), EveryMs: 100})
	if addr, ok := c.PeerAddr("gw-b"); addr != "10.0.0.2:8080" || !ok {
		t.Errorf("PeerAddr(gw-b) = %q, %v after its own heartbeat", addr, ok)
	}
}
