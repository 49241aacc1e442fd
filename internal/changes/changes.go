// Package changes is the gateway's one change path: the registry says when
// what a project's agents offer changed, the dashboard and the admin API say
// when saved state changed, and whoever depends on either (the MCP front's
// views, the result cache, the dashboard) subscribes to one [Bus].
//
// Delivery rule: [Bus.Publish] calls every subscriber synchronously, on the
// publisher's goroutine, in the order they subscribed, and returns when all
// have returned. Publishers are the registry (right after it released its
// lock) and request handlers, so a subscriber must be short and must never
// block: no network I/O, no waiting for another goroutine, no call back
// into the publisher. Work that may wait belongs on a goroutine of the
// subscriber's own. A subscriber that panics is recovered and logged; the
// others still hear the change.
//
// A [Change] is plain data (JSON-serialisable): the bus between gateways
// (internal/cluster) carries the same values to every other gateway.
package changes

import (
	"log/slog"
	"sync"

	"github.com/spacefix/spacefix/internal/recovery"
)

// Kind says what changed.
type Kind string

const (
	// AgentConnected: replicas of AgentKeys connected and are in the
	// registry's snapshot. Results of those agents' tools may differ now.
	AgentConnected Kind = "agent_connected"
	// Agents: what the project's agents offer changed otherwise (a replica
	// left or was disabled, a tool was switched on or off, a grace period
	// ended). AgentKeys are the agent keys concerned.
	Agents Kind = "agents"
	// Settings: saved state that changes what clients see changed: project
	// settings, tool edits, approvals, keys created, agent key metadata.
	// A gateway on a bus also publishes it for every project when it may
	// have missed a change another gateway made (package cluster), so that
	// what it caches is read from the store again.
	Settings Kind = "settings"
	// KeyRevoked: Key was revoked. It is a settings change too.
	KeyRevoked Kind = "key_revoked"
	// ResourceUpdated: an agent said the resource URI changed; clients
	// subscribed to it are told (notifications/resources/updated).
	ResourceUpdated Kind = "resource_updated"
)

// Change is one change to a project.
type Change struct {
	Project int64 `json:"project"`
	Kind    Kind  `json:"kind"`
	// AgentKeys, for AgentConnected and Agents, are the ids of the agent
	// keys concerned, sorted: the registry gathers the changes that arrive
	// while it rebuilds into one change, so a connect storm is a few
	// changes, not one per agent.
	AgentKeys []string `json:"agentKeys,omitempty"`
	Key       string   `json:"key,omitempty"` // KeyRevoked: the revoked key's id
	URI       string   `json:"uri,omitempty"` // ResourceUpdated: the resource's URI
	// From is the id of the gateway the change was made on, when it came
	// over the bus from another one; "" for a change made here.
	From string `json:"from,omitempty"`
}

// Registry reports whether the change came from the live registry of
// agents, as opposed to saved state.
func (c Change) Registry() bool { return c.Kind == AgentConnected || c.Kind == Agents }

// Bus delivers changes to its subscribers. The zero value is not usable;
// call [New]. A nil *Bus drops every change, so components work alone.
type Bus struct {
	log *slog.Logger

	mu   sync.RWMutex
	subs map[int]func(Change)
	ids  []int // subscription order
	next int
}

// New returns a bus without subscribers. A nil logger means slog.Default().
func New(log *slog.Logger) *Bus {
	if log == nil {
		log = slog.Default()
	}
	return &Bus{log: log, subs: make(map[int]func(Change))}
}

// Subscribe adds fn to the subscribers (see the package doc for what fn
// may do) and returns the function that removes it again.
func (b *Bus) Subscribe(fn func(Change)) (cancel func()) {
	if b == nil {
		return func() {}
	}
	b.mu.Lock()
	id := b.next
	b.next++
	b.subs[id] = fn
	b.ids = append(b.ids, id)
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.subs, id)
			for i, x := range b.ids {
				if x == id {
					b.ids = append(b.ids[:i:i], b.ids[i+1:]...)
					break
				}
			}
			b.mu.Unlock()
		})
	}
}

// Publish delivers c to every subscriber and returns when each returned.
func (b *Bus) Publish(c Change) {
	if b == nil {
		return
	}
	b.mu.RLock()
	fns := make([]func(Change), 0, len(b.ids))
	for _, id := range b.ids {
		fns = append(fns, b.subs[id])
	}
	b.mu.RUnlock()
	for _, fn := range fns {
		recovery.Do(b.log, "deliver a change", func() { fn(c) })
	}
}
