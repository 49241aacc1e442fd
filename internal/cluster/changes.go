package cluster

// Saved-state changes crossing the bus: each gateway numbers the changes
// made on it and broadcasts them, and publishes those of the others on its
// own change bus, so caches empty everywhere at once. A number skipped, or
// one a heartbeat said was sent that never came, means a change was lost:
// the gateway then re-reads what it caches of every project from the
// store (changeSeq keeps the numbers; rereadAll the re-reads).

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/changes"
)

// changeMsg is a saved-state change crossing the bus, numbered by the
// gateway it was made on (from 1).
type changeMsg struct {
	Gw     string         `json:"gw"`
	Seq    uint64         `json:"seq"`
	Change changes.Change `json:"change"`
}

// changeSeq follows the numbers of the changes one other gateway
// broadcasts, to tell when one was lost. Not safe for concurrent use: the
// cluster holds its mu.
type changeSeq struct {
	// seq is the number of the last change heard; lag the one the
	// previous heartbeat said, while seq had not reached it.
	seq, lag uint64
}

// heard notes change number seq, and reports whether it is not the next
// one: changes were lost.
func (s *changeSeq) heard(seq uint64) (lost bool) {
	lost = seq != s.seq+1
	s.seq = max(s.seq, seq)
	return lost
}

// beat notes the number of the last change a heartbeat says was sent,
// and reports whether one the previous heartbeat said was sent never
// came: it was lost.
func (s *changeSeq) beat(last uint64) (lost bool) {
	lost = s.seq < s.lag
	if lost {
		s.seq = s.lag
	}
	s.lag = 0
	if s.seq < last {
		s.lag = last
	}
	return lost
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

// onChange publishes a change made on another gateway on this one's
// change bus.
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
	p, _ := c.peers.get(msg.Gw)
	lost := p.changes.heard(msg.Seq)
	c.mu.Unlock()
	msg.Change.From = msg.Gw
	c.opts.Changes.Publish(msg.Change)
	if lost {
		c.log.Info("changes made on another gateway were lost on the bus; re-reading what this gateway caches from the store", "peer", msg.Gw, "seq", msg.Seq)
		c.rereadAll(msg.Gw)
	}
	if msg.Change.Kind == changes.KeyRevoked {
		c.closeRevoked(msg.Change.Key)
	}
}

// closeRevoked ends the connections this gateway holds of a revoked agent
// key: the holder does it.
func (c *Cluster) closeRevoked(key string) {
	c.mu.Lock()
	var reps []*agents.Replica
	for _, rep := range c.local {
		if rep.AgentKey == key {
			reps = append(reps, rep)
		}
	}
	c.mu.Unlock()
	for _, rep := range reps {
		rep.Conn.Close("agent key revoked")
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
			c.rereadOnce(from)
		}
	}()
}

// rereadOnce publishes a settings change for every project, from gateway
// from. If the projects cannot be listed it asks for another re-read, a
// second later.
func (c *Cluster) rereadOnce(from string) {
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
		return
	}
	for _, id := range ids {
		c.opts.Changes.Publish(changes.Change{Project: id, Kind: changes.Settings, From: from})
	}
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
