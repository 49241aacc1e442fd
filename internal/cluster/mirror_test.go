package cluster

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/agents"
)

// idsDigest is the digest of a holder's replicas with these ids.
func idsDigest(ids ...string) string {
	reps := make(map[string]*agents.Replica, len(ids))
	for _, id := range ids {
		reps[id] = nil
	}
	return digest(reps)
}

// sorted returns a resync request with its ids sorted, for comparing.
func sorted(msg *syncMsg) *syncMsg {
	if msg == nil {
		return nil
	}
	cp := *msg
	cp.IDs = slices.Clone(msg.IDs)
	slices.Sort(cp.IDs)
	return &cp
}

// Announcements applied in order build the mirror: up adds, changed sets
// the state, down removes; none asks for a resync.
func TestAnnouncementsAppliedInOrder(t *testing.T) {
	c := offBus(t, "gw-a")
	reg := c.opts.Registry
	if ask := c.apply(up("gw-b", "r1", 1)); ask != nil {
		t.Errorf("the first announcement asked for a resync: %+v", ask)
	}
	r1 := mirrored(reg, "r1")
	for _, ann := range []repMsg{
		up("gw-b", "r2", 2),
		{Op: "changed", Gw: "gw-b", Seq: 3, Rep: repInfo{ID: "r1", Gateway: "gw-b", Off: []string{"hang"}}},
		{Op: "down", Gw: "gw-b", Seq: 4, Rep: repInfo{ID: "r2"}},
		up("gw-b", "r1", 5), // again, as a resync answers: the same entry stays
	} {
		if ask := c.apply(ann); ask != nil {
			t.Errorf("%s %s (number %d) asked for a resync: %+v", ann.Op, ann.Rep.ID, ann.Seq, ask)
		}
	}
	if got := mirroredIDs(reg); !slices.Equal(got, []string{"r1"}) {
		t.Errorf("mirrored %v, want r1", got)
	}
	if got := mirrored(reg, "r1"); got != r1 {
		t.Error("an up for a replica mirrored already replaced its entry")
	}
	if got := reg.Off(r1); !slices.Equal(got, []string{}) {
		t.Errorf("r1's tools off = %v after the up that said none, want none", got)
	}
	if got := c.peers["gw-b"].mirror.seq; got != 5 {
		t.Errorf("the mirror applied up to number %d, want 5", got)
	}
}

// A "changed" sets the tools switched off and the disabled flag the holder
// announced.
func TestChangedAnnouncementSetsState(t *testing.T) {
	c := offBus(t, "gw-a")
	reg := c.opts.Registry
	c.apply(up("gw-b", "r1", 1))
	c.apply(repMsg{Op: "changed", Gw: "gw-b", Seq: 2, Rep: repInfo{ID: "r1", Gateway: "gw-b", Off: []string{"hang"}, Disabled: true}})
	r1 := mirrored(reg, "r1")
	if got := reg.Off(r1); !slices.Equal(got, []string{"hang"}) {
		t.Errorf("r1's tools off = %v, want hang", got)
	}
	if !r1.Disabled() {
		t.Error("r1 is not disabled")
	}
}

// An announcement whose number skips one says some were lost: the holder
// is asked for what differs, listing what the mirror has, and for the
// state of the rest (a lost one may have been a "changed").
func TestAnnouncementGapAsksResync(t *testing.T) {
	c := offBus(t, "gw-a")
	c.apply(up("gw-b", "r1", 1))
	ask := c.apply(up("gw-b", "r3", 3)) // number 2 lost
	want := &syncMsg{Gw: "gw-a", IDs: []string{"r1", "r3"}, State: true}
	if diff := cmp.Diff(want, sorted(ask)); diff != "" {
		t.Errorf("the resync asked after a gap (-want +got):\n%s", diff)
	}
	if ask := c.apply(up("gw-b", "r4", 4)); ask != nil {
		t.Errorf("the announcement after the gap asked again: %+v", ask)
	}
}

