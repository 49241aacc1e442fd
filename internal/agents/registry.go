// Package agents is the live registry of connected agent replicas and what
// they offer. It turns registrations into the tools, resources and prompts a
// project exposes: it assigns exposed names (namespaces, collision suffixes),
// keeps a tool listed for a grace period after its last replica left, and
// publishes an immutable [Snapshot] per project that the hot path reads
// without locks.
package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/schema"
)

// DefaultGrace is how long a tool stays listed after its last replica left,
// so a rolling restart does not make it vanish.
const DefaultGrace = 10 * time.Second

// Registry holds every connected replica, by project.
type Registry struct {
	grace    time.Duration
	onChange func(projectID int64)

	mu       sync.RWMutex
	projects map[int64]*project
	seq      uint64 // orders agents by first registration
}

// Options configure a Registry.
type Options struct {
	// Grace is how long a tool outlives its last replica; 0 means
	// [DefaultGrace].
	Grace time.Duration
	// OnChange, if set, is called after a project's snapshot changed,
	// outside the registry's lock. It must not block for long.
	OnChange func(projectID int64)
}

// New returns an empty registry.
func New(opts *Options) *Registry {
	r := &Registry{grace: DefaultGrace, projects: make(map[int64]*project)}
	if opts != nil {
		if opts.Grace > 0 {
			r.grace = opts.Grace
		}
		r.onChange = opts.OnChange
	}
	return r
}

type project struct {
	id     int64
	agents map[string]*agent // by agent key id
	snap   atomic.Pointer[Snapshot]
}

// agent is everything connected with one agent key.
type agent struct {
	keyID    string
	seq      uint64
	replicas []*Replica
	// reg is the newest replica's registration: its definitions win.
	reg      *agentproto.Registration
	schemas  map[string]*schema.Schema
	disabled map[string]bool   // set_enabled state, by registered name
	names    map[string]string // registered tool name → exposed name
	goneAt   time.Time         // when the last replica left; zero while connected
}

// Replica is one connected agent process.
type Replica struct {
	ID        string
	ProjectID int64
	AgentKey  string // the agent key id
	Instance  string
	Since     time.Time
	Reg       *agentproto.Registration
	// Conn carries calls to the replica.
	Conn Conn

	inflight atomic.Int64
	disabled atomic.Bool
}

// Inflight returns the number of calls the replica is serving now.
func (r *Replica) Inflight() int64 { return r.inflight.Load() }

// Begin and End count a call in flight on the replica.
func (r *Replica) Begin() { r.inflight.Add(1) }

// End counts the end of a call begun with Begin.
func (r *Replica) End() { r.inflight.Add(-1) }

// Disabled reports whether the dashboard disabled this replica.
func (r *Replica) Disabled() bool { return r.disabled.Load() }

// Conn is what the registry needs of a replica's connection; the route
// package implements it.
type Conn interface {
	// Close ends the connection; calls in flight fail as disconnected.
	Close(reason string)
}

// Snapshot is what a project exposes at one moment. It is immutable; a new
// one replaces it on every change, and Changed is closed then.
type Snapshot struct {
	Tools     map[string]*Tool // by exposed name
	ToolList  []*Tool          // sorted by exposed name
	Resources map[string]*Resource
	ResList   []*Resource // sorted by URI
	Prompts   map[string]*Prompt
	PromptLst []*Prompt // sorted by name
	// Changed is closed when a newer snapshot replaces this one.
	Changed chan struct{}
}

var emptySnapshot = &Snapshot{Changed: make(chan struct{})}

