package store

import "time"

// Access overrides of [ToolSettings.Access].
const (
	AccessFollow = ""      // follow the agent's readOnlyHint
	AccessRead   = "read"  // read-only clients may see and call the tool
	AccessWrite  = "write" // hidden from read-only clients
)

// Limits of the per-tool controls, as SPEC.md gives them.
const (
	MaxDescriptionRunes = 1000
	MaxCacheSeconds     = 3600
)

// ToolSettings are the dashboard's controls of one exposed tool name in a
// project. They outlive the agent that registers the tool: a tool with
// saved settings and no connected agent is listed as not registered.
type ToolSettings struct {
	ProjectID int64
	Tool      string // the exposed name
	// Description replaces the registered description for models; empty
	// keeps the registered one.
	Description string
	// CacheSeconds is how long a successful result is reused for identical
	// arguments, 0 (off) to [MaxCacheSeconds].
	CacheSeconds int
	// Access is [AccessFollow], [AccessRead] or [AccessWrite].
	Access string
	// Disabled hides the tool from every client and refuses its calls.
	Disabled  bool
	UpdatedAt time.Time // set by the store
}

// IsZero reports whether ts changes nothing about its tool.
func (ts ToolSettings) IsZero() bool {
	return ts.Description == "" && ts.CacheSeconds == 0 && ts.Access == AccessFollow && !ts.Disabled
}

// CacheTTL returns how long results of the tool may be cached; 0: not at all.
func (ts ToolSettings) CacheTTL() time.Duration {
	return time.Duration(ts.CacheSeconds) * time.Second
}

// Approval is the consent state of one exposed tool name in a project.
// Definitions are canonical JSON as internal/access.Definition makes them,
// compared byte for byte.
type Approval struct {
	ProjectID int64
	Tool      string
	// Definition is the last approved definition; nil if none was ever
	// approved (a new tool stays hidden).
	Definition []byte
	ApprovedAt time.Time // zero if none was approved
	// Rejected is a definition someone rejected: it is no longer shown as
	// pending, and clients keep seeing Definition. Nil if none.
	Rejected   []byte
	RejectedAt time.Time
}
