// Package store defines what Spacefix keeps on disk: projects, hashed keys,
// the call log and daily usage. Implementations live in sub-packages
// (store/sqlite, store/postgres) and are wired only in cmd/spacefix;
// every implementation passes the contract suite in store/storetest.
//
// The package knows no HTTP and no MCP.
package store

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors callers branch on.
var (
	// ErrNotFound: no row matched.
	ErrNotFound = errors.New("not found")
	// ErrExists: a row with that unique name already exists.
	ErrExists = errors.New("already exists")
	// ErrConflict: another write changed the row first; read it again.
	ErrConflict = errors.New("changed by another write")
	// ErrSchemaTooNew: a newer build of spacefix migrated the store; this
	// build cannot safely use it.
	ErrSchemaTooNew = errors.New("database schema is newer than this build of spacefix")
)

// Key kinds.
const (
	KindAgent  = "agent"
	KindClient = "client"
)

// Store is the persistence the gateway and the CLI use: the union of the
// narrow interfaces below, one per concern. Implementations provide all of
// it and pass the contract suite in store/storetest; a consumer takes the
// narrowest of those interfaces (or a union of a few) it uses, so that
// what it may touch is written in its type. Every method is safe for
// concurrent use, and several processes (serve and the CLI) may open the
// same store at once.
type Store interface {
	Projects
	Keys
	CallWriter
	Calls
	Tools
	Users
	Sessions
	Invites
	APITokens
	Members
	Audit
	OAuth
	Checker
	Meta
	Gateways
	Tasks
	Idempotency
	UpstreamAccounts
	IdPs
	UsedOnce
	Policies

	// Close releases the store. It is safe to call twice.
	Close() error
}

// Projects reads and changes projects and their settings.
type Projects interface {
	// CreateProject creates a project with default settings; ErrExists if
	// the name is taken.
	CreateProject(ctx context.Context, name string) (Project, error)
	// Project returns the project with that name, or ErrNotFound.
	Project(ctx context.Context, name string) (Project, error)
	// ProjectByID returns the project with that id, or ErrNotFound.
	ProjectByID(ctx context.Context, id int64) (Project, error)
	// Projects lists every project, oldest first.
	Projects(ctx context.Context) ([]Project, error)
	// UpdateProjectSettings replaces a project's settings.
	UpdateProjectSettings(ctx context.Context, id int64, s ProjectSettings) error
}

// Keys stores agent and client keys by the hash of their secret.
type Keys interface {
	// CreateKey stores a new key. k.ID, k.ProjectID, k.Kind and hash are
	// required; k.CreatedAt is set by the store. hash is the SHA-256 of the
	// secret; the secret itself is never stored.
	CreateKey(ctx context.Context, k Key, hash []byte) (Key, error)
	// KeyByHash returns the key whose secret hashes to hash, revoked or not,
	// or ErrNotFound.
	KeyByHash(ctx context.Context, hash []byte) (Key, error)
	// Key returns a key by id, or ErrNotFound.
	Key(ctx context.Context, id string) (Key, error)
	// Keys lists the keys of a project (all projects when projectID is 0),
	// oldest first, revoked ones included.
	Keys(ctx context.Context, projectID int64) ([]Key, error)
	// RevokeKey marks a key revoked; ErrNotFound if there is no such key.
	// Revoking twice is not an error.
	RevokeKey(ctx context.Context, id string) error
	// SetKeyMeta replaces what people read about an agent key (display
	// name, author, community flag); ErrNotFound if there is no such key.
	SetKeyMeta(ctx context.Context, id string, m KeyMeta) error
	// SetKeyIdentityAudience sets the audience of the identity tokens the
	// gateway signs for calls to an agent key's replicas ("" turns them
	// off; see [Key.IdentityAudience]); ErrNotFound if there is no such
	// key.
	SetKeyIdentityAudience(ctx context.Context, id, audience string) error
}

// CallWriter writes the call log; [CallLog] batches records into it.
type CallWriter interface {
	// AppendCalls writes call log records and, for the billable ones,
	// increments the daily usage counts, in one transaction. If ctx
	// carries a batch id ([WithCallBatch]) that was written before, it
	// writes nothing and returns nil.
	AppendCalls(ctx context.Context, calls []Call) error
}

