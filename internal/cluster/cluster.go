// Package cluster joins the gateways that share a store over a NATS bus, so
// that a client of any gateway sees and calls the agents connected to all
// of them.
//
// Each gateway announces the replicas whose connections it holds (subject
// spacefix.rep: up, down, changed) and a heartbeat (spacefix.hb) that
// counts them. Every other gateway mirrors those replicas into its own
// registry, with a [agents.Conn] that carries calls over the bus to the
// holder (spacefix.gw.<id>.call, answered frame by frame on the caller's
// reply subject; cancel, answers to questions and close on
// spacefix.gw.<id>.ctl). A gateway whose heartbeat stops is dropped after
// three intervals: its replicas leave every registry and their calls in
// flight end as disconnected. A heartbeat whose count differs from what a
// gateway mirrors asks the holder to announce what differs again, so lost
// announcements, restarts and reconnects heal by themselves (see
// [Cluster.onHeartbeat]).
//
// Saved-state changes (settings, tool edits, revoked keys) published on one
// gateway's change bus are broadcast (spacefix.changes) and published on
// every other's, so caches empty and views rebuild everywhere at once.
// Each gateway numbers the changes it broadcasts, and its heartbeat says
// the last number: a gateway that sees a number skipped, or its bus
// connection come back, may have missed one, and re-reads what it caches
// from the store (a settings change for every project, see
// [Options.Projects]).
//
// Core NATS is enough: nothing here needs persistence. A frame lost on the
// bus is a call that times out, as a frame lost on an agent's socket is.
package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spacefix/spacefix/core/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/recovery"
	"github.com/spacefix/spacefix/internal/schema"
)

// Subjects.
const (
	subjReplicas  = "spacefix.rep"
	subjHeartbeat = "spacefix.hb"
	subjChanges   = "spacefix.changes"
	subjTickets   = "spacefix.ticket"
	subjRates     = "spacefix.rate"
)

// RateEvery is how often a gateway tells the others the calls it allowed
// to keys with a rate limit: the most a key can overshoot its limit is
// what the other gateways allow it in that time.
const RateEvery = 250 * time.Millisecond

func subjCall(gw string) string  { return "spacefix.gw." + gw + ".call" }
func subjCtl(gw string) string   { return "spacefix.gw." + gw + ".ctl" }
func subjSync(gw string) string  { return "spacefix.gw." + gw + ".sync" }
func subjReply(gw string) string { return "spacefix.reply." + gw }

// DefaultHeartbeat is how often a gateway says it is alive; three missed
// heartbeats drop it.
const DefaultHeartbeat = time.Second

// Options configure a [Cluster].
type Options struct {
	// URL is the NATS server list, nats://host:port[,nats://…].
	URL string
	// Gateway is this gateway's id; Addr the address it listens on.
	Gateway, Addr string
	// Registry is this gateway's registry: the cluster mirrors the other
	// gateways' replicas into it. The registry's Observer must be the
	// cluster (see [Cluster.ReplicaUp]).
	Registry *agents.Registry
	// Changes is this gateway's change bus.
	Changes *changes.Bus
	// Compile compiles the input schemas of a registration another gateway
	// announced (it checked the registration already).
	Compile func(*agentproto.Registration) (map[string]*schema.Schema, error)
	// Redeem takes a registration ticket this gateway issued, for a
	// WebSocket that reached another gateway; nil answers no ticket.
	Redeem func(ticket, keyID string) (*agentproto.Registration, bool)
	// Limiter is this gateway's rate limiter, shared (ratelimit.Share):
	// the calls it allows go to the others every RateEvery, and theirs
	// count here. Nil: rate limits stay per gateway.
	Limiter *ratelimit.Limiter
	// Projects lists the store's projects: when this gateway may have
	// missed a change another one made, it publishes a settings change for
	// each on Changes, so that what it caches is read again. Nil: nothing
	// is re-read.
	Projects func(context.Context) ([]int64, error)
	// Heartbeat is how often to say this gateway is alive; 0 means
	// [DefaultHeartbeat].
	Heartbeat time.Duration
	Logger    *slog.Logger
}