// Tool is one exposed tool.
type Tool struct {
	Name     string // exposed name
	AgentKey string // the agent key that offers it
	// Reg is the offering agent's newest registration (its name, display
	// name and author).
	Reg     *agentproto.Registration
	Def     agentproto.Tool // as registered; Def.Name is the registered name
	Schema  *schema.Schema
	Enabled bool
	// OwnsInstance: the tool's own schema has an "instance" property, so the
	// gateway does not add its instance argument.
	OwnsInstance bool
	// Replicas are the connected replicas that offer the tool; empty while
	// the tool is listed only because of the grace period.
	Replicas []*Replica
	// GraceUntil, while Replicas is empty, is when the tool stops being
	// listed.
	GraceUntil time.Time
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

// Add registers a connected replica. schemas holds the compiled input schema
// of each tool in rep.Reg.
func (r *Registry) Add(rep *Replica, schemas map[string]*schema.Schema) {
	r.mu.Lock()
	p := r.projects[rep.ProjectID]
	if p == nil {
		p = &project{id: rep.ProjectID, agents: make(map[string]*agent)}
		r.projects[rep.ProjectID] = p
	}
	a := p.agents[rep.AgentKey]
	if a == nil {
		r.seq++
		a = &agent{keyID: rep.AgentKey, seq: r.seq, names: make(map[string]string), disabled: make(map[string]bool)}
		p.agents[rep.AgentKey] = a
	}
	a.replicas = append(a.replicas, rep)
	a.reg = rep.Reg
	a.schemas = schemas
	a.goneAt = time.Time{}
	for _, t := range rep.Reg.Tools {
		a.disabled[t.Name] = t.Disabled
	}
	r.rebuildLocked(p)
	r.mu.Unlock()
	r.changed(rep.ProjectID)
}

// Remove takes a replica out: its connection ended, or it is draining. A
// second Remove of the same replica does nothing.
func (r *Registry) Remove(rep *Replica) {
	r.mu.Lock()
	p := r.projects[rep.ProjectID]
	if p == nil {
		r.mu.Unlock()
		return
	}
	a := p.agents[rep.AgentKey]
	if a == nil || !slices.Contains(a.replicas, rep) {
		r.mu.Unlock()
		return // gone already: a draining replica is removed twice
	}
	a.replicas = slices.DeleteFunc(a.replicas, func(x *Replica) bool { return x == rep })
	if len(a.replicas) == 0 {
		a.goneAt = time.Now()
		time.AfterFunc(r.grace, func() { r.expire(rep.ProjectID, rep.AgentKey) })
	} else if a.reg == rep.Reg {
		a.reg = a.replicas[len(a.replicas)-1].Reg
	}
	r.rebuildLocked(p)
	r.mu.Unlock()
	r.changed(rep.ProjectID)
}

// expire drops an agent whose grace period ended without a replica coming
// back.
func (r *Registry) expire(projectID int64, agentKey string) {
	r.mu.Lock()
	p := r.projects[projectID]
	if p == nil {
		r.mu.Unlock()
		return
	}
	a := p.agents[agentKey]
	if a == nil || len(a.replicas) > 0 || time.Since(a.goneAt) < r.grace {
		r.mu.Unlock()
		return
	}
	delete(p.agents, agentKey)
	r.rebuildLocked(p)
	r.mu.Unlock()
	r.changed(projectID)
}

// SetEnabled switches one of an agent's tools on or off for every replica.
func (r *Registry) SetEnabled(projectID int64, agentKey, tool string, on bool) error {
	r.mu.Lock()
	p := r.projects[projectID]
	var a *agent
	if p != nil {
		a = p.agents[agentKey]
	}
	if a == nil || !slices.ContainsFunc(a.reg.Tools, func(t agentproto.Tool) bool { return t.Name == tool }) {
		r.mu.Unlock()
		return fmt.Errorf("set enabled: no tool %q registered by this agent", tool)
	}
	if a.disabled[tool] == !on {
		r.mu.Unlock()
		return nil
	}
	a.disabled[tool] = !on
	r.rebuildLocked(p)
	r.mu.Unlock()
	r.changed(projectID)
	return nil
}

// SetReplicaDisabled takes one replica out of (or back into) rotation.
func (r *Registry) SetReplicaDisabled(rep *Replica, disabled bool) {
	rep.disabled.Store(disabled)
	r.mu.Lock()
	if p := r.projects[rep.ProjectID]; p != nil {
		r.rebuildLocked(p)
	}
	r.mu.Unlock()
	r.changed(rep.ProjectID)
}

// Replicas returns every connected replica of a project, oldest first.
func (r *Registry) Replicas(projectID int64) []*Replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.projects[projectID]
	if p == nil {
		return nil
	}
	var out []*Replica
	for _, a := range p.agents {
		out = append(out, a.replicas...)
	}
	slices.SortFunc(out, func(a, b *Replica) int { return a.Since.Compare(b.Since) })
	return out
}

// All returns every connected replica, for shutdown.
func (r *Registry) All() []*Replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*Replica
	for _, p := range r.projects {
		for _, a := range p.agents {
			out = append(out, a.replicas...)
		}
	}
	return out
}

func (r *Registry) changed(projectID int64) {
	if r.onChange != nil {
		r.onChange(projectID)
	}
}