// Calls reads and prunes the call log and the daily usage counts.
type Calls interface {
	// Calls returns log records matching f, newest first.
	Calls(ctx context.Context, f CallFilter) ([]Call, error)
	// Usage returns billable calls per UTC day and name for a project, for
	// days in [from, to], ordered by day then name.
	Usage(ctx context.Context, projectID int64, from, to time.Time) ([]Usage, error)
	// PruneCalls deletes call log records older than before and returns how
	// many went, and forgets batch ids written more than [CallBatchKeep]
	// ago.
	PruneCalls(ctx context.Context, before time.Time) (int64, error)
}

// Tools keeps a project's per-tool settings and consent decisions.
type Tools interface {
	// ToolSettings lists a project's saved per-tool settings, by tool name.
	ToolSettings(ctx context.Context, projectID int64) ([]ToolSettings, error)
	// SaveToolSettings stores the settings of ts.ProjectID and ts.Tool,
	// replacing earlier ones, and returns them with UpdatedAt set. Settings
	// that are all defaults ([ToolSettings.IsZero]) delete the row instead.
	// ErrNotFound if the project does not exist.
	SaveToolSettings(ctx context.Context, ts ToolSettings) (ToolSettings, error)
	// Approvals lists a project's consent decisions, by tool name.
	Approvals(ctx context.Context, projectID int64) ([]Approval, error)
	// ApproveTool records def as the approved definition of a tool and
	// clears an earlier rejection. ErrNotFound if the project does not exist.
	ApproveTool(ctx context.Context, projectID int64, tool string, def []byte) (Approval, error)
	// RejectTool records def as rejected: the approved definition, if any,
	// stays. ErrNotFound if the project does not exist.
	RejectTool(ctx context.Context, projectID int64, tool string, def []byte) (Approval, error)
}

// Users keeps people's accounts.
type Users interface {
	// CreateUser stores a new user with a password hash (a PHC string, never
	// the password); ErrExists if the email is taken, compared without case.
	CreateUser(ctx context.Context, u User, passwordHash string) (User, error)
	// UserByEmail returns a user and its password hash, or ErrNotFound.
	UserByEmail(ctx context.Context, email string) (User, string, error)
	// UserByID returns a user, or ErrNotFound.
	UserByID(ctx context.Context, id int64) (User, error)
	// Users lists every user, oldest first.
	Users(ctx context.Context) ([]User, error)
	// SetPassword replaces a user's password hash and ends its sessions.
	SetPassword(ctx context.Context, userID int64, passwordHash string) error
	// SetAdmin gives or takes a user's instance admin flag; ErrNotFound if
	// there is no such user.
	SetAdmin(ctx context.Context, userID int64, admin bool) error
	// SetUserName sets the name a user gives themselves ("" takes it
	// away); ErrNotFound if there is no such user.
	SetUserName(ctx context.Context, userID int64, name string) error
	// DeleteUser removes a user with their sessions and memberships;
	// ErrNotFound if there is none. Their OAuth grants are the caller's to
	// revoke.
	DeleteUser(ctx context.Context, userID int64) error
}

// Sessions keeps sign-in sessions by the hash of their token.
type Sessions interface {
	// CreateSession stores a sign-in session under the SHA-256 of its
	// token; ErrNotFound if the user does not exist.
	CreateSession(ctx context.Context, sess Session, hash []byte) (Session, error)
	// SessionByHash returns the live session whose token hashes to hash;
	// ErrNotFound if there is none or it expired.
	SessionByHash(ctx context.Context, hash []byte) (Session, error)
	// DeleteSession ends a session; ending an unknown one is not an error.
	DeleteSession(ctx context.Context, hash []byte) error
}

// Invites keeps one-time sign-up links by the hash of their secret.
type Invites interface {
	// CreateInvite stores a one-time sign-up token (the first-run setup
	// link is an invite with Admin set) under the SHA-256 of its secret.
	CreateInvite(ctx context.Context, inv Invite, hash []byte) (Invite, error)
	// UseInvite marks an invite used and returns it, once: ErrNotFound if
	// the hash matches no invite, or one that is used or expired.
	UseInvite(ctx context.Context, hash []byte) (Invite, error)
	// InviteByHash returns an unused, unexpired invite without using it, or
	// ErrNotFound.
	InviteByHash(ctx context.Context, hash []byte) (Invite, error)
	// Invites lists the invites that can still be used, oldest first.
	Invites(ctx context.Context) ([]Invite, error)
	// RevokeInvite ends an invite that can still be used; ErrNotFound if
	// there is none by that id.
	RevokeInvite(ctx context.Context, id string) error
}