// Cluster is this gateway's membership of the bus.
type Cluster struct {
	opts Options
	log  *slog.Logger
	nc   *nats.Conn
	subs []*nats.Subscription
	stop chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	local  map[string]*agents.Replica // replicas this gateway holds, by id
	peers  map[string]*peer           // other gateways, by id
	calls  map[string]*remoteCall     // calls this gateway sent over the bus, by reply token
	relays map[string]*relay          // calls this gateway serves for others, by replica/call id
	// cancelled are the calls (replica/call id) whose cancel came before
	// the call: it is refused when it comes.
	cancelled recentIDs
	seq       uint64
	// closed: Close began. New work (relays, resyncs) starts only while
	// it is false, under mu, so that Close's wg.Wait never runs while the
	// WaitGroup is added to.
	closed bool

	parts parts // messages sent in parts, being put together

	// annMu orders this gateway's replica announcements: each takes the
	// next repSeq and is published under it, so a heartbeat's digest and
	// sequence number say the same state, and an answer to a resync never
	// announces a replica after its "down".
	annMu  sync.Mutex
	repSeq uint64

	// chMu orders this gateway's broadcast changes as they are numbered.
	chMu  sync.Mutex
	chSeq uint64

	// merged counts the calls other gateways allowed that this one's
	// limiter counted (see RatesMerged).
	merged atomic.Int64

	// downSince is when the bus connection was lost (Unix nanoseconds),
	// 0 while it is up.
	downSince atomic.Int64

	// reread: a re-read of the store's projects is running; rereadAgain:
	// another was asked for meanwhile. Guarded by mu.
	reread, rereadAgain bool
}

// peer is another gateway, as its heartbeats and announcements tell.
type peer struct {
	id       string
	addr     string
	seen     time.Time
	every    time.Duration // its heartbeat interval
	replicas map[string]*agents.Replica
	synced   time.Time // when this gateway last asked it to announce again
	// repSeq is the sequence number of the last of its announcements
	// applied here; lagSeq the one its previous heartbeat said, while
	// repSeq had not reached it.
	repSeq, lagSeq uint64
	// owed: a resync was due while one had just gone out; the next
	// heartbeat asks (owedState: for the state too).
	owed, owedState bool
	// chSeq and chLag are the same for its changes.
	chSeq, chLag uint64
}

// repInfo is a replica as announced on the bus.
type repInfo struct {
	ID       string                   `json:"id"`
	Gateway  string                   `json:"gw"`
	Project  int64                    `json:"project"`
	AgentKey string                   `json:"agent"`
	Instance string                   `json:"instance,omitempty"`
	Since    time.Time                `json:"since"`
	Reg      *agentproto.Registration `json:"reg,omitempty"` // on up
	Off      []string                 `json:"off,omitempty"`
	Disabled bool                     `json:"disabled,omitempty"`
}

// repMsg is one announcement. A "list" carries every id the gateway holds,
// after a resync: the others drop what it no longer has. The holder of the
// replicas numbers its announcements (Seq, from 1); a "disable", which any
// gateway may send, has none.
type repMsg struct {
	Op  string   `json:"op"` // up, down, changed, list, disable
	Gw  string   `json:"gw"`
	Seq uint64   `json:"seq,omitempty"`
	Rep repInfo  `json:"rep"`
	IDs []string `json:"ids,omitempty"`
}

// syncMsg asks a gateway to announce again what differs from the
// asker's mirror of its replicas: IDs are the replicas the asker has.
// State asks for the tools' and disabled state of those too (an
// announcement was lost, and it may have been a "changed").
type syncMsg struct {
	Gw    string   `json:"gw"`
	IDs   []string `json:"ids"`
	State bool     `json:"state,omitempty"`
}

type heartbeat struct {
	Gw       string `json:"gw"`
	Addr     string `json:"addr"`
	Replicas int    `json:"replicas"`
	// Seq is the sequence number of the sender's last replica
	// announcement, and Digest that of the ids of its replicas then
	// (see digest).
	Seq     uint64 `json:"seq"`
	Digest  string `json:"digest"`
	Changes uint64 `json:"changes"` // the number of the sender's last change
	EveryMs int64  `json:"everyMs"` // the sender's interval: three missed ones drop it
	// Busy are the calls in flight of the sender's replicas that have any,
	// from every gateway, by replica id: least-in-flight everywhere counts
	// them (a replica not named has none).
	Busy map[string]int64 `json:"busy,omitempty"`
}