// ExposedName is the name a tool of reg is exposed under before collision
// suffixes.
func ExposedName(reg *agentproto.Registration, tool string) string {
	if reg.Namespace && reg.Name != "" {
		return strings.ReplaceAll(reg.Name, "-", "_") + "_" + tool
	}
	return tool
}

// rebuildLocked recomputes a project's snapshot. Agents are visited in the
// order they first registered, so the first keeps a contested name and later
// ones get _2, _3…; a name once assigned stays while its agent is known.
func (r *Registry) rebuildLocked(p *project) {
	order := make([]*agent, 0, len(p.agents))
	for _, a := range p.agents {
		order = append(order, a)
	}
	slices.SortFunc(order, func(x, y *agent) int { return int(x.seq) - int(y.seq) })

	s := &Snapshot{
		Tools:     make(map[string]*Tool),
		Resources: make(map[string]*Resource),
		Prompts:   make(map[string]*Prompt),
		Changed:   make(chan struct{}),
	}
	taken := make(map[string]string) // exposed name → agent key
	// Names already assigned keep their owners.
	for _, a := range order {
		for reg, exp := range a.names {
			if slices.ContainsFunc(a.reg.Tools, func(t agentproto.Tool) bool { return t.Name == reg }) {
				taken[exp] = a.keyID
			} else {
				delete(a.names, reg)
			}
		}
	}
	for _, a := range order {
		live := liveReplicas(a.replicas)
		var graceUntil time.Time
		if len(a.replicas) == 0 {
			graceUntil = a.goneAt.Add(r.grace)
		}
		for _, def := range a.reg.Tools {
			exp, ok := a.names[def.Name]
			if !ok {
				exp = uniqueName(ExposedName(a.reg, def.Name), taken)
				a.names[def.Name] = exp
				taken[exp] = a.keyID
			}
			var reps []*Replica
			for _, rep := range live {
				if slices.ContainsFunc(rep.Reg.Tools, func(t agentproto.Tool) bool { return t.Name == def.Name }) {
					reps = append(reps, rep)
				}
			}
			t := &Tool{
				Name: exp, AgentKey: a.keyID, Def: def, Schema: a.schemas[def.Name],
				Reg:     a.reg,
				Enabled: !a.disabled[def.Name], Replicas: reps, GraceUntil: graceUntil,
				OwnsInstance: hasProperty(def.InputSchema, "instance"),
			}
			s.Tools[exp] = t
			s.ToolList = append(s.ToolList, t)
		}
		for _, def := range a.reg.Resources {
			if _, dup := s.Resources[def.URI]; dup {
				continue // the first agent keeps a URI
			}
			res := &Resource{Def: def, AgentKey: a.keyID, Replicas: live, GraceUntil: graceUntil}
			s.Resources[def.URI] = res
			s.ResList = append(s.ResList, res)
		}
		for _, def := range a.reg.Prompts {
			name := ExposedName(a.reg, def.Name)
			if _, dup := s.Prompts[name]; dup {
				continue
			}
			pr := &Prompt{Name: name, Def: def, AgentKey: a.keyID, Replicas: live, GraceUntil: graceUntil}
			s.Prompts[name] = pr
			s.PromptLst = append(s.PromptLst, pr)
		}
	}
	slices.SortFunc(s.ToolList, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.ResList, func(a, b *Resource) int { return strings.Compare(a.Def.URI, b.Def.URI) })
	slices.SortFunc(s.PromptLst, func(a, b *Prompt) int { return strings.Compare(a.Name, b.Name) })
	if old := p.snap.Swap(s); old != nil {
		close(old.Changed)
	}
}

// hasProperty reports whether an object schema declares property name.
func hasProperty(schema json.RawMessage, name string) bool {
	if !bytes.Contains(schema, []byte(`"`+name+`"`)) {
		return false
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	json.Unmarshal(schema, &s)
	_, ok := s.Properties[name]
	return ok
}

// liveReplicas returns the replicas the dashboard has not disabled.
func liveReplicas(reps []*Replica) []*Replica {
	out := make([]*Replica, 0, len(reps))
	for _, r := range reps {
		if !r.Disabled() {
			out = append(out, r)
		}
	}
	return out
}

// uniqueName returns base, or base_2, base_3… whichever is not taken.
func uniqueName(base string, taken map[string]string) string {
	if _, ok := taken[base]; !ok {
		return base
	}
	for i := 2; ; i++ {
		n := fmt.Sprintf("%s_%d", base, i)
		if _, ok := taken[n]; !ok {
			return n
		}
	}
}