// APITokens keeps admin API tokens by the hash of their secret.
type APITokens interface {
	// CreateAPIToken stores an admin API token under the SHA-256 of its
	// secret; ErrExists if the id or hash is taken.
	CreateAPIToken(ctx context.Context, tok APIToken, hash []byte) (APIToken, error)
	// APITokenByHash returns the token whose secret hashes to hash, revoked
	// or not, or ErrNotFound.
	APITokenByHash(ctx context.Context, hash []byte) (APIToken, error)
	// APITokens lists every admin API token, oldest first.
	APITokens(ctx context.Context) ([]APIToken, error)
	// RevokeAPIToken marks a token revoked; ErrNotFound if there is none.
	RevokeAPIToken(ctx context.Context, id string) error
}

// Members keeps who belongs to which project, with which role.
type Members interface {
	// SetMember makes a user a member of a project with a role, or changes
	// the role of one who is; ErrNotFound if the user or project does not
	// exist. It returns the membership as stored.
	SetMember(ctx context.Context, m Member) (Member, error)
	// RemoveMember ends a membership; ErrNotFound if there is none.
	RemoveMember(ctx context.Context, projectID, userID int64) error
	// Member returns a user's membership of a project, or ErrNotFound.
	Member(ctx context.Context, projectID, userID int64) (Member, error)
	// Members lists a project's members, oldest first.
	Members(ctx context.Context, projectID int64) ([]Member, error)
	// Memberships lists the projects a user belongs to, by project id.
	Memberships(ctx context.Context, userID int64) ([]Member, error)
	// AcceptInvite uses a project invite for a person who has an account:
	// in one transaction it marks the invite used and makes the user a
	// member of the invite's project with the invite's role, and returns
	// both. A user who is a member already keeps their role (the invite is
	// used all the same). ErrNotFound if the hash matches no live project
	// invite, or the user or the project is gone; the invite is then left
	// as it was. Whether the user may use the invite (its email) is the
	// caller's to check.
	AcceptInvite(ctx context.Context, hash []byte, userID int64) (Invite, Member, error)
}

// Audit keeps the append-only audit log.
type Audit interface {
	// AppendAudit appends an entry to the audit log and returns it with
	// its id and time. The log is append-only: no method changes an entry,
	// and only PruneAudit removes them, by age.
	AppendAudit(ctx context.Context, e AuditEntry) (AuditEntry, error)
	// Audit returns entries newest first, as the filter says.
	Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
	// PruneAudit deletes entries older than before and says how many.
	PruneAudit(ctx context.Context, before time.Time) (int64, error)
}