// A heartbeat whose digest differs from the mirror's, once the mirror has
// applied as many announcements as it says, asks the holder to announce
// again what differs, listing the replicas the mirror has; one whose
// digest is the mirror's asks nothing.
func TestDigestMismatchAsksResync(t *testing.T) {
	c := offBus(t, "gw-a")
	c.apply(up("gw-b", "r1", 1))
	c.apply(up("gw-b", "r2", 2))

	if _, ask, _ := c.heard(heartbeat{Gw: "gw-b", Seq: 2, Digest: idsDigest("r1", "r2"), EveryMs: 100}); ask != nil {
		t.Errorf("a heartbeat that agrees with the mirror asked for a resync: %+v", ask)
	}
	_, ask, _ := c.heard(heartbeat{Gw: "gw-b", Seq: 2, Digest: idsDigest("r1", "r3"), EveryMs: 100})
	want := &syncMsg{Gw: "gw-a", IDs: []string{"r1", "r2"}}
	if diff := cmp.Diff(want, sorted(ask)); diff != "" {
		t.Errorf("the resync a differing digest asked (-want +got):\n%s", diff)
	}
}

// A heartbeat that overtook announcements (its number is ahead of the
// mirror) asks nothing yet; if the mirror is still behind that number at
// the next heartbeat, the announcements were lost and the holder is asked
// for what differs and the state. A mirror that heard nothing of a holder
// that announced asks for everything.
func TestHeartbeatAheadOfMirror(t *testing.T) {
	c := offBus(t, "gw-a")
	_, ask, _ := c.heard(heartbeat{Gw: "gw-b", Seq: 1, Digest: idsDigest("r1"), EveryMs: 100})
	if diff := cmp.Diff(&syncMsg{Gw: "gw-a", IDs: []string{}}, sorted(ask)); diff != "" {
		t.Errorf("a mirror that heard nothing asked (-want +got):\n%s", diff)
	}

	c = offBus(t, "gw-a")
	c.apply(up("gw-b", "r1", 1))
	if _, ask, _ := c.heard(heartbeat{Gw: "gw-b", Seq: 2, Digest: idsDigest("r1", "r2"), EveryMs: 100}); ask != nil {
		t.Errorf("a heartbeat one announcement ahead asked at once: %+v", ask)
	}
	_, ask, _ = c.heard(heartbeat{Gw: "gw-b", Seq: 2, Digest: idsDigest("r1", "r2"), EveryMs: 100})
	if diff := cmp.Diff(&syncMsg{Gw: "gw-a", IDs: []string{"r1"}, State: true}, sorted(ask)); diff != "" {
		t.Errorf("a mirror still behind at the next heartbeat asked (-want +got):\n%s", diff)
	}
}

// A resync goes at most once in two of this gateway's intervals (its
// answer may be on its way); one due meanwhile is owed, and asked at the
// first heartbeat after, with the state if any of them wanted it.
func TestResyncAskedAtMostEveryTwoBeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := offBus(t, "gw-a")
		c.apply(up("gw-b", "r1", 1))
		c.apply(up("gw-b", "r2", 2))
		differs := heartbeat{Gw: "gw-b", Seq: 2, Digest: idsDigest("r1"), EveryMs: 100}
		if _, ask, _ := c.heard(differs); ask == nil {
			t.Fatal("the first differing heartbeat asked nothing")
		}
		if ask := c.apply(up("gw-b", "r4", 4)); ask != nil { // a gap, within the interval
			t.Errorf("a gap right after a resync asked again: %+v", ask)
		}
		time.Sleep(2 * testBeat)
		if _, ask, _ := c.heard(differs); ask != nil {
			t.Errorf("a heartbeat two intervals after a resync asked again: %+v", ask)
		}
		time.Sleep(time.Millisecond)
		agrees := heartbeat{Gw: "gw-b", Seq: 4, Digest: idsDigest("r1", "r2", "r4"), EveryMs: 100}
		_, ask, _ := c.heard(agrees)
		want := &syncMsg{Gw: "gw-a", IDs: []string{"r1", "r2", "r4"}, State: true}
		if diff := cmp.Diff(want, sorted(ask)); diff != "" {
			t.Errorf("the owed resync (-want +got):\n%s", diff)
		}
		if _, ask, _ := c.heard(agrees); ask != nil {
			t.Errorf("the resync owed was asked twice: %+v", ask)
		}
	})
}

// holding makes c hold replicas with these ids, as if they had
// connected to it.
func holding(c *Cluster, ids ...string) {
	for _, id := range ids {
		rep := &agents.Replica{ID: id, ProjectID: 1, AgentKey: "key_a", Reg: testReg, Conn: newFakeConn()}
		c.opts.Registry.Add(rep, nil)
		c.local[id] = rep
	}
}

