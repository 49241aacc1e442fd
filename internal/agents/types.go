package agents

import (
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/schema"
)

// The registry hands out these: replicas, the snapshot of what a project
// exposes, and its tools, resources and prompts.

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

// ExposedName is the name a tool of reg is exposed under before collision
// suffixes.
func ExposedName(reg *agentproto.Registration, tool string) string {
	if reg.Namespace && reg.Name != "" {
		return strings.ReplaceAll(reg.Name, "-", "_") + "_" + tool
	}
	return tool
}