// OAuth keeps registered OAuth clients, the grants people approve and
// their codes and tokens.
type OAuth interface {
	// CreateOAuthClient stores a dynamically registered OAuth client;
	// ErrExists if its id is taken.
	CreateOAuthClient(ctx context.Context, c OAuthClient) error
	// OAuthClient returns a registered client by id, or ErrNotFound.
	OAuthClient(ctx context.Context, id string) (OAuthClient, error)
	// CountOAuthClients says how many registered clients there are.
	CountOAuthClients(ctx context.Context) (int64, error)
	// PruneOAuthClients deletes the registered clients registered before
	// unused that are not in use: no grant names them, or every grant that
	// does is revoked or has no code or token left, and none of those was
	// created, used or revoked at or after idle. It says how many went.
	PruneOAuthClients(ctx context.Context, unused, idle time.Time) (int64, error)
	// CreateOAuthGrant stores a new grant (CreatedAt set by the store);
	// ErrExists if its id is taken.
	CreateOAuthGrant(ctx context.Context, g OAuthGrant) (OAuthGrant, error)
	// OAuthGrant returns a grant by id, revoked or not, or ErrNotFound.
	OAuthGrant(ctx context.Context, id string) (OAuthGrant, error)
	// OAuthGrants lists a project's live grants, newest first.
	OAuthGrants(ctx context.Context, projectID int64) ([]OAuthGrant, error)
	// RevokeOAuthGrant marks a grant revoked, which ends every token of
	// it; ErrNotFound if there is none. Revoking twice is not an error.
	RevokeOAuthGrant(ctx context.Context, id string) error
	// TouchOAuthGrant records that a token of the grant was used at t.
	TouchOAuthGrant(ctx context.Context, id string, t time.Time) error
	// CreateOAuthToken stores a code or token under the hash of its
	// secret; ErrExists if the hash is taken.
	CreateOAuthToken(ctx context.Context, tok OAuthToken, hash []byte) error
	// OAuthToken returns the code or token whose secret hashes to hash,
	// expired or used or not, or ErrNotFound.
	OAuthToken(ctx context.Context, hash []byte) (OAuthToken, error)
	// UseOAuthToken marks a code or refresh token used and returns it, in
	// one step, so that one secret is never used twice. A secret used
	// before returns the token with ErrUsed; an unknown one ErrNotFound.
	// Expiry is the caller's to check.
	UseOAuthToken(ctx context.Context, hash []byte) (OAuthToken, error)
	// PruneOAuthTokens deletes codes and tokens that expired before t and
	// returns how many.
	PruneOAuthTokens(ctx context.Context, before time.Time) (int64, error)
}

// Checker says whether the store takes writes (/readyz).
type Checker interface {
	// Check reports whether the store can take writes now: nil, or an
	// error that says what is wrong and what to do. It writes a little (a
	// probe row), so callers throttle it; /readyz calls it at most every
	// few seconds. After Close it returns an error.
	Check(ctx context.Context) error
}

// Meta keeps small named values such as [MetaServeURL].
type Meta interface {
	// SetMeta stores a small named value, replacing an earlier one.
	SetMeta(ctx context.Context, name, value string) error
	// Meta returns a value stored with SetMeta, or ErrNotFound.
	Meta(ctx context.Context, name string) (string, error)
	// SwapMeta stores value under name only if the stored value is still
	// old ("" meaning none is stored), and reports whether it did: of
	// gateways that change a value at once, one wins and the others
	// re-read.
	SwapMeta(ctx context.Context, name, old, value string) (bool, error)
}

// Gateways keeps the gateway processes that share the store.
type Gateways interface {
	// RecordGateway records that a gateway process sharing the store is
	// alive: it stores gw under gw.ID, replacing an earlier record, with
	// SeenAt set to now.
	RecordGateway(ctx context.Context, gw Gateway) error
	// Gateways lists the gateway processes seen at or after since, oldest
	// start first (ties by id).
	Gateways(ctx context.Context, since time.Time) ([]Gateway, error)
	// RemoveGateway forgets a gateway process; forgetting an unknown one
	// is not an error.
	RemoveGateway(ctx context.Context, id string) error
}

// Names of [Store.Meta] values.
const (
	// MetaServeURL is the base URL `spacefix serve` last listened on with
	// this store, so that the admin commands find the gateway without --url.
	MetaServeURL = "serve_url"
)

// Gateway is one running gateway process that uses the store, as it
// records itself every few seconds.
type Gateway struct {
	ID        string // "gw-…", new at every start
	Host      string // the machine's host name
	PID       int
	Addr      string // the address it listens on
	Bus       bool   // it shares agents and calls with the others over a bus
	StartedAt time.Time
	SeenAt    time.Time // set by the store
}

// Project is a tenant.
type Project struct {
	ID        int64
	Name      string
	CreatedAt time.Time
	Settings  ProjectSettings
}