// Join connects to NATS and starts serving this gateway's part of the bus.
// It fails with an error that says what to do if NATS cannot be reached.
func Join(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	c := &Cluster{
		opts: opts, log: opts.Logger, stop: make(chan struct{}),
		local: make(map[string]*agents.Replica), peers: make(map[string]*peer),
		calls: make(map[string]*remoteCall), relays: make(map[string]*relay),
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.log = c.log.With("gateway", opts.Gateway)
	nc, err := nats.Connect(opts.URL,
		nats.Name("spacefix "+opts.Gateway),
		nats.Timeout(5*time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			c.downSince.CompareAndSwap(0, time.Now().UnixNano())
			c.log.Warn("bus disconnected; reconnecting; meanwhile calls reach only agents connected to this gateway", "bus", redactURL(opts.URL), "err", err)
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			c.downSince.Store(0)
			c.log.Info("bus reconnected; re-reading what this gateway caches from the store, in case it missed changes")
			c.rereadAll("the bus")
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to the bus %s: %w; check that NATS is running and reachable", redactURL(opts.URL), err)
	}
	c.nc = nc
	for subj, fn := range map[string]nats.MsgHandler{
		subjReplicas:                   c.onReplica,
		subjHeartbeat:                  c.onHeartbeat,
		subjChanges:                    c.onChange,
		subjCall(opts.Gateway):         c.onCall,
		subjCtl(opts.Gateway):          c.onCtl,
		subjSync(opts.Gateway):         c.onSync,
		subjReply(opts.Gateway) + ".*": c.onReply,
		subjTickets:                    c.onTicket,
		subjRates:                      c.onRates,
	} {
		sub, err := nc.Subscribe(subj, c.guard(subj, c.assemble(fn)))
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("subscribe to %s: %w", subj, err)
		}
		sub.SetPendingLimits(-1, 256<<20)
		c.subs = append(c.subs, sub)
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = nc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("connect to the bus %s: %w", redactURL(opts.URL), err)
	}
	unsub := opts.Changes.Subscribe(c.broadcastChange)
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		defer unsub()
		c.beat()
	}()
	go func() {
		defer c.wg.Done()
		c.shareRates()
	}()
	c.heartbeat() // at once: the others learn of this gateway and announce to it
	return c, nil
}

// guard recovers a panic in a bus handler, so a malformed frame from a
// peer never ends the gateway.
func (c *Cluster) guard(subj string, fn nats.MsgHandler) nats.MsgHandler {
	return func(m *nats.Msg) { recovery.Do(c.log, "bus "+subj, func() { fn(m) }) }
}

// Unreachable reports whether the bus is unreachable now, and since
// when. A gateway without the bus still serves its own agents' calls: it
// is degraded, not down.
func (c *Cluster) Unreachable() (since time.Time, down bool) {
	if c.nc.Status() == nats.CONNECTED {
		return time.Time{}, false
	}
	if ns := c.downSince.Load(); ns != 0 {
		return time.Unix(0, ns), true
	}
	return time.Now(), true
}

// PeerAddr returns the address another gateway advertised, while it is
// alive on the bus.
func (c *Cluster) PeerAddr(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.peers[id]
	if p == nil || p.addr == "" {
		return "", false
	}
	return p.addr, true
}

// Peers returns how many other gateways are alive on the bus.
func (c *Cluster) Peers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.peers)
}

// Close leaves the bus: the other gateways drop this one's replicas at
// once, and calls this gateway sent over the bus end as disconnected.
// It first stops taking new work (calls that arrive are answered as
// disconnected), then waits for the relays and loops it runs.
func (c *Cluster) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	var ids []string
	for id := range c.local {
		ids = append(ids, id)
	}
	peers := c.peers
	c.peers = map[string]*peer{}
	c.mu.Unlock()
	close(c.stop)
	c.wg.Wait()
	for _, id := range ids {
		c.publish(subjReplicas, repMsg{Op: "down", Gw: c.opts.Gateway, Rep: repInfo{ID: id}})
	}
	for _, p := range peers {
		c.dropPeer(p, "gateway shutting down")
	}
	c.nc.Drain()
}

func (c *Cluster) publish(subj string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.log.Error("encode a bus message", "subject", subj, "err", err)
		return
	}
	if err := c.send(subj, "", b); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		c.log.Warn("publish on the bus", "subject", subj, "err", err)
	}
}

