package cluster

// The replicas this gateway holds, as it announces them to the others: up,
// down and changed as the registry tells it (the cluster is the
// registry's Observer), each under the next number, and on request the
// answer to a resync from a gateway whose mirror differs. The heartbeat
// carries the last number and the digest of the ids then, so that the
// others can tell their mirror is behind (see mirror.go).

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
)

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

// announceLocked publishes an announcement of this gateway's replicas
// under the next sequence number. c.annMu is held.
func (c *Cluster) announceLocked(msg repMsg) {
	c.publish(subjReplicas, c.numberLocked(msg))
}

// numberLocked returns an announcement of this gateway's replicas from
// this gateway, under the next sequence number. c.annMu is held.
func (c *Cluster) numberLocked(msg repMsg) repMsg {
	c.repSeq++
	msg.Gw, msg.Seq = c.opts.Gateway, c.repSeq
	return msg
}

// info returns a replica this gateway holds as announced: its state, and
// its registration if withReg.
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

// onSync answers another gateway whose mirror of this one's replicas
// differs (see [Cluster.resyncAnswer]).
func (c *Cluster) onSync(m *nats.Msg) {
	var msg syncMsg
	if json.Unmarshal(m.Data, &msg) != nil || msg.Gw == c.opts.Gateway {
		return
	}
	c.annMu.Lock()
	defer c.annMu.Unlock()
	for _, ann := range c.resyncAnswer(msg) {
		c.announceLocked(ann)
	}
}

// resyncAnswer returns the announcements that answer a resync request:
// an "up" (with its registration) for each replica the asker lacks, a
// "changed" for each of the others if it asked for the state, then the
// "list" of every id, so that the asker drops what this gateway no longer
// holds. c.annMu is held, so that no announcement goes between them.
func (c *Cluster) resyncAnswer(msg syncMsg) []repMsg {
	has := make(map[string]bool, len(msg.IDs))
	for _, id := range msg.IDs {
		has[id] = true
	}
	c.mu.Lock()
	reps := make([]*agents.Replica, 0, len(c.local))
	ids := make([]string, 0, len(c.local))
	for id, rep := range c.local {
		reps = append(reps, rep)
		ids = append(ids, id)
	}
	c.mu.Unlock()
	answer := make([]repMsg, 0, len(reps)+1)
	for _, rep := range reps {
		switch {
		case !has[rep.ID]:
			answer = append(answer, repMsg{Op: "up", Rep: c.info(rep, true)})
		case msg.State:
			answer = append(answer, repMsg{Op: "changed", Rep: c.info(rep, false)})
		}
	}
	return append(answer, repMsg{Op: "list", IDs: ids})
}
