package agents

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spacefix/spacefix/internal/changes"
)

// project is one project's agents. Changes to it are gathered: while one
// goroutine rebuilds the snapshot, the changes that arrive meanwhile wait
// and the next rebuild takes them all, so a storm of N connecting agents
// costs a few rebuilds and publications, not N (each of which would be
// O(N) and re-sync every client's view).
type project struct {
	id   int64
	snap atomic.Pointer[Snapshot]

	mu     sync.Mutex        // guards what follows, and the replicas' off maps
	agents map[string]*agent // by agent key id
	order  []*agent          // the same, in the order they registered (agent.first, then key)
	// pending are the agent keys changed since the last rebuild began, with
	// what happened to them (AgentConnected wins over Agents).
	pending map[string]changes.Kind
	// flushing: a goroutine is rebuilding; it (or the background loop it
	// starts) takes the pending changes after it.
	flushing bool
	// flushed is closed when a snapshot with the pending changes is live.
	flushed chan struct{}
	// gone are the base names of tools whose agent left the project since
	// the last rebuild: their families are checked (settleContested).
	gone map[string]bool
	// claimants counts, by base name, the agents whose pieces offer a
	// tool of that base: a family of one needs no look at the others.
	claimants map[string]int
}

// place inserts a into p.order at its place (see agent.first). p.mu is
// held. On one gateway agents arrive in that order, so this appends.
func (p *project) place(a *agent) {
	i, _ := slices.BinarySearchFunc(p.order, a, compareAgents)
	p.order = slices.Insert(p.order, i, a)
}

// count moves a's claims from the base names it was counted under to
// those of tools (nil: none). p.mu is held.
func (p *project) count(a *agent, tools []*Tool) {
	for _, b := range a.bases {
		if p.claimants[b]--; p.claimants[b] <= 0 {
			delete(p.claimants, b)
		}
	}
	a.bases = a.bases[:0]
	for _, t := range tools {
		if !slices.Contains(a.bases, t.base) {
			a.bases = append(a.bases, t.base)
		}
	}
	if len(a.bases) > 0 && p.claimants == nil {
		p.claimants = make(map[string]int)
	}
	for _, b := range a.bases {
		p.claimants[b]++
	}
}

// compareAgents orders agents by registration, then key.
func compareAgents(a, b *agent) int {
	if c := a.first.Compare(b.first); c != 0 {
		return c
	}
	return strings.Compare(a.keyID, b.keyID)
}

// agent is everything connected with one agent key. Its replicas may differ
// (a rolling deploy has old and new code connected at once), so nothing
// here describes what the agent offers: each [Replica] carries its own
// registration, compiled schemas and set_enabled state, and the snapshot is
// the union of them.
type agent struct {
	keyID string
	// first is when the agent registered: the Since of the oldest replica
	// seen while it stayed in the registry (with replicas or ghosts). It
	// orders the agents for contested names, the same way on every
	// gateway, since a mirrored replica carries its holder's Since.
	first    time.Time
	bases    []string   // the base names claimants counts it under
	replicas []*Replica // connected, in the order they registered
	// ghosts are replicas that left less than the grace period ago: what
	// only they offered stays listed, without replicas to serve it.
	ghosts []ghost
	names  map[string]string // registered tool name → exposed name
	// warned is the difference between replicas last logged, by registered
	// tool name, so that each difference is logged once.
	warned map[string]string
	// pieces are what the agent contributed to the last snapshot; nil
	// when it changed since, and the next rebuild makes them again.
	pieces *pieces
}

// ghost is a replica that left, kept for its definitions until until.
type ghost struct {
	rep   *Replica
	until time.Time
}