// beat sends a heartbeat every interval and drops gateways that went
// silent, until Close.
func (c *Cluster) beat() {
	t := time.NewTicker(c.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		c.heartbeat()
		var gone []*peer
		c.mu.Lock()
		for id, p := range c.peers {
			every := p.every
			if every <= 0 {
				every = c.opts.Heartbeat
			}
			if time.Since(p.seen) > 3*every {
				delete(c.peers, id)
				gone = append(gone, p)
			}
		}
		c.mu.Unlock()
		for _, p := range gone {
			c.log.Warn("gateway went silent on the bus; its agents are dropped here", "peer", p.id, "addr", p.addr, "replicas", len(p.replicas))
			c.dropPeer(p, "the gateway holding the agent's connection went away")
		}
	}
}

func (c *Cluster) heartbeat() {
	hb := heartbeat{Gw: c.opts.Gateway, Addr: c.opts.Addr, EveryMs: c.opts.Heartbeat.Milliseconds()}
	c.chMu.Lock()
	hb.Changes = c.chSeq
	c.chMu.Unlock()
	c.annMu.Lock()
	c.mu.Lock()
	hb.Seq, hb.Digest = c.repSeq, digest(c.local)
	c.annMu.Unlock()
	hb.Replicas = len(c.local)
	for id, rep := range c.local {
		if n := rep.Inflight(); n > 0 {
			if hb.Busy == nil {
				hb.Busy = make(map[string]int64)
			}
			hb.Busy[id] = n
		}
	}
	c.mu.Unlock()
	c.publish(subjHeartbeat, hb)
}

// dropPeer takes a gone gateway's replicas out of the registry; their calls
// in flight end as disconnected. The calls this gateway relays for it end
// too: nobody waits for their results.
func (c *Cluster) dropPeer(p *peer, reason string) {
	for _, rep := range p.replicas {
		c.opts.Registry.Remove(rep)
		rep.Conn.(*remoteConn).end(reason)
	}
	c.endRelays(p.id)
}

// peerLocked returns the peer with that id, making it (seen now) if this
// gateway had not heard of it. c.mu is held.
func (c *Cluster) peerLocked(id string) (p *peer, isNew bool) {
	p = c.peers[id]
	if p == nil {
		p = &peer{id: id, seen: time.Now(), replicas: make(map[string]*agents.Replica)}
		c.peers[id] = p
		isNew = true
	}
	return p, isNew
}

