// Package agents is the live registry of connected agent replicas and what
// they offer. It turns registrations into the tools, resources and prompts a
// project exposes: it assigns exposed names (namespaces, collision suffixes),
// keeps a tool listed for a grace period after its last replica left, and
// publishes an immutable [Snapshot] per project that the hot path reads
// without locks.
package agents

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/yosida95/uritemplate/v3"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/recovery"
	"github.com/spacefix/spacefix/internal/schema"
)

// DefaultGrace is how long a tool stays listed after its last replica left,
// so a rolling restart does not make it vanish.
const DefaultGrace = 10 * time.Second

// Registry holds every connected replica, by project.
type Registry struct {
	grace   time.Duration
	changes *changes.Bus
	log     *slog.Logger

	observer Observer

	mu       sync.RWMutex // guards projects; each project has its own lock
	projects map[int64]*project
}

// Options configure a Registry.
type Options struct {
	// Grace is how long a tool outlives its last replica; 0 means
	// [DefaultGrace].
	Grace time.Duration
	// Changes hears every change of a project's snapshot (kinds
	// [changes.AgentConnected] and [changes.Agents]), published outside
	// the registry's lock; nil means nobody does.
	Changes *changes.Bus
	// Logger receives the warning when replicas of one agent key register
	// different definitions of a tool; nil means slog.Default().
	Logger *slog.Logger
	// Observer hears of every replica that comes, goes or changes; nil
	// means nobody does.
	Observer Observer
}

// Observer hears of each replica's arrival, departure and changes of state
// (tools switched on or off, disabled), after the registry applied them and
// outside its locks, on the goroutine that made the change. Its methods
// must be short and must not block; they may read the replica
// ([Registry.Off], [Replica.Disabled]).
type Observer interface {
	ReplicaUp(rep *Replica)
	ReplicaDown(rep *Replica)
	ReplicaChanged(rep *Replica)
}

// New returns an empty registry.
func New(opts *Options) *Registry {
	r := &Registry{grace: DefaultGrace, projects: make(map[int64]*project), log: slog.Default()}
	if opts != nil {
		if opts.Grace > 0 {
			r.grace = opts.Grace
		}
		r.changes = opts.Changes
		r.observer = opts.Observer
		if opts.Logger != nil {
			r.log = opts.Logger
		}
	}
	return r
}

// Snapshot returns the current snapshot of a project. It never returns nil.
func (r *Registry) Snapshot(projectID int64) *Snapshot {
	r.mu.RLock()
	p := r.projects[projectID]
	r.mu.RUnlock()
	if p == nil {
		return emptySnapshot
	}
	if s := p.snap.Load(); s != nil {
		return s
	}
	return emptySnapshot
}

