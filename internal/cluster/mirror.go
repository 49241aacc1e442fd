package cluster

// The replicas other gateways hold, mirrored into this gateway's registry
// from their announcements, each with a remoteConn that carries calls to
// the holder. Announcements may be lost on the bus: the mirror type keeps
// the numbers that tell (a skipped announcement, a heartbeat's number not
// reached, a digest that differs) and decides when to ask the holder for
// a resync, at most once every two heartbeats. The cluster guards each
// mirror with its mu.

import (
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
)

// reasonLeft ends the calls in flight of a mirrored replica whose holder
// said it left.
const reasonLeft = "Agent disconnected before returning a result."

// mirror is this gateway's copy of the replicas one other gateway holds,
// and how far it knows that copy is behind. Not safe for concurrent use:
// the cluster holds its mu.
type mirror struct {
	replicas map[string]*agents.Replica // by id
	// seq is the number of the last of the holder's announcements
	// applied here; lag the one its previous heartbeat said, while seq
	// had not reached it.
	seq, lag uint64
	synced   time.Time // when the holder was last asked to announce again
	// owed: a resync was due while one had just gone out; the next
	// heartbeat asks (owedState: for the state too).
	owed, owedState bool
}

// digest sums up the mirrored replicas as the holder's heartbeat does.
func (m *mirror) digest() string { return digest(m.replicas) }

// applied notes that announcement seq (not 0) is applied, and reports
// whether it skipped a number: announcements were lost.
func (m *mirror) applied(seq uint64) (gap bool) {
	gap = m.seq != 0 && seq != m.seq+1
	m.seq = max(m.seq, seq)
	return gap
}

// behind compares the mirror with what a heartbeat of the holder says:
// seq, the number of its last announcement, and dig, the digest of its
// replicas then. It reports whether to ask the holder to announce what
// differs again, and whether for the state of every replica too.
//
// The mirror is compared with the digest once it has applied the same
// announcements (the heartbeat travels on another subject, so it may
// overtake them): a digest that differs then (a lost "down", a lost "up",
// a stale one) asks for what differs. A mirror still behind the previous
// heartbeat's number lost announcements, maybe a "changed", and asks for
// the state too; one that heard none asks for everything.
func (m *mirror) behind(seq uint64, dig string) (resync, state bool) {
	switch {
	case m.seq == 0 && seq > 0:
		resync = true
	case m.seq == seq:
		resync = m.digest() != dig
	case m.seq < m.lag:
		resync, state = true, true
	}
	m.lag = 0
	if m.seq < seq {
		m.lag = seq
	}
	if m.owed {
		resync, state = true, state || m.owedState
	}
	return resync, state
}

// request returns the resync request that asks the holder to announce
// what differs from this mirror, from gateway from, or nil if one went out
// within the last interval (its answer may be on its way): the next
// heartbeat asks again then, as what was lost may have been lost after
// that answer.
func (m *mirror) request(from string, state bool, interval time.Duration) *syncMsg {
	if time.Since(m.synced) <= interval {
		m.owed, m.owedState = true, m.owedState || state
		return nil
	}
	state = state || m.owedState
	m.owed, m.owedState = false, false
	m.synced = time.Now()
	msg := &syncMsg{Gw: from, IDs: make([]string, 0, len(m.replicas)), State: state}
	for id := range m.replicas {
		msg.IDs = append(msg.IDs, id)
	}
	return msg
}

// stale returns the mirrored replicas a "list" of the holder's ids no
// longer names.
func (m *mirror) stale(ids []string) []*agents.Replica {
	keep := make(map[string]bool, len(ids))
	for _, id := range ids {
		keep[id] = true
	}
	var stale []*agents.Replica
	for id, r := range m.replicas {
		if !keep[id] {
			stale = append(stale, r)
		}
	}
	return stale
}

// askSync sends a resync request to gateway gw. A request lost on the bus
// is asked again at a later heartbeat.
func (c *Cluster) askSync(gw string, msg *syncMsg) {
	b, _ := json.Marshal(msg)
	c.send(subjSync(gw), "", b)
}

// onReplica hears an announcement of another gateway's replicas.
func (c *Cluster) onReplica(m *nats.Msg) {
	var msg repMsg
	if err := json.Unmarshal(m.Data, &msg); err != nil {
		c.log.Warn("malformed replica announcement on the bus", "err", err)
		return
	}
	if ask := c.apply(msg); ask != nil {
		c.log.Info("replica announcements from a gateway were lost on the bus; asking it again", "peer", msg.Gw)
		c.askSync(msg.Gw, ask)
	}
}

// apply applies an announcement to this gateway's mirror and registry.
// It returns the resync to ask the holder for when the announcement's
// number says some were lost (and the state of the rest: a lost one may
// have been a "changed"), else nil.
func (c *Cluster) apply(msg repMsg) *syncMsg {
	if msg.Op == "disable" {
		c.applyDisable(msg.Rep)
		return nil
	}
	if msg.Gw == c.opts.Gateway || msg.Gw == "" {
		return nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	p, _ := c.peers.get(msg.Gw)
	rep := p.mirror.replicas[msg.Rep.ID]
	c.mu.Unlock()
	switch msg.Op {
	case "up":
		c.mirrorUp(p, rep, msg)
	case "changed":
		if rep != nil {
			c.applyState(rep, msg.Rep)
		}
	case "down":
		if rep != nil {
			c.forget(p, rep, reasonLeft)
		}
	case "list":
		c.mu.Lock()
		stale := p.mirror.stale(msg.IDs)
		c.mu.Unlock()
		for _, r := range stale {
			c.forget(p, r, reasonLeft)
		}
	}
	return c.applied(p, msg.Seq)
}

// mirrorUp adds a replica peer p announced to the mirror and the
// registry; rep is the one mirrored already, if any, whose state the
// announcement sets (a resync's answer announces again).
func (c *Cluster) mirrorUp(p *peer, rep *agents.Replica, msg repMsg) {
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
	if c.closed || c.peers[msg.Gw] != p || p.mirror.replicas[rep.ID] != nil {
		c.mu.Unlock()
		return
	}
	p.mirror.replicas[rep.ID] = rep
	c.mu.Unlock()
	c.opts.Registry.Add(rep, schemas)
	c.applyState(rep, msg.Rep)
}

// applied notes that announcement seq of peer p is applied to the mirror,
// and returns the resync to ask for if it skipped a number.
func (c *Cluster) applied(p *peer, seq uint64) *syncMsg {
	if seq == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.mirror.applied(seq) && c.peers[p.id] == p {
		return p.mirror.request(c.opts.Gateway, true, 2*c.opts.Heartbeat)
	}
	return nil
}

// forget takes one mirrored replica out.
func (c *Cluster) forget(p *peer, rep *agents.Replica, reason string) {
	c.mu.Lock()
	if p.mirror.replicas[rep.ID] != rep {
		c.mu.Unlock()
		return
	}
	delete(p.mirror.replicas, rep.ID)
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
			rep = p.mirror.replicas[ri.ID]
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