func (c *Cluster) onHeartbeat(m *nats.Msg) {
	var hb heartbeat
	if json.Unmarshal(m.Data, &hb) != nil || hb.Gw == c.opts.Gateway || hb.Gw == "" {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	p, isNew := c.peerLocked(hb.Gw)
	p.seen, p.addr, p.every = time.Now(), hb.Addr, time.Duration(hb.EveryMs)*time.Millisecond
	// The mirror is compared with what the heartbeat says once it has
	// applied the same announcements (the heartbeat travels on another
	// subject, so it may overtake them): a digest that differs then
	// (a lost "down", a lost "up", a stale one) asks the peer for what
	// differs. A mirror behind the previous heartbeat's number lost
	// announcements; one that heard none asks for everything.
	var resync, state bool
	switch {
	case p.repSeq == 0 && hb.Seq > 0:
		resync = true
	case p.repSeq == hb.Seq:
		resync = digest(p.replicas) != hb.Digest
	case p.repSeq < p.lagSeq:
		resync, state = true, true
	}
	p.lagSeq = 0
	if p.repSeq < hb.Seq {
		p.lagSeq = hb.Seq
	}
	if p.owed {
		resync, state = true, state || p.owedState
	}
	var ask []byte
	if resync {
		ask = c.syncLocked(p, state)
	}
	// The same for changes: one the previous heartbeat said was sent and
	// that never came was lost.
	lostChange := p.chSeq < p.chLag
	if lostChange {
		p.chSeq = p.chLag
	}
	p.chLag = 0
	if p.chSeq < hb.Changes {
		p.chLag = hb.Changes
	}
	for id, rep := range p.replicas {
		rep.Report(hb.Busy[id])
	}
	c.mu.Unlock()
	if isNew {
		c.log.Info("gateway joined the bus", "peer", hb.Gw, "addr", hb.Addr)
		c.heartbeat() // so that it learns of this one without waiting a beat
	}
	if ask != nil {
		c.send(subjSync(hb.Gw), "", ask)
	}
	if lostChange {
		c.log.Info("a change made on another gateway was lost on the bus; re-reading what this gateway caches from the store", "peer", hb.Gw)
		c.rereadAll(hb.Gw)
	}
}

// syncLocked returns the request that asks peer p to announce what
// differs from this gateway's mirror of it, or nil if one went out within
// the last two heartbeats (its answer may be on its way): then a later
// heartbeat asks again, as what was lost may have been lost after that
// answer. c.mu is held.
func (c *Cluster) syncLocked(p *peer, state bool) []byte {
	if time.Since(p.synced) <= 2*c.opts.Heartbeat {
		p.owed, p.owedState = true, p.owedState || state
		return nil
	}
	state = state || p.owedState
	p.owed, p.owedState = false, false
	p.synced = time.Now()
	msg := syncMsg{Gw: c.opts.Gateway, IDs: make([]string, 0, len(p.replicas)), State: state}
	for id := range p.replicas {
		msg.IDs = append(msg.IDs, id)
	}
	b, _ := json.Marshal(msg)
	return b
}

// digest sums up a set of replicas by their ids: the first 16 bytes of
// the SHA-256 of the sorted ids, one a line, in hex.
func digest(reps map[string]*agents.Replica) string {
	ids := make([]string, 0, len(reps))
	for id := range reps {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// onSync answers another gateway whose mirror of this one's replicas
// differs: it announces the replicas the asker lacks (with their
// registrations), the state of the others if asked, then every id, so
// that the asker drops what this gateway no longer holds.
func (c *Cluster) onSync(m *nats.Msg) {
	var msg syncMsg
	if json.Unmarshal(m.Data, &msg) != nil || msg.Gw == c.opts.Gateway {
		return
	}
	has := make(map[string]bool, len(msg.IDs))
	for _, id := range msg.IDs {
		has[id] = true
	}
	c.annMu.Lock()
	defer c.annMu.Unlock()
	c.mu.Lock()
	reps := make([]*agents.Replica, 0, len(c.local))
	ids := make([]string, 0, len(c.local))
	for id, rep := range c.local {
		reps = append(reps, rep)
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, rep := range reps {
		switch {
		case !has[rep.ID]:
			c.announceLocked(repMsg{Op: "up", Rep: c.info(rep, true)})
		case msg.State:
			c.announceLocked(repMsg{Op: "changed", Rep: c.info(rep, false)})
		}
	}
	c.announceLocked(repMsg{Op: "list", IDs: ids})
}

// announceLocked publishes an announcement of this gateway's replicas
// under the next sequence number. c.annMu is held.
func (c *Cluster) announceLocked(msg repMsg) {
	c.repSeq++
	msg.Gw, msg.Seq = c.opts.Gateway, c.repSeq
	c.publish(subjReplicas, msg)
}

func (c *Cluster) info(rep *agents.Replica, withReg bool) repInfo {
	ri := repInfo{
		ID: rep.ID, Gateway: c.opts.Gateway, Project: rep.ProjectID, AgentKey: rep.AgentKey,
		Instance: rep.Instance, Since: rep.Since, Off: c.opts.Registry.Off(rep), Disabled: rep.Disabled(),
	}
	if withReg {
		ri.Reg = rep.Reg
	}
	return ri
}

// ReplicaUp implements [agents.Observer]: a replica this gateway holds is
// announced; one mirrored from another gateway is not.
func (c *Cluster) ReplicaUp(rep *agents.Replica) {
	if rep.Gateway != "" {
		return
	}
	c.annMu.Lock()
	defer c.annMu.Unlock()
	c.mu.Lock()
	c.local[rep.ID] = rep
	c.mu.Unlock()
	c.announceLocked(repMsg{Op: "up", Rep: c.info(rep, true)})
}

// ReplicaDown implements [agents.Observer].
func (c *Cluster) ReplicaDown(rep *agents.Replica) {
	if rep.Gateway != "" {
		return
	}
	c.annMu.Lock()
	defer c.annMu.Unlock()
	c.mu.Lock()
	_, ok := c.local[rep.ID]
	delete(c.local, rep.ID)
	c.mu.Unlock()
	if ok {
		c.announceLocked(repMsg{Op: "down", Rep: repInfo{ID: rep.ID}})
	}
}

// ReplicaChanged implements [agents.Observer]: tools switched on or off go
// out from the holder; a replica disabled here (from the dashboard) goes
// out from whichever gateway did it.
func (c *Cluster) ReplicaChanged(rep *agents.Replica) {
	if rep.Gateway == "" {
		c.annMu.Lock()
		defer c.annMu.Unlock()
		c.announceLocked(repMsg{Op: "changed", Rep: c.info(rep, false)})
		return
	}
	if rc, ok := rep.Conn.(*remoteConn); ok && rc.disabled.Swap(rep.Disabled()) != rep.Disabled() {
		c.publish(subjReplicas, repMsg{Op: "disable", Gw: c.opts.Gateway, Rep: repInfo{ID: rep.ID, Gateway: rep.Gateway, Disabled: rep.Disabled()}})
	}
}

func (c *Cluster) onReplica(m *nats.Msg) {
	var msg repMsg
	if err := json.Unmarshal(m.Data, &msg); err != nil {
		c.log.Warn("malformed replica announcement on the bus", "err", err)
		return
	}
	if msg.Op == "disable" {
		c.applyDisable(msg.Rep)
		return
	}
	if msg.Gw == c.opts.Gateway || msg.Gw == "" {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	p, _ := c.peerLocked(msg.Gw)
	rep := p.replicas[msg.Rep.ID]
	c.mu.Unlock()
	defer c.applied(p, msg.Seq)
	reg := c.opts.Registry
	switch msg.Op {
	case "up":
		if rep != nil {
			c.applyState(rep, msg.Rep)
			return
		}
		if msg.Rep.Reg == nil {
			return
		}
		schemas, err := c.opts.Compile(msg.Rep.Reg)
		if err != nil {
			c.log.Warn("a replica another gateway announced does not compile here", "peer", msg.Gw, "replica", msg.Rep.ID, "err", err)
			return
		}
		rep = &agents.Replica{
			ID: msg.Rep.ID, ProjectID: msg.Rep.Project, AgentKey: msg.Rep.AgentKey, Instance: msg.Rep.Instance,
			Since: msg.Rep.Since, Reg: msg.Rep.Reg, Gateway: msg.Gw,
		}
		rc := newRemoteConn(c, msg.Gw, rep.ID)
		rc.entry.Store(rep)
		rep.Conn = rc
		c.mu.Lock()
		if c.closed || c.peers[msg.Gw] != p || p.replicas[rep.ID] != nil {
			c.mu.Unlock()
			return
		}
		p.replicas[rep.ID] = rep
		c.mu.Unlock()
		reg.Add(rep, schemas)
		c.applyState(rep, msg.Rep)
	case "changed":
		if rep != nil {
			c.applyState(rep, msg.Rep)
		}
	case "down":
		if rep == nil {
			return
		}
		c.forget(p, rep, "Agent disconnected before returning a result.")
	case "list":
		keep := make(map[string]bool, len(msg.IDs))
		for _, id := range msg.IDs {
			keep[id] = true
		}
		c.mu.Lock()
		var stale []*agents.Replica
		for id, r := range p.replicas {
			if !keep[id] {
				stale = append(stale, r)
			}
		}
		c.mu.Unlock()
		for _, r := range stale {
			c.forget(p, r, "Agent disconnected before returning a result.")
		}
	}
}

// applied notes that announcement seq of peer p is applied to the mirror;
// one that skips a number means some were lost, and the peer is asked
// for what differs (and the state of the rest: a lost one may have been a
// "changed").
func (c *Cluster) applied(p *peer, seq uint64) {
	if seq == 0 {
		return
	}
	c.mu.Lock()
	var ask []byte
	if p.repSeq != 0 && seq != p.repSeq+1 && c.peers[p.id] == p {
		ask = c.syncLocked(p, true)
	}
	p.repSeq = max(p.repSeq, seq)
	c.mu.Unlock()
	if ask != nil {
		c.log.Info("replica announcements from a gateway were lost on the bus; asking it again", "peer", p.id)
		c.send(subjSync(p.id), "", ask)
	}
}

// forget takes one mirrored replica out.
func (c *Cluster) forget(p *peer, rep *agents.Replica, reason string) {
	c.mu.Lock()
	if p.replicas[rep.ID] != rep {
		c.mu.Unlock()
		return
	}
	delete(p.replicas, rep.ID)
	c.mu.Unlock()
	c.opts.Registry.Remove(rep)
	rep.Conn.(*remoteConn).end(reason)
}

// applyState makes a mirrored replica's tools and disabled flag what its
// holder announced.
func (c *Cluster) applyState(rep *agents.Replica, ri repInfo) {
	reg := c.opts.Registry
	off := make(map[string]bool, len(ri.Off))
	for _, name := range ri.Off {
		off[name] = true
	}
	for _, t := range rep.Reg.Tools {
		reg.SetEnabled(rep, t.Name, !off[t.Name])
	}
	for _, p := range rep.Reg.Prompts {
		reg.SetEnabledKind(rep, agentproto.KindPrompt, p.Name, !off[agents.OffKey(agentproto.KindPrompt, p.Name)])
	}
	for _, res := range rep.Reg.Resources {
		reg.SetEnabledKind(rep, agentproto.KindResource, res.URI, !off[agents.OffKey(agentproto.KindResource, res.URI)])
	}
	rc := rep.Conn.(*remoteConn)
	rc.disabled.Store(ri.Disabled)
	reg.SetReplicaDisabled(rep, ri.Disabled)
}

// applyDisable applies a replica disabled or enabled on another gateway's
// dashboard to this gateway's entry of it.
func (c *Cluster) applyDisable(ri repInfo) {
	c.mu.Lock()
	rep := c.local[ri.ID]
	if rep == nil {
		if p := c.peers[ri.Gateway]; p != nil {
			rep = p.replicas[ri.ID]
		}
	}
	c.mu.Unlock()
	if rep == nil {
		return
	}
	if rc, ok := rep.Conn.(*remoteConn); ok {
		rc.disabled.Store(ri.Disabled) // heard, not to be told again
	}
	c.opts.Registry.SetReplicaDisabled(rep, ri.Disabled)
}

// changeMsg is a saved-state change crossing the bus, numbered by the
// gateway it was made on (from 1).
type changeMsg struct {
	Gw     string         `json:"gw"`
	Seq    uint64         `json:"seq"`
	Change changes.Change `json:"change"`
}

// broadcastChange sends this gateway's saved-state changes to the others.
// It runs on the publisher's goroutine: publishing on NATS only buffers.
func (c *Cluster) broadcastChange(ch changes.Change) {
	if ch.Registry() || ch.From != "" {
		return // registry changes each gateway makes itself; heard ones stay
	}
	c.chMu.Lock()
	defer c.chMu.Unlock()
	c.chSeq++
	c.publish(subjChanges, changeMsg{Gw: c.opts.Gateway, Seq: c.chSeq, Change: ch})
}

func (c *Cluster) onChange(m *nats.Msg) {
	var msg changeMsg
	if json.Unmarshal(m.Data, &msg) != nil || msg.Gw == c.opts.Gateway || msg.Gw == "" || msg.Change.Registry() {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	p, _ := c.peerLocked(msg.Gw)
	lost := msg.Seq != p.chSeq+1
	p.chSeq = max(p.chSeq, msg.Seq)
	c.mu.Unlock()
	msg.Change.From = msg.Gw
	c.opts.Changes.Publish(msg.Change)
	if lost {
		c.log.Info("changes made on another gateway were lost on the bus; re-reading what this gateway caches from the store", "peer", msg.Gw, "seq", msg.Seq)
		c.rereadAll(msg.Gw)
	}
	if msg.Change.Kind == changes.KeyRevoked {
		// The holder ends the revoked agent key's connections.
		c.mu.Lock()
		var reps []*agents.Replica
		for _, rep := range c.local {
			if rep.AgentKey == msg.Change.Key {
				reps = append(reps, rep)
			}
		}
		c.mu.Unlock()
		for _, rep := range reps {
			rep.Conn.Close("agent key revoked")
		}
	}
}

// rereadAll makes this gateway read again what it caches from the store,
// as if every project's settings had changed on gateway from: it may have
// missed a change. It returns at once; a re-read asked for while one runs
// runs again after it.
func (c *Cluster) rereadAll(from string) {
	if c.opts.Projects == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.rereadAgain = true
	if c.reread {
		return
	}
	c.reread = true
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for c.nextReread() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			ids, err := c.opts.Projects(ctx)
			cancel()
			if err != nil {
				c.log.Warn("re-read what this gateway caches: list the projects; trying again in a second", "err", err)
				c.mu.Lock()
				c.rereadAgain = true
				c.mu.Unlock()
				select {
				case <-c.stop:
				case <-time.After(time.Second):
				}
				continue
			}
			for _, id := range ids {
				c.opts.Changes.Publish(changes.Change{Project: id, Kind: changes.Settings, From: from})
			}
		}
	}()
}

// nextReread reports whether another re-read is due, and takes it.
func (c *Cluster) nextReread() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.rereadAgain || c.closed {
		c.reread = false
		return false
	}
	c.rereadAgain = false
	return true
}

// rateMsg carries the calls a gateway allowed to rate-limited keys, as
// Unix milliseconds by key id.
type rateMsg struct {
	Gw    string             `json:"gw"`
	Calls map[string][]int64 `json:"calls"`
}

// shareRates sends the calls this gateway allowed every RateEvery.
func (c *Cluster) shareRates() {
	if c.opts.Limiter == nil {
		return
	}
	t := time.NewTicker(RateEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		fresh := c.opts.Limiter.Fresh()
		if fresh == nil {
			continue
		}
		msg := rateMsg{Gw: c.opts.Gateway, Calls: make(map[string][]int64, len(fresh))}
		for key, calls := range fresh {
			ms := make([]int64, len(calls))
			for i, t := range calls {
				ms[i] = t.UnixMilli()
			}
			msg.Calls[key] = ms
		}
		c.publish(subjRates, msg)
	}
}

func (c *Cluster) onRates(m *nats.Msg) {
	var msg rateMsg
	if c.opts.Limiter == nil || json.Unmarshal(m.Data, &msg) != nil || msg.Gw == c.opts.Gateway {
		return
	}
	for key, ms := range msg.Calls {
		calls := make([]time.Time, len(ms))
		for i, v := range ms {
			calls[i] = time.UnixMilli(v)
		}
		c.opts.Limiter.Merge(key, calls)
		c.merged.Add(int64(len(calls)))
	}
}

// RatesMerged returns how many calls other gateways allowed to
// rate-limited keys that this gateway's limiter counted.
func (c *Cluster) RatesMerged() int64 { return c.merged.Load() }

// ticketMsg asks the gateway that issued a registration ticket for it.
type ticketMsg struct {
	Ticket string `json:"ticket"`
	Key    string `json:"key"`
}

// Redeem asks the other gateways for a registration ticket one of them
// issued: the registration and the WebSocket may reach different gateways.
func (c *Cluster) Redeem(ctx context.Context, ticket, keyID string) (*agentproto.Registration, bool) {
	b, _ := json.Marshal(ticketMsg{Ticket: ticket, Key: keyID})
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// Not nc.Request: the registration may come back in parts.
	answer := make(chan []byte, 1)
	inbox := nats.NewInbox()
	sub, err := c.nc.Subscribe(inbox, c.assemble(func(m *nats.Msg) {
		select {
		case answer <- m.Data:
		default:
		}
	}))
	if err != nil {
		return nil, false
	}
	defer sub.Unsubscribe()
	if err := c.nc.PublishMsg(&nats.Msg{Subject: subjTickets, Reply: inbox, Data: b}); err != nil {
		return nil, false
	}
	var data []byte
	select {
	case data = <-answer:
	case <-ctx.Done():
		return nil, false
	}
	reg := new(agentproto.Registration)
	if json.Unmarshal(data, reg) != nil {
		return nil, false
	}
	return reg, true
}

func (c *Cluster) onTicket(m *nats.Msg) {
	var msg ticketMsg
	if c.opts.Redeem == nil || m.Reply == "" || json.Unmarshal(m.Data, &msg) != nil {
		return
	}
	reg, ok := c.opts.Redeem(msg.Ticket, msg.Key)
	if !ok {
		return // not ours: stay silent, the one that has it answers
	}
	b, err := json.Marshal(reg)
	if err == nil && m.Reply != "" {
		c.send(m.Reply, "", b)
	}
}

// redactURL drops credentials from a NATS URL list for messages.
func redactURL(u string) string {
	parts := strings.Split(u, ",")
	for i, p := range parts {
		if at := strings.LastIndex(p, "@"); at >= 0 {
			if s := strings.Index(p, "://"); s >= 0 && s < at {
				parts[i] = p[:s+3] + "xxxxx" + p[at:]
			}
		}
	}
	return strings.Join(parts, ",")
}