// ProjectSettings are a project's knobs. The zero value of each field means
// the default given in its comment.
type ProjectSettings struct {
	// CallWaitMs is how long a call waits for its result when the tool
	// declares no timeout of its own: 1000–30000; 0 means 30000.
	CallWaitMs int `json:"callWaitMs,omitempty"`
	// ReadOnlyClients makes every client of the project read-only.
	ReadOnlyClients bool `json:"readOnlyClients,omitempty"`
	// MaxTools, MaxSchemaBytes, MaxResources and MaxRegistrationBytes
	// override the per-agent limits; 0 means the default of SPEC.md.
	MaxTools             int `json:"maxTools,omitempty"`
	MaxSchemaBytes       int `json:"maxSchemaBytes,omitempty"`
	MaxResources         int `json:"maxResources,omitempty"`
	MaxRegistrationBytes int `json:"maxRegistrationBytes,omitempty"`
	// ApproveToolChanges holds new tools and changed definitions as
	// pending until someone approves them; clients see the last approved
	// definition meanwhile.
	ApproveToolChanges bool `json:"approveToolChanges,omitempty"`
	// RateLimitPerMinute is how many calls one client key may make per
	// minute; 0 means no limit.
	RateLimitPerMinute int `json:"rateLimitPerMinute,omitempty"`
	// MaxArgumentBytes is the largest arguments a tool call may carry, in
	// bytes of JSON: 1,024–33,554,432; 0 means 1,048,576 (1 MiB).
	MaxArgumentBytes int `json:"maxArgumentBytes,omitempty"`
	// LongestTaskMs is how long a task's call may run before it is
	// cancelled and the task fails: 1 to [MaxLongestTask]; 0 means
	// [DefaultLongestTask].
	LongestTaskMs int64 `json:"longestTaskMs,omitempty"`
	// TaskTTLMs caps how long an ended task and its result are kept
	// (a client asks for less or more; it gets at most this): 1 to
	// [MaxTaskTTL]; 0 means [DefaultTaskTTL].
	TaskTTLMs int64 `json:"taskTTLMs,omitempty"`
	// IdempotencyWindowMs is how long the outcome of a call to a tool
	// with an idempotency key is kept for repeats of its request id:
	// [MinIdempotencyWindow] to [MaxIdempotencyWindow]; 0 means
	// [DefaultIdempotencyWindow].
	IdempotencyWindowMs int64 `json:"idempotencyWindowMs,omitempty"`
	// MaxRunningTasks is how many tasks (and jobs) one caller — a person
	// through OAuth, else a key — may have running in the project at once:
	// 1 to [MaxRunningTasksCap]; 0 means [DefaultMaxRunningTasks]. Each
	// running task holds memory in its gateway and a store row that its
	// progress writes to; without a cap one key could starve the others.
	MaxRunningTasks int `json:"maxRunningTasks,omitempty"`
}

// Bounds of [ProjectSettings.MaxRunningTasks].
const (
	DefaultMaxRunningTasks = 100
	MaxRunningTasksCap     = 10_000
)

// RunningTaskCap returns how many tasks one caller may run in the project
// at once.
func (s ProjectSettings) RunningTaskCap() int {
	if s.MaxRunningTasks <= 0 {
		return DefaultMaxRunningTasks
	}
	return min(s.MaxRunningTasks, MaxRunningTasksCap)
}

// IdempotencyWindow returns how long the project keeps a request id's
// outcome.
func (s ProjectSettings) IdempotencyWindow() time.Duration {
	w := bounded(s.IdempotencyWindowMs, DefaultIdempotencyWindow, MaxIdempotencyWindow)
	return max(w, MinIdempotencyWindow)
}

// Bounds of the task settings.
const (
	DefaultLongestTask = time.Hour
	MaxLongestTask     = 24 * time.Hour
	DefaultTaskTTL     = 24 * time.Hour
	MaxTaskTTL         = 7 * 24 * time.Hour
)

// LongestTask returns the project's longest task.
func (s ProjectSettings) LongestTask() time.Duration {
	return bounded(s.LongestTaskMs, DefaultLongestTask, MaxLongestTask)
}

// TaskTTL returns the longest an ended task of the project is kept.
func (s ProjectSettings) TaskTTL() time.Duration {
	return bounded(s.TaskTTLMs, DefaultTaskTTL, MaxTaskTTL)
}

// bounded is ms as a duration, def when it is not positive, at most max
// (a value stored by hand is never trusted to be in bounds).
func bounded(ms int64, def, max time.Duration) time.Duration {
	if ms <= 0 {
		return def
	}
	if ms > max.Milliseconds() {
		return max
	}
	return time.Duration(ms) * time.Millisecond
}

// DefaultMaxArgumentBytes is the largest arguments a call may carry when
// the project says nothing else.
const DefaultMaxArgumentBytes = 1 << 20

