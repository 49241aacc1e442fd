package cluster

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/schema"
	"github.com/spacefix/spacefix/internal/testenv"
)

// testBeat is the heartbeat of the gateways in these tests: a silent one is
// dropped after three.
const testBeat = 100 * time.Millisecond

// node is one gateway's part of the bus, with its registry and change bus.
type node struct {
	obs     *observer
	c       *Cluster
	reg     *agents.Registry
	changes *changes.Bus
}

// observer forwards the registry's replicas to the cluster, once joined.
type observer struct{ c atomic.Pointer[Cluster] }

func (o *observer) ReplicaUp(rep *agents.Replica) {
	if c := o.c.Load(); c != nil {
		c.ReplicaUp(rep)
	}
}

func (o *observer) ReplicaDown(rep *agents.Replica) {
	if c := o.c.Load(); c != nil {
		c.ReplicaDown(rep)
	}
}

func (o *observer) ReplicaChanged(rep *agents.Replica) {
	if c := o.c.Load(); c != nil {
		c.ReplicaChanged(rep)
	}
}

// join starts a gateway id on the bus at url; it leaves when the test ends.
func join(t *testing.T, url, id string, edit ...func(*Options)) *node {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	obs := new(observer)
	n := &node{obs: obs, changes: changes.New(log)}
	n.reg = agents.New(&agents.Options{Changes: n.changes, Observer: obs, Logger: log})
	opts := Options{
		URL: url, Gateway: id, Addr: "127.0.0.1:1", Registry: n.reg, Changes: n.changes,
		Compile:   func(*agentproto.Registration) (map[string]*schema.Schema, error) { return nil, nil },
		Heartbeat: testBeat, Logger: log,
	}
	for _, e := range edit {
		e(&opts)
	}
	c, err := Join(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	obs.c.Store(c)
	n.c = c
	t.Cleanup(c.Close)
	return n
}

// fakeConn is an agent's connection on the gateway that holds it: it
// records what it is sent, and answers "echo" at once.
type fakeConn struct {
	mu      sync.Mutex
	started []string
	cancels map[string]string // call id → reason
	done    chan struct{}
}

func newFakeConn() *fakeConn {
	return &fakeConn{cancels: make(map[string]string), done: make(chan struct{})}
}

func (f *fakeConn) Start(_ context.Context, m *agentproto.Message) (*agents.Pending, error) {
	p := agents.NewPending()
	f.mu.Lock()
	f.started = append(f.started, m.ID)
	f.mu.Unlock()
	if m.Name == "echo" {
		p.Result <- agents.Reply{Result: json.RawMessage(`"ok"`)}
	}
	return p, nil
}

func (f *fakeConn) Cancel(id, reason string) {
	f.mu.Lock()
	f.cancels[id] = reason
	f.mu.Unlock()
}

func (f *fakeConn) Send(context.Context, *agentproto.Message) error { return nil }
func (f *fakeConn) Close(string)                                    {}
func (f *fakeConn) Done() <-chan struct{}                           { return f.done }

func (f *fakeConn) wasStarted(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.started {
		if s == id {
			return true
		}
	}
	return false
}

func (f *fakeConn) cancelReason(id string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.cancels[id]
	return r, ok
}

// addReplica connects a replica with tools echo and hang to n.
func (n *node) addReplica(t *testing.T, id string, conn agents.Conn) *agents.Replica {
	t.Helper()
	rep := &agents.Replica{
		ID: id, ProjectID: 1, AgentKey: "key_a", Since: time.Now(), Conn: conn,
		Reg: &agentproto.Registration{Tools: []agentproto.Tool{
			{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "hang", InputSchema: json.RawMessage(`{"type":"object"}`)},
		}},
	}
	n.reg.Add(rep, nil)
	return rep
}

// mirror returns n's entry of a replica another gateway holds, once it has
// one.
func (n *node) mirror(t *testing.T, id string) *agents.Replica {
	t.Helper()
	var got *agents.Replica
	waitFor(t, "the replica "+id+" to be mirrored", func() bool {
		for _, rep := range n.reg.All() {
			if rep.ID == id && rep.Gateway != "" {
				got = rep
				return true
			}
		}
		return false
	})
	return got
}

// waitFor polls cond until it holds, for at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, bounded: gateways over a real NATS server, which synctest cannot fake
	}
}