// The holder answers a resync with an "up" (and the registration) for
// only the replicas the asker lacks, a "changed" for the others only
// when asked for the state, then the list of every id it holds.
func TestResyncAnswerAnnouncesOnlyWhatIsMissing(t *testing.T) {
	type ann struct {
		Op  string
		ID  string
		Reg bool
		IDs []string
	}
	// summary keeps what matters of each announcement, the ups first
	// and the changed next, each by id (the holder sends them in no
	// order), and the list last.
	summary := func(msgs []repMsg) []ann {
		var out []ann
		for _, m := range msgs {
			out = append(out, ann{m.Op, m.Rep.ID, m.Rep.Reg != nil, slices.Sorted(slices.Values(m.IDs))})
		}
		rank := map[string]string{"up": "0", "changed": "1", "list": "2"}
		slices.SortFunc(out, func(a, b ann) int { return strings.Compare(rank[a.Op]+a.ID, rank[b.Op]+b.ID) })
		return out
	}
	c := offBus(t, "gw-a")
	holding(c, "r1", "r2", "r3")
	for _, tc := range []struct {
		name  string
		state bool
		want  []ann
	}{
		{"ids only", false, []ann{
			{Op: "up", ID: "r2", Reg: true}, {Op: "up", ID: "r3", Reg: true},
			{Op: "list", IDs: []string{"r1", "r2", "r3"}},
		}},
		{"with the state", true, []ann{
			{Op: "up", ID: "r2", Reg: true}, {Op: "up", ID: "r3", Reg: true},
			{Op: "changed", ID: "r1"},
			{Op: "list", IDs: []string{"r1", "r2", "r3"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.resyncAnswer(syncMsg{Gw: "gw-b", IDs: []string{"r0", "r1"}, State: tc.state})
			if diff := cmp.Diff(tc.want, summary(got)); diff != "" {
				t.Errorf("the answer to a mirror of r0, r1 (-want +got):\n%s", diff)
			}
		})
	}
}

// A mirror with a stale replica and one missing heals in one round: the
// holder's heartbeat asks, the answer adds only what is missing (the
// replicas mirrored already keep their entries), drops what the holder
// no longer has, and the next heartbeat agrees.
func TestResyncHealsMirror(t *testing.T) {
	a, b := offBus(t, "gw-a"), offBus(t, "gw-b")
	holding(a, "r1", "r2")
	a.repSeq = 2
	b.apply(up("gw-a", "r0", 1)) // gone from A since, its "down" lost
	b.apply(up("gw-a", "r1", 2))
	r1 := mirrored(b.opts.Registry, "r1")

	_, ask, _ := b.heard(a.beatMsg())
	if ask == nil {
		t.Fatal("B's mirror of r0, r1 against A's r1, r2 asked nothing")
	}
	for _, ann := range a.resyncAnswer(*ask) {
		if ask := b.apply(a.numberLocked(ann)); ask != nil {
			t.Errorf("applying the answer (%s) asked again: %+v", ann.Op, ask)
		}
	}
	if got := mirroredIDs(b.opts.Registry); !slices.Equal(got, []string{"r1", "r2"}) {
		t.Errorf("B mirrors %v after the answer, want r1, r2", got)
	}
	if mirrored(b.opts.Registry, "r1") != r1 {
		t.Error("the answer replaced the entry of r1, which B had")
	}
	if _, ask, _ := b.heard(a.beatMsg()); ask != nil {
		t.Errorf("the heartbeat after the answer asked again: %+v", ask)
	}
}

// A "list" drops the mirrored replicas it does not name, and ends their
// connections.
func TestListDropsStale(t *testing.T) {
	c := offBus(t, "gw-a")
	c.apply(up("gw-b", "r1", 1))
	c.apply(up("gw-b", "r2", 2))
	r2 := mirrored(c.opts.Registry, "r2")
	c.apply(repMsg{Op: "list", Gw: "gw-b", Seq: 3, IDs: []string{"r1"}})
	if got := mirroredIDs(c.opts.Registry); !slices.Equal(got, []string{"r1"}) {
		t.Errorf("mirrored %v after a list of r1, want r1", got)
	}
	select {
	case <-r2.Conn.Done():
	default:
		t.Error("the connection of the dropped replica r2 did not end")
	}
}