// ArgumentLimit returns the largest arguments a call may carry, in bytes.
func (s ProjectSettings) ArgumentLimit() int {
	if s.MaxArgumentBytes <= 0 {
		return DefaultMaxArgumentBytes
	}
	return s.MaxArgumentBytes
}

// CallWait returns the project's call wait.
func (s ProjectSettings) CallWait() time.Duration {
	if s.CallWaitMs <= 0 {
		return 30 * time.Second
	}
	return time.Duration(s.CallWaitMs) * time.Millisecond
}

// Key is an agent or client key, without its secret.
type Key struct {
	ID          string // public id, "key_…"
	ProjectID   int64
	ProjectName string // filled on reads
	Kind        string // KindAgent or KindClient
	Name        string // a label for people
	// ReadOnly limits a client key to tools that count as reads.
	ReadOnly bool
	// Tools, when non-empty, is the client key's tool allow-list.
	Tools []string
	// KeyMeta describes an agent key's code to people and models.
	KeyMeta
	// IdentityAudience, when set on an agent key, makes every call to the
	// key's replicas carry a signed identity token (a JWT) with this
	// audience, for the provider to pass to its own backend; "" sends
	// none. See docs/identity.md.
	IdentityAudience string

	CreatedAt time.Time
	RevokedAt time.Time // zero while the key is live
	// OAuth marks the key an OAuth grant acts as on the MCP endpoint (its
	// ID is the grant's); never stored.
	OAuth bool
}

// Revoked reports whether the key has been revoked.
func (k Key) Revoked() bool { return !k.RevokedAt.IsZero() }

// KeyMeta is what the dashboard says about an agent key.
type KeyMeta struct {
	// DisplayName is the agent's name for people; empty means the key name.
	DisplayName string
	// Author says who wrote the agent's code; empty means unknown.
	Author string
	// Community marks code the project owner did not write: its tools'
	// descriptions reach models with a prefix that says so.
	Community bool
}

// Call outcomes.
const (
	OutcomeOK           = "ok"
	OutcomeError        = "error"        // the handler failed or returned isError
	OutcomeTimeout      = "timeout"      // the wait expired
	OutcomeCancelled    = "cancelled"    // the client cancelled
	OutcomeDisconnected = "disconnected" // the replica went away mid-call
)

// Call is one call log record: a call that reached an agent.
type Call struct {
	ID        int64
	Time      time.Time // when the call started
	ProjectID int64
	Kind      string // "tool", "resource" or "prompt"
	Name      string // exposed tool or prompt name, or resource URI
	KeyID     string // the calling client key
	Agent     string // the agent key id that served it
	Replica   string // the replica id that served it
	Duration  time.Duration
	Outcome   string
	Error     string   // first MaxErrorRunes characters of the error, if any
	Progress  []string // progress lines, in order
	// Billable is true for every call that reached an agent.
	Billable bool
	// TaskID is the MCP task the call ran as; "" for a plain call.
	TaskID string
	// CallID is the gateway's id of the call ("c-…"); "" for records
	// written before it was kept.
	CallID string
	// Replay marks a repeat of a request id that the gateway answered
	// from its record without reaching an agent (not billable).
	Replay bool
	// RetryOf, on a call to a tool with an idempotency key, is the id of
	// the earlier call with the same request id that this one repeats:
	// the call whose result a replay got, or whose unknown outcome a
	// retry follows; "" otherwise.
	RetryOf string
	// Policy is what the project's policy did with the call: the rule or
	// interceptor that decided and what audit-mode ones would have done,
	// in words ("deny by rule \"amount-limit\"; audit: rule \"x\" would
	// confirm"); "" when none applied.
	Policy string
}

// MaxErrorRunes is how many characters of a call's error the log keeps.
const MaxErrorRunes = 300

// CallFilter selects call log records. Zero fields match everything.
type CallFilter struct {
	ProjectID int64
	Name      string
	Outcome   string
	KeyID     string
	Since     time.Time
	// AfterID selects records with a larger ID, that is written later: a
	// live tail passes the largest ID it has seen.
	AfterID int64
	Limit   int // 0 means 100
}

// Usage is the count of billable calls of one name on one UTC day.
type Usage struct {
	Day   time.Time // midnight UTC
	Kind  string
	Name  string
	Calls int64
}