// project returns the project with id, creating it when create is set
// (nil otherwise, when there is none).
func (r *Registry) project(id int64, create bool) *project {
	r.mu.RLock()
	p := r.projects[id]
	r.mu.RUnlock()
	if p != nil || !create {
		return p
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p = r.projects[id]; p == nil {
		p = &project{id: id, agents: make(map[string]*agent)}
		r.projects[id] = p
	}
	return p
}

// Add registers a connected replica. schemas, if not nil, holds the
// compiled input schema of each tool in rep.Reg and becomes rep.Schemas.
// When Add returns, the project's snapshot includes the replica.
func (r *Registry) Add(rep *Replica, schemas map[string]*schema.Schema) {
	if schemas != nil {
		rep.Schemas = schemas
	}
	rep.off = make(map[string]bool)
	for _, t := range rep.Reg.Tools {
		if t.Disabled {
			rep.off[t.Name] = true
		}
	}
	for _, p := range rep.Reg.Prompts {
		if p.Disabled {
			rep.off[OffKey(agentproto.KindPrompt, p.Name)] = true
		}
	}
	for _, res := range rep.Reg.Resources {
		if res.Disabled {
			rep.off[OffKey(agentproto.KindResource, res.URI)] = true
		}
	}
	rep.idx = indexOf(rep.Reg)
	p := r.project(rep.ProjectID, true)
	p.mu.Lock()
	a := p.agents[rep.AgentKey]
	if a == nil {
		a = &agent{keyID: rep.AgentKey, first: rep.Since, names: make(map[string]string), warned: make(map[string]string)}
		p.agents[rep.AgentKey] = a
		p.place(a)
	} else if rep.Since.Before(a.first) {
		// A replica older than any seen: another gateway's, announced
		// late. The agent registered earlier than this gateway thought.
		p.order = slices.DeleteFunc(p.order, func(x *agent) bool { return x == a })
		a.first = rep.Since
		p.place(a)
	}
	a.replicas = append(a.replicas, rep)
	r.commitLocked(p, changes.AgentConnected, rep.AgentKey)
	if r.observer != nil {
		r.observer.ReplicaUp(rep)
	}
}

// Remove takes a replica out: its connection ended, or it is draining. What
// only it offered stays listed for the grace period. A second Remove of the
// same replica does nothing.
func (r *Registry) Remove(rep *Replica) {
	p := r.project(rep.ProjectID, false)
	if p == nil {
		return
	}
	p.mu.Lock()
	a := p.agents[rep.AgentKey]
	if a == nil || !slices.Contains(a.replicas, rep) {
		p.mu.Unlock()
		return // gone already: a draining replica is removed twice
	}
	a.replicas = slices.DeleteFunc(a.replicas, func(x *Replica) bool { return x == rep })
	a.ghosts = append(a.ghosts, ghost{rep: rep, until: time.Now().Add(r.grace)})
	time.AfterFunc(r.grace, func() {
		recovery.Do(r.log, "expire a departed replica", func() { r.expire(rep.ProjectID, rep.AgentKey) })
	})
	r.commitLocked(p, changes.Agents, rep.AgentKey)
	if r.observer != nil {
		r.observer.ReplicaDown(rep)
	}
}

// expire drops the ghosts whose grace period ended, and the agent once it
// has neither replicas nor ghosts.
func (r *Registry) expire(projectID int64, agentKey string) {
	p := r.project(projectID, false)
	if p == nil {
		return
	}
	p.mu.Lock()
	a := p.agents[agentKey]
	if a == nil {
		p.mu.Unlock()
		return
	}
	now := time.Now()
	n := len(a.ghosts)
	a.ghosts = slices.DeleteFunc(a.ghosts, func(g ghost) bool { return !now.Before(g.until) })
	if len(a.ghosts) == n {
		p.mu.Unlock()
		return
	}
	if len(a.replicas) == 0 && len(a.ghosts) == 0 {
		delete(p.agents, agentKey)
		p.order = slices.DeleteFunc(p.order, func(x *agent) bool { return x == a })
		for _, b := range a.bases {
			if p.gone == nil {
				p.gone = make(map[string]bool)
			}
			p.gone[b] = true
		}
		p.count(a, nil)
	}
	r.commitLocked(p, changes.Agents, agentKey)
}

// ResourceUpdated says that rep's resource uri (or a URI of one of its
// templates) changed: clients subscribed to it are told, on every gateway.
func (r *Registry) ResourceUpdated(rep *Replica, uri string) error {
	if !slices.ContainsFunc(rep.Reg.Resources, func(res agentproto.Resource) bool {
		return res.URI == uri || (res.Template && templateMatches(res.URI, uri))
	}) {
		return fmt.Errorf("resource updated: no resource %q registered by this replica", uri)
	}
	r.changes.Publish(changes.Change{Project: rep.ProjectID, Kind: changes.ResourceUpdated, URI: uri})
	return nil
}

// templateMatches reports whether uri is one of the URIs template names.
func templateMatches(template, uri string) bool {
	t, err := uritemplate.New(template)
	return err == nil && t.Match(uri) != nil
}

// SetEnabled switches one of rep's tools on or off. The state is the
// replica's own: a tool is listed while at least one connected replica has
// it on, and calls go only to replicas that have it on.
func (r *Registry) SetEnabled(rep *Replica, tool string, on bool) error {
	return r.SetEnabledKind(rep, agentproto.KindTool, tool, on)
}

// OffKey is how a replica's switched-off item is named in [Registry.Off]:
// a tool by its name, a prompt as "prompt:<name>", a resource as
// "resource:<uri>".
func OffKey(kind, name string) string {
	if kind == agentproto.KindTool || kind == "" {
		return name
	}
	return kind + ":" + name
}

// SetEnabledKind switches one of rep's tools, prompts (kind prompt) or
// resources (kind resource, name its URI or template) on or off, as
// SetEnabled does for tools: an item is listed while at least one
// connected replica has it on.
func (r *Registry) SetEnabledKind(rep *Replica, kind, name string, on bool) error {
	var known bool
	switch kind {
	case agentproto.KindTool, "":
		known = slices.ContainsFunc(rep.Reg.Tools, func(t agentproto.Tool) bool { return t.Name == name })
	case agentproto.KindPrompt:
		known = slices.ContainsFunc(rep.Reg.Prompts, func(p agentproto.Prompt) bool { return p.Name == name })
	case agentproto.KindResource:
		known = slices.ContainsFunc(rep.Reg.Resources, func(res agentproto.Resource) bool { return res.URI == name })
	}
	if !known {
		return fmt.Errorf("set enabled: no %s %q registered by this replica", kind, name)
	}
	tool := OffKey(kind, name)
	p := r.project(rep.ProjectID, false)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	if rep.off == nil || rep.off[tool] == !on {
		p.mu.Unlock()
		return nil
	}
	if on {
		delete(rep.off, tool)
	} else {
		rep.off[tool] = true
	}
	r.commitLocked(p, changes.Agents, rep.AgentKey)
	if r.observer != nil {
		r.observer.ReplicaChanged(rep)
	}
	return nil
}

// Off returns the tools rep switched off, sorted.
func (r *Registry) Off(rep *Replica) []string {
	p := r.project(rep.ProjectID, false)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	off := make([]string, 0, len(rep.off))
	for name := range rep.off {
		off = append(off, name)
	}
	slices.Sort(off)
	return off
}

// SetReplicaDisabled takes one replica out of (or back into) rotation.
func (r *Registry) SetReplicaDisabled(rep *Replica, disabled bool) {
	if rep.disabled.Swap(disabled) == disabled {
		return
	}
	p := r.project(rep.ProjectID, false)
	if p == nil {
		return
	}
	p.mu.Lock()
	r.commitLocked(p, changes.Agents, rep.AgentKey)
	if r.observer != nil {
		r.observer.ReplicaChanged(rep)
	}
}

// Replicas returns every connected replica of a project, oldest first.
func (r *Registry) Replicas(projectID int64) []*Replica {
	p := r.project(projectID, false)
	if p == nil {
		return nil
	}
	out := p.replicas()

	slices.SortFunc(out, func(a, b *Replica) int { return a.Since.Compare(b.Since) })
	return out
}

// All returns every connected replica, for shutdown.
func (r *Registry) All() []*Replica {
	r.mu.RLock()
	ps := make([]*project, 0, len(r.projects))
	for _, p := range r.projects {
		ps = append(ps, p)
	}
	r.mu.RUnlock()
	var out []*Replica
	for _, p := range ps {
		out = append(out, p.replicas()...)
	}
	return out
}

// replicas returns p's connected replicas in no particular order.
func (p *project) replicas() []*Replica {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*Replica
	for _, a := range p.agents {
		out = append(out, a.replicas...)
	}
	return out
}
