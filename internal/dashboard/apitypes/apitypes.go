// Package apitypes holds the admin API's request and response bodies
// (docs/api.md): the dashboard serves them and cmd/spacefix sends and reads
// them, so the two cannot drift apart.
package apitypes

import (
	"strings"
	"time"
)

// Error is the body of every answer with a status of 400 or more.
type Error struct {
	Error string `json:"error"`
}

// Project is a project as GET /api/projects/{project} shows it.
type Project struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	MCPURL    string    `json:"mcpUrl"`
	Settings  Settings  `json:"settings"`
}

// Settings is a project's settings as the admin API shows them. Limits of 0
// mean the default of SPEC.md.
type Settings struct {
	CallWaitSeconds      int    `json:"callWaitSeconds"`
	ClientAccess         string `json:"clientAccess"`
	ApproveToolChanges   bool   `json:"approveToolChanges"`
	RateLimitPerMinute   int    `json:"rateLimitPerMinute"`
	MaxTools             int    `json:"maxTools"`
	MaxSchemaBytes       int    `json:"maxSchemaBytes"`
	MaxResources         int    `json:"maxResources"`
	MaxRegistrationBytes int    `json:"maxRegistrationBytes"`
	MaxArgumentBytes     int    `json:"maxArgumentBytes"`
	// LongestTaskMinutes is how long a task may run before its call is
	// cancelled and it fails; KeepTaskResultsHours how long an ended task
	// and its result are kept at most (docs/tasks.md).
	LongestTaskMinutes   int `json:"longestTaskMinutes"`
	KeepTaskResultsHours int `json:"keepTaskResultsHours"`
	// MaxRunningTasks is how many tasks and jobs one caller (a person
	// through OAuth, else a key) may have running at once: 1 to 10,000,
	// default 100; beyond it a new one is refused.
	MaxRunningTasks int `json:"maxRunningTasks"`
	// RepeatWindowHours is how long the outcome of a call to a
	// repeat-safe tool is kept for repeats of its request id: 1 to 720
	// hours (30 days), default 24.
	RepeatWindowHours int `json:"repeatWindowHours"`
}

// SettingsPatch is the body of PATCH …/settings: it changes the fields that
// are present.
type SettingsPatch struct {
	CallWaitSeconds      *int    `json:"callWaitSeconds,omitempty"`
	ClientAccess         *string `json:"clientAccess,omitempty"`
	ApproveToolChanges   *bool   `json:"approveToolChanges,omitempty"`
	RateLimitPerMinute   *int    `json:"rateLimitPerMinute,omitempty"`
	MaxTools             *int    `json:"maxTools,omitempty"`
	MaxSchemaBytes       *int    `json:"maxSchemaBytes,omitempty"`
	MaxResources         *int    `json:"maxResources,omitempty"`
	MaxRegistrationBytes *int    `json:"maxRegistrationBytes,omitempty"`
	MaxArgumentBytes     *int    `json:"maxArgumentBytes,omitempty"`
	LongestTaskMinutes   *int    `json:"longestTaskMinutes,omitempty"`
	KeepTaskResultsHours *int    `json:"keepTaskResultsHours,omitempty"`
	MaxRunningTasks      *int    `json:"maxRunningTasks,omitempty"`
	RepeatWindowHours    *int    `json:"repeatWindowHours,omitempty"`
}

// Pill is a label in the Tools table.
type Pill struct {
	Text  string `json:"text"`
	Class string `json:"class"`           // "", "info", "warn", "off", "muted"
	Title string `json:"title,omitempty"` // the details, shown on hover
}

// ToolSettings are the Edit dialog's fields.
type ToolSettings struct {
	Description  string `json:"description"`
	CacheSeconds int    `json:"cacheSeconds"`
	Access       string `json:"access"` // follow, read or write
	Disabled     bool   `json:"disabled"`
}

// Tool is one row of the Tools table, as GET …/tools lists it.
type Tool struct {
	Name       string `json:"name"`
	Registered bool   `json:"registered"`
	Agent      string `json:"agent,omitempty"`
	AgentKey   string `json:"agentKey,omitempty"`
	// AgentKeyName is the agent key's label: what tells apart two agents
	// that share a display name. Empty when the key has none.
	AgentKeyName string `json:"agentKeyName,omitempty"`
	// Description is what models see now; RegisteredDescription is what
	// the agent registers.
	Description           string       `json:"description"`
	RegisteredDescription string       `json:"registeredDescription"`
	ApprovedDescription   string       `json:"approvedDescription,omitempty"`
	DeclaredReadOnly      bool         `json:"declaredReadOnly"`
	ReadOnlyHintDeclared  bool         `json:"readOnlyHintDeclared"` // readOnlyHint declared at all, true or false
	ReadOnly              bool         `json:"readOnly"`
	EnabledByAgent        bool         `json:"enabledByAgent"`
	Replicas              int          `json:"replicas"`
	Settings              ToolSettings `json:"settings"`
	Consent               string       `json:"consent,omitempty"`
	DefinitionHash        string       `json:"definitionHash,omitempty"`
	// ReplicasDiffer says how the connected replicas' definitions of the
	// tool differ, e.g. "annotations.readOnlyHint: true vs false".
	ReplicasDiffer []string `json:"replicasDiffer,omitempty"`
	// IdempotencyKey is the argument that carries the tool's request id
	// when the tool is repeat-safe: the gateway answers a repeat of an id
	// itself (pill "Repeat-safe (requestId)").
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	Pills          []Pill `json:"pills"`
}

// Dimmed reports whether the row is shown dimmed: disabled from the
// dashboard.
func (t Tool) Dimmed() bool { return t.Settings.Disabled }

// Pending reports whether the row waits for approval.
func (t Tool) Pending() bool { return strings.HasPrefix(t.Consent, "pending") }

// ToolPatch is the body of PATCH …/tools/{tool}: it changes the Edit
// dialog's fields that are present.
type ToolPatch struct {
	Description  *string `json:"description,omitempty"`
	CacheSeconds *int    `json:"cacheSeconds,omitempty"`
	Access       *string `json:"access,omitempty"`
	Disabled     *bool   `json:"disabled,omitempty"`
}

// Task is a running MCP task, as GET …/tasks lists it.
type Task struct {
	ID     string `json:"id"`
	Tool   string `json:"tool"`
	Caller string `json:"caller"` // who started it: a key's label, a person's email
	// Owner is who the task belongs to: "key:<key id>" or "user:<user id>".
	Owner string `json:"owner"`
	// Era is how its client speaks tasks: "2025-11-25", "2026-07-28", or
	// "job" for a client without tasks (the gateway's job tool).
	Era           string    `json:"era"`
	Status        string    `json:"status"` // working or input_required (or how it ended, after a cancel)
	StatusMessage string    `json:"statusMessage,omitempty"`
	Started       time.Time `json:"started"`
	Deadline      time.Time `json:"deadline"` // it is stopped then: the project's longest task
}