func callMessage(id, tool string, wait time.Duration) *agentproto.Message {
	return &agentproto.Message{Type: agentproto.TypeCall, ID: id, Kind: "tool", Name: tool, Deadline: time.Now().Add(wait).UnixMilli()}
}

// A call whose cancel is lost on the bus (the caller gave up at the wait
// and nothing reached the holder) ends on the holder shortly after its
// deadline: the agent is told "timeout", and the replica's calls in
// flight, which every gateway routes by, return to 0 here and there.
func TestRelayEndsAtDeadlineWithoutCancel(t *testing.T) {
	url := testenv.NATS(t, 0).ClientURL()
	a, b := join(t, url, "gw-a"), join(t, url, "gw-b")
	fc := newFakeConn()
	held := a.addReplica(t, "r1", fc)
	mirrored := b.mirror(t, "r1")

	if _, err := mirrored.Conn.Start(context.Background(), callMessage("c1", "hang", 300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the call to reach the agent", func() bool { return fc.wasStarted("c1") })
	waitFor(t, "B to see the call in flight on A", func() bool { return mirrored.Inflight() == 1 })
	// No Cancel: as if it were lost on the bus.
	waitFor(t, "the holder to end the relay", func() bool { _, ok := fc.cancelReason("c1"); return ok })
	if reason, _ := fc.cancelReason("c1"); reason != agentproto.ReasonTimeout {
		t.Errorf("the agent was told %q, want %q", reason, agentproto.ReasonTimeout)
	}
	waitFor(t, "A's count of the replica's calls in flight to return to 0", func() bool { return held.Inflight() == 0 })
	waitFor(t, "B to hear the replica is idle", func() bool { return mirrored.Inflight() == 0 })
}

// A gateway that goes silent mid-call (killed, cut off) has its relayed
// calls ended on the holder: nobody waits for their results.
func TestRelaysOfDeadPeerEnd(t *testing.T) {
	url := testenv.NATS(t, 0).ClientURL()
	a, b := join(t, url, "gw-a"), join(t, url, "gw-b")
	fc := newFakeConn()
	held := a.addReplica(t, "r1", fc)
	mirrored := b.mirror(t, "r1")

	if _, err := mirrored.Conn.Start(context.Background(), callMessage("c1", "hang", time.Minute)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the call to reach the agent", func() bool { return fc.wasStarted("c1") })
	b.c.nc.Close() // B is gone without a word
	waitFor(t, "A to end the call B relayed", func() bool { _, ok := fc.cancelReason("c1"); return ok })
	if reason, _ := fc.cancelReason("c1"); reason != agentproto.ReasonCancelled {
		t.Errorf("the agent was told %q, want %q", reason, agentproto.ReasonCancelled)
	}
	waitFor(t, "A's count of the replica's calls in flight to return to 0", func() bool { return held.Inflight() == 0 })
}

// A cancel that overtakes its call on the bus (they travel on separate
// subjects) is remembered: the call is refused when it comes, and never
// reaches the agent.
func TestCancelBeforeCallRefusesIt(t *testing.T) {
	url := testenv.NATS(t, 0).ClientURL()
	a, b := join(t, url, "gw-a"), join(t, url, "gw-b")
	fc := newFakeConn()
	held := a.addReplica(t, "r1", fc)
	mirrored := b.mirror(t, "r1")

	b.c.publish(subjCtl("gw-a"), ctlMsg{Op: "cancel", Rep: "r1", ID: "c1", Reason: agentproto.ReasonCancelled})
	waitFor(t, "A to remember the cancel", func() bool {
		a.c.mu.Lock()
		defer a.c.mu.Unlock()
		return a.c.cancelled.len() == 1
	})
	if _, err := mirrored.Conn.Start(context.Background(), callMessage("c1", "hang", time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Calls on one subject are handled in order: once c2 reached the
	// agent, c1 was handled.
	if _, err := mirrored.Conn.Start(context.Background(), callMessage("c2", "echo", time.Minute)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the next call to reach the agent", func() bool { return fc.wasStarted("c2") })
	if fc.wasStarted("c1") {
		t.Error("a call whose cancel came first reached the agent")
	}
	waitFor(t, "A's count of the replica's calls in flight to return to 0", func() bool { return held.Inflight() == 0 })
}

// Close while calls keep arriving over the bus: no relay starts after
// Close began waiting (the race detector checks the WaitGroup), and Close
// returns.
func TestCloseUnderConcurrentCalls(t *testing.T) {
	url := testenv.NATS(t, 0).ClientURL()
	for i := range 10 {
		a, b := join(t, url, "gw-a"+string(rune('0'+i))), join(t, url, "gw-b"+string(rune('0'+i)))
		a.addReplica(t, "r1", newFakeConn())
		mirrored := b.mirror(t, "r1")
		var calls sync.WaitGroup
		stop := make(chan struct{})
		for g := range 8 {
			calls.Go(func() {
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					id := string(rune('a'+g)) + "-" + time.Now().Format("150405.000000000")
					p, err := mirrored.Conn.Start(context.Background(), callMessage(id, "echo", time.Second))
					if err != nil {
						return // A left: the mirror ended
					}
					select {
					case <-p.Result:
					case <-stop:
						return
					}
				}
			})
		}
		waitFor(t, "calls to flow", func() bool { return mirrored.Inflight() > 0 || len(a.c.relaysNow()) > 0 })
		closed := make(chan struct{})
		go func() { a.c.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not return within 10 s under concurrent calls")
		}
		close(stop)
		calls.Wait()
		b.c.Close()
	}
}

// relaysNow returns the keys of the calls c is relaying.
func (c *Cluster) relaysNow() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.relays))
	for k := range c.relays {
		keys = append(keys, k)
	}
	return keys
}

// mirrorIDs returns the ids of the replicas n mirrors from other gateways,
// sorted.
func (n *node) mirrorIDs() []string { return mirroredIDs(n.reg) }

// A mirror with as many replicas as the holder but not the same ones (a
// stale "up" after a "down", plus a missed new one) heals: the heartbeat's
// digest of the ids differs, and the holder announces what differs.
func TestMirrorWithEqualCountsHeals(t *testing.T) {
	url := testenv.NATS(t, 0).ClientURL()
	a, b := join(t, url, "gw-a"), join(t, url, "gw-b")
	a.addReplica(t, "r1", newFakeConn())
	a.addReplica(t, "r2", newFakeConn())
	b.mirror(t, "r1")
	r2 := b.mirror(t, "r2")

	// B loses r2 and keeps a replica A no longer holds: two either way.
	b.c.mu.Lock()
	p := b.c.peers["gw-a"]
	b.c.mu.Unlock()
	b.c.forget(p, r2, "test")
	stale := &agents.Replica{ID: "r0", ProjectID: 1, AgentKey: "key_a", Since: time.Now(), Gateway: "gw-a", Reg: r2.Reg}
	rc := newRemoteConn(b.c, "gw-a", "r0")
	rc.entry.Store(stale)
	stale.Conn = rc
	b.c.mu.Lock()
	p.mirror.replicas["r0"] = stale
	b.c.mu.Unlock()
	b.reg.Add(stale, nil)
	if got := b.mirrorIDs(); !slices.Equal(got, []string{"r0", "r1"}) {
		t.Fatalf("B's mirror after the loss = %v", got)
	}

	waitFor(t, "B's mirror to heal to r1, r2", func() bool { return slices.Equal(b.mirrorIDs(), []string{"r1", "r2"}) })
}

// A lost announcement (here a "changed": A switched a tool off) is seen
// by the gap in A's numbers at the next one, and B asks for the state.
func TestLostAnnouncementHeals(t *testing.T) {
	url := testenv.NATS(t, 0).ClientURL()
	a, b := join(t, url, "gw-a"), join(t, url, "gw-b")
	held := a.addReplica(t, "r1", newFakeConn())
	mirrored := b.mirror(t, "r1")

	// A switches "hang" off and the announcement is lost on the bus: A
	// numbers it, nobody hears it.
	a.obs.c.Store(nil)
	must(t, a.reg.SetEnabled(held, "hang", false))
	a.obs.c.Store(a.c)
	a.c.annMu.Lock()
	a.c.repSeq++
	a.c.annMu.Unlock()
	a.addReplica(t, "r2", newFakeConn()) // the next number: B sees the gap
	waitFor(t, "B to hear that hang is off on r1", func() bool { return slices.Equal(b.reg.Off(mirrored), []string{"hang"}) })
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// changeLog records the changes published on a change bus.
type changeLog struct {
	mu  sync.Mutex
	got []changes.Change
}

func (l *changeLog) add(c changes.Change) {
	l.mu.Lock()
	l.got = append(l.got, c)
	l.mu.Unlock()
}

func (l *changeLog) list() []changes.Change {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// rereads returns the projects l saw re-read for gateway from (settings
// changes with no key that did not cross the bus themselves).
func (l *changeLog) rereads(from string, crossed map[int64]bool) []int64 {
	var ids []int64
	for _, c := range l.list() {
		if c.Kind == changes.Settings && c.From == from && !crossed[c.Project] {
			ids = append(ids, c.Project)
		}
	}
	slices.Sort(ids)
	return ids
}

// withProjects makes a gateway's store hold projects 1, 2 and 3.
func withProjects(o *Options) {
	o.Projects = func(context.Context) ([]int64, error) { return []int64{1, 2, 3}, nil }
}

// A change another gateway made that is lost on the bus (number n+1 never
// comes, n+2 does) makes this gateway re-read what it caches of every
// project: a settings change for each is published here.
func TestLostChangeRereads(t *testing.T) {
	url := testenv.NATS(t, 0).ClientURL()
	a, b := join(t, url, "gw-a"), join(t, url, "gw-b", withProjects)
	var heard changeLog
	b.changes.Subscribe(heard.add)

	a.changes.Publish(changes.Change{Project: 7, Kind: changes.KeyRevoked, Key: "key_1"}) // number 1
	waitFor(t, "B to hear change 1", func() bool { return len(heard.list()) == 1 })
	a.c.chMu.Lock()
	a.c.chSeq++ // number 2, lost on the bus
	a.c.chMu.Unlock()
	a.changes.Publish(changes.Change{Project: 7, Kind: changes.KeyRevoked, Key: "key_3"}) // number 3
	waitFor(t, "B to re-read projects 1, 2 and 3", func() bool {
		return slices.Equal(heard.rereads("gw-a", map[int64]bool{7: true}), []int64{1, 2, 3})
	})
	if got := heard.list(); got[0].Key != "key_1" || got[1].Key != "key_3" {
		t.Errorf("the changes that came were not published first: %+v", got[:2])
	}
}

// The last change lost (nothing follows it) is seen from the heartbeats,
// which say the number of the last change sent.
func TestLostLastChangeRereads(t *testing.T) {
	url := testenv.NATS(t, 0).ClientURL()
	a, b := join(t, url, "gw-a"), join(t, url, "gw-b", withProjects)
	var heard changeLog
	b.changes.Subscribe(heard.add)
	a.changes.Publish(changes.Change{Project: 7, Kind: changes.Settings}) // number 1
	waitFor(t, "B to hear change 1", func() bool { return len(heard.list()) == 1 })
	a.c.chMu.Lock()
	a.c.chSeq++ // number 2, lost on the bus
	a.c.chMu.Unlock()
	waitFor(t, "B to re-read projects 1, 2 and 3", func() bool {
		return slices.Equal(heard.rereads("gw-a", map[int64]bool{7: true}), []int64{1, 2, 3})
	})
}
