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
// gateway mirrors asks the holder to announce everything again, so lost
// announcements, restarts and reconnects heal by themselves.
//
// Saved-state changes (settings, tool edits, revoked keys) published on one
// gateway's change bus are broadcast (spacefix.changes) and published on
// every other's, so caches empty and views rebuild everywhere at once.
//
// Core NATS is enough: nothing here needs persistence. A frame lost on the
// bus is a call that times out, as a frame lost on an agent's socket is.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
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
	seq    uint64
	closed bool

	parts parts // messages sent in parts, being put together
}

// peer is another gateway, as its heartbeats and announcements tell.
type peer struct {
	id       string
	addr     string
	seen     time.Time
	every    time.Duration // its heartbeat interval
	replicas map[string]*agents.Replica
	synced   time.Time // when this gateway last asked it to announce again
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
// after a full announcement: the others drop what it no longer has.
type repMsg struct {
	Op  string   `json:"op"` // up, down, changed, list, disable
	Gw  string   `json:"gw"`
	Rep repInfo  `json:"rep"`
	IDs []string `json:"ids,omitempty"`
}

type heartbeat struct {
	Gw       string `json:"gw"`
	Addr     string `json:"addr"`
	Replicas int    `json:"replicas"`
	EveryMs  int64  `json:"everyMs"` // the sender's interval: three missed ones drop it
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
			c.log.Warn("bus disconnected; reconnecting", "err", err)
		}),
		nats.ReconnectHandler(func(*nats.Conn) { c.log.Info("bus reconnected") }),
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
		subjSync(opts.Gateway):         func(*nats.Msg) { c.announceAll() },
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

// Ping reports whether the bus is reachable now, for /readyz.
func (c *Cluster) Ping() error {
	if s := c.nc.Status(); s != nats.CONNECTED {
		return fmt.Errorf("the bus %s is %s; check that NATS is running and reachable", redactURL(c.opts.URL), strings.ToLower(s.String()))
	}
	return nil
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
	c.mu.Lock()
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
// in flight end as disconnected.
func (c *Cluster) dropPeer(p *peer, reason string) {
	for _, rep := range p.replicas {
		c.opts.Registry.Remove(rep)
		rep.Conn.(*remoteConn).end(reason)
	}
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
	// A count that differs asks the peer to announce everything again,
	// at most once per two heartbeats (announcements may be on their way).
	resync := len(p.replicas) != hb.Replicas && time.Since(p.synced) > 2*c.opts.Heartbeat
	if resync {
		p.synced = time.Now()
	}
	for id, rep := range p.replicas {
		rep.Report(hb.Busy[id])
	}
	c.mu.Unlock()
	if isNew {
		c.log.Info("gateway joined the bus", "peer", hb.Gw, "addr", hb.Addr)
		c.heartbeat() // so that it learns of this one without waiting a beat
	}
	if resync {
		c.nc.Publish(subjSync(hb.Gw), nil)
	}
}

// announceAll announces every replica this gateway holds, then their ids.
func (c *Cluster) announceAll() {
	c.mu.Lock()
	reps := make([]*agents.Replica, 0, len(c.local))
	ids := make([]string, 0, len(c.local))
	for id, rep := range c.local {
		reps = append(reps, rep)
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, rep := range reps {
		c.publish(subjReplicas, repMsg{Op: "up", Gw: c.opts.Gateway, Rep: c.info(rep, true)})
	}
	c.publish(subjReplicas, repMsg{Op: "list", Gw: c.opts.Gateway, IDs: ids})
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
	c.mu.Lock()
	c.local[rep.ID] = rep
	c.mu.Unlock()
	c.publish(subjReplicas, repMsg{Op: "up", Gw: c.opts.Gateway, Rep: c.info(rep, true)})
}

// ReplicaDown implements [agents.Observer].
func (c *Cluster) ReplicaDown(rep *agents.Replica) {
	if rep.Gateway != "" {
		return
	}
	c.mu.Lock()
	_, ok := c.local[rep.ID]
	delete(c.local, rep.ID)
	c.mu.Unlock()
	if ok {
		c.publish(subjReplicas, repMsg{Op: "down", Gw: c.opts.Gateway, Rep: repInfo{ID: rep.ID}})
	}
}

// ReplicaChanged implements [agents.Observer]: tools switched on or off go
// out from the holder; a replica disabled here (from the dashboard) goes
// out from whichever gateway did it.
func (c *Cluster) ReplicaChanged(rep *agents.Replica) {
	if rep.Gateway == "" {
		c.publish(subjReplicas, repMsg{Op: "changed", Gw: c.opts.Gateway, Rep: c.info(rep, false)})
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

// changeMsg is a saved-state change crossing the bus.
type changeMsg struct {
	Gw     string         `json:"gw"`
	Change changes.Change `json:"change"`
}

// broadcastChange sends this gateway's saved-state changes to the others.
// It runs on the publisher's goroutine: publishing on NATS only buffers.
func (c *Cluster) broadcastChange(ch changes.Change) {
	if ch.Registry() || ch.From != "" {
		return // registry changes each gateway makes itself; heard ones stay
	}
	c.publish(subjChanges, changeMsg{Gw: c.opts.Gateway, Change: ch})
}

func (c *Cluster) onChange(m *nats.Msg) {
	var msg changeMsg
	if json.Unmarshal(m.Data, &msg) != nil || msg.Gw == c.opts.Gateway || msg.Change.Registry() {
		return
	}
	msg.Change.From = msg.Gw
	c.opts.Changes.Publish(msg.Change)
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
	}
}

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
