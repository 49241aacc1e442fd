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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yosida95/uritemplate/v3"

	"github.com/spacefix/spacefix/core/agentproto"
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

// Replica is one connected agent process.
type Replica struct {
	ID        string
	ProjectID int64
	AgentKey  string // the agent key id
	Instance  string
	Since     time.Time
	Reg       *agentproto.Registration
	// Schemas are the compiled input schemas of the tools in Reg, by
	// registered name. A call to one of its tools is validated against the
	// schema of the replica it is sent to.
	Schemas map[string]*schema.Schema
	// Conn carries calls to the replica.
	Conn Conn
	// Gateway is the id of the gateway that holds the replica's
	// connection when another one does (its calls go over the bus); ""
	// when this gateway does.
	Gateway string

	inflight atomic.Int64
	reported atomic.Int64 // see Report
	disabled atomic.Bool
	off      map[string]bool // tools this replica switched off (set_enabled); guarded by its project's mu
	idx      replicaIndex    // made once by Add
}

// Inflight returns the number of calls the replica is serving now: those
// this gateway sent, or, for a replica another gateway holds, what that
// gateway last reported of all gateways' calls, if more.
func (r *Replica) Inflight() int64 { return max(r.inflight.Load(), r.reported.Load()) }

// Report notes how many calls the holder of a replica another gateway
// holds says it is serving, from every gateway.
func (r *Replica) Report(n int64) { r.reported.Store(n) }

// Begin and End count a call in flight on the replica.
func (r *Replica) Begin() { r.inflight.Add(1) }

// End counts the end of a call begun with Begin.
func (r *Replica) End() { r.inflight.Add(-1) }

// Disabled reports whether the dashboard disabled this replica.
func (r *Replica) Disabled() bool { return r.disabled.Load() }

// Snapshot is what a project exposes at one moment. It is immutable; a new
// one replaces it on every change, and Changed is closed then.
type Snapshot struct {
	Tools        map[string]*Tool // by exposed name
	ToolList     []*Tool          // sorted by exposed name
	Resources    map[string]*Resource
	ResourceList []*Resource // sorted by URI
	Prompts      map[string]*Prompt
	PromptList   []*Prompt // sorted by name
	// Changed is closed when a newer snapshot replaces this one.
	Changed chan struct{}
}

var emptySnapshot = &Snapshot{Changed: make(chan struct{})}

// Tool is one exposed tool.
type Tool struct {
	Name     string // exposed name
	base     string // the exposed name without a collision suffix
	AgentKey string // the agent key that offers it
	// Reg is the registration of the newest replica that offers the tool
	// (its name, display name and author).
	Reg *agentproto.Registration
	// Def is the newest offering replica's definition, the one listed;
	// Def.Name is the registered name.
	Def agentproto.Tool
	// Schema is Def's compiled input schema. Calls are validated with
	// [Tool.SchemaOn] the replica they go to, whose schema may differ.
	Schema *schema.Schema
	// Enabled: at least one connected replica that offers the tool has it
	// switched on.
	Enabled bool
	// OwnsInstance: the tool's own schema has an "instance" property, so the
	// gateway does not add its instance argument.
	OwnsInstance bool
	// Replicas are the connected replicas that offer the tool, have it
	// switched on and are not disabled; empty while the tool is listed only
	// because of the grace period.
	Replicas []*Replica
	// GraceUntil, while no connected replica offers the tool, is when it
	// stops being listed.
	GraceUntil time.Time
	// Differs lists how the definitions of the connected replicas that offer
	// the tool differ from Def, e.g. "annotations.readOnlyHint: true vs
	// false"; empty when they agree.
	Differs []string
}

// SchemaOn returns the compiled input schema of the tool on rep, nil if rep
// has none for it.
func (t *Tool) SchemaOn(rep *Replica) *schema.Schema {
	return rep.Schemas[t.Def.Name]
}

// Instances returns the sorted, distinct instance names of the replicas
// that serve t.
func (t *Tool) Instances() []string {
	var out []string
	for _, r := range t.Replicas {
		if r.Instance != "" && !slices.Contains(out, r.Instance) {
			out = append(out, r.Instance)
		}
	}
	slices.Sort(out)
	return out
}

// ReadOnly reports whether the agent declares the tool a read.
func (t *Tool) ReadOnly() bool {
	return t.Def.Annotations != nil && t.Def.Annotations.ReadOnlyHint != nil && *t.Def.Annotations.ReadOnlyHint
}

// Resource is one exposed resource.
type Resource struct {
	Def        agentproto.Resource
	AgentKey   string
	Replicas   []*Replica
	GraceUntil time.Time
}

// Prompt is one exposed prompt.
type Prompt struct {
	Name       string // exposed name
	Def        agentproto.Prompt
	AgentKey   string
	Replicas   []*Replica
	GraceUntil time.Time
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

// ExposedName is the name a tool of reg is exposed under before collision
// suffixes.
func ExposedName(reg *agentproto.Registration, tool string) string {
	if reg.Namespace && reg.Name != "" {
		return strings.ReplaceAll(reg.Name, "-", "_") + "_" + tool
	}
	return tool
}
