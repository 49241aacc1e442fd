package agents

import (
	"slices"

	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/recovery"
)

// commitLocked notes a change of p (whose lock the caller holds), unlocks
// p and returns once a snapshot with the change is live and published.
//
// Changes are gathered: if another goroutine is rebuilding, the change
// waits for the rebuild after it, which takes every change that arrived
// meanwhile. Otherwise this goroutine rebuilds once and publishes; changes
// that arrived during that rebuild are left to a background loop, so no
// caller rebuilds more than once.
func (r *Registry) commitLocked(p *project, kind changes.Kind, agentKey string) {
	if p.pending == nil {
		p.pending = make(map[string]changes.Kind)
		p.flushed = make(chan struct{})
	}
	if p.pending[agentKey] != changes.AgentConnected {
		p.pending[agentKey] = kind
	}
	if a := p.agents[agentKey]; a != nil {
		a.pieces = nil
	}
	if p.flushing {
		done := p.flushed
		p.mu.Unlock()
		<-done
		return
	}
	p.flushing = true
	r.flushLocked(p)
	// Changes that arrived during that rebuild go to a loop of their own:
	// this caller's change is live, it need not wait for theirs.
	p.mu.Lock()
	if p.pending == nil {
		p.flushing = false
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	recovery.Go(r.log, "rebuild a project's snapshot", func() {
		p.mu.Lock()
		for p.pending != nil {
			r.flushLocked(p)
			p.mu.Lock()
		}
		p.flushing = false
		p.mu.Unlock()
	})
}

// flushLocked rebuilds p's snapshot with the pending changes, unlocks p,
// logs the new differences between replicas, publishes the changes and
// wakes the callers that waited for them. The caller holds p.flushing.
func (r *Registry) flushLocked(p *project) {
	pending, done := p.pending, p.flushed
	p.pending, p.flushed = nil, nil
	warnings := r.rebuildLocked(p)
	p.mu.Unlock()
	for _, w := range warnings {
		r.log.Warn("replicas of one agent key register different definitions of a tool; run one agent key per service (spacefix keys create --kind agent)",
			"agent", w.agentKey, "tool", w.tool, "differs", w.differs)
	}
	var connected, other []string
	for k, kind := range pending {
		if kind == changes.AgentConnected {
			connected = append(connected, k)
		} else {
			other = append(other, k)
		}
	}
	for _, c := range []changes.Change{
		{Project: p.id, Kind: changes.AgentConnected, AgentKeys: connected},
		{Project: p.id, Kind: changes.Agents, AgentKeys: other},
	} {
		if len(c.AgentKeys) > 0 {
			slices.Sort(c.AgentKeys)
			r.changes.Publish(c)
		}
	}
	close(done)
}
