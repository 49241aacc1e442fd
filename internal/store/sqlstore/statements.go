package sqlstore

import (
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// own are the statements of this package that [sqlshared.Statements]
// does not hold, one field a statement, written with ? placeholders in
// [ownQ]; [New] rebinds them for the dialect.
type own struct {
	UseInvite, RevokeAPIToken, APITokenExists string

	InsertTask, Task, UpdateTask, ListTasks, ListTasksBefore, RunningTasks string
	PruneTasks, FailGatewayTasks                                           string
	CountRunningTasks, TaskGateways, OverdueTasks                          string

	ClaimRequest, Request, ReclaimRequest, FinishRequest, ReleaseRequest, PruneRequests string

	InsertProject string

	InsertOAuthClient, OAuthClient, CountOAuthClients, PruneOAuthClients         string
	InsertOAuthGrant, OAuthGrant, OAuthGrants, RevokeOAuthGrant, TouchOAuthGrant string
	InsertOAuthToken, OAuthToken, UseOAuthToken, PruneOAuthTokens                string

	SetMember, AddMember, RemoveMember, Member, Members, Memberships, UserAndProject string
	UseProjectInvite, AppendAudit, PruneAudit                                        string

	ToolSettings, PutToolSettings, DeleteToolSettings string
	Approvals, Approval, ApproveTool, RejectTool      string

	NewestPolicy                                   string
	RecordGateway, Gateways, RemoveGateway         string
	SetMeta, Meta, SwapMeta, InsertMeta, CheckMeta string

	Usage, ProjectUsage, PruneCalls, PruneCallBatches string
}

var ownQ = own{
	// UseInvite marks a live invite used and returns it, in one
	// statement: of two sign-ups with one link, on any replicas, the
	// second finds the row used once the first commits. It takes the
	// time twice: the mark and now.
	UseInvite: `UPDATE invites SET used_at = ?
WHERE hash = ? AND used_at IS NULL AND expires_at > ?
RETURNING ` + sqlshared.InviteColumns,
	RevokeAPIToken: `UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`,
	APITokenExists: `SELECT 1 FROM api_tokens WHERE id = ?`,

	InsertTask: `INSERT INTO tasks (` + store.TaskColumns + `, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	Task: `SELECT ` + store.TaskColumns + ` FROM tasks WHERE id = ?`,
	// UpdateTask sets expires_at to NULL while the task runs: pruning
	// reads the ended ones by it.
	UpdateTask: `UPDATE tasks SET status = ?, status_message = ?, updated_at = ?, poll_ms = ?,
	result = ?, error = ?, input_requests = ?, expires_at = ? + ttl_ms
WHERE id = ? AND status NOT IN ` + taskTerminal,
	ListTasks: `SELECT ` + store.TaskColumns + ` FROM tasks WHERE project_id = ? AND owner = ?
ORDER BY created_at DESC, id DESC LIMIT ?`,
	ListTasksBefore: `SELECT ` + store.TaskColumns + ` FROM tasks WHERE project_id = ? AND owner = ?
	AND (created_at, id) < (SELECT created_at, id FROM tasks WHERE id = ?)
ORDER BY created_at DESC, id DESC LIMIT ?`,
	RunningTasks: `SELECT ` + store.TaskColumns + ` FROM tasks
WHERE project_id = ? AND status NOT IN ` + taskTerminal + ` ORDER BY created_at DESC, id DESC LIMIT ?`,
	PruneTasks: `DELETE FROM tasks WHERE expires_at < ?`,
	// FailGatewayTasks takes the time twice: updated_at and the start of
	// the TTL.
	FailGatewayTasks: `UPDATE tasks SET status = 'failed', status_message = ?, updated_at = ?,
	input_requests = NULL, expires_at = ? + ttl_ms
WHERE gateway = ? AND status NOT IN ` + taskTerminal,
	CountRunningTasks: sqlshared.CountRunningTasks,
	TaskGateways:      sqlshared.TaskGateways,
	OverdueTasks:      sqlshared.OverdueTasks,

	ClaimRequest: `INSERT INTO idempotency (` + store.RequestColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (project_id, tool, id_hash) DO UPDATE SET args_hash = excluded.args_hash, state = excluded.state,
	call_id = excluded.call_id, result = excluded.result, outcome = excluded.outcome, reason = excluded.reason,
	created_at = excluded.created_at, updated_at = excluded.updated_at, deadline = excluded.deadline,
	expires_at = excluded.expires_at
WHERE idempotency.expires_at <= excluded.created_at`,
	Request: `SELECT ` + store.RequestColumns + ` FROM idempotency
WHERE project_id = ? AND tool = ? AND id_hash = ?`,
	ReclaimRequest: `UPDATE idempotency SET args_hash = ?, state = ?, call_id = ?, result = ?, outcome = ?, reason = ?,
	created_at = ?, updated_at = ?, deadline = ?, expires_at = ?
WHERE project_id = ? AND tool = ? AND id_hash = ? AND call_id = ?
	AND (state = 'unknown' OR (state = 'running' AND deadline < ?))`,
	FinishRequest: `UPDATE idempotency SET state = ?, result = ?, outcome = ?, reason = ?, updated_at = ?, expires_at = ?
WHERE project_id = ? AND tool = ? AND id_hash = ? AND call_id = ? AND state = 'running'`,
	ReleaseRequest: `DELETE FROM idempotency
WHERE project_id = ? AND tool = ? AND id_hash = ? AND call_id = ? AND state = 'running'`,
	PruneRequests: `DELETE FROM idempotency WHERE expires_at < ?`,

	InsertProject: `INSERT INTO projects (name, created_at, settings) VALUES (?, ?, '{}') RETURNING id`,

	InsertOAuthClient: `INSERT INTO oauth_clients (id, metadata, secret_hash, created_at) VALUES (?, ?, ?, ?)`,
	OAuthClient:       `SELECT id, metadata, secret_hash, created_at FROM oauth_clients WHERE id = ?`,
	CountOAuthClients: `SELECT count(*) FROM oauth_clients`,
	// PruneOAuthClients takes the idle time three times.
	PruneOAuthClients: `DELETE FROM oauth_clients WHERE created_at < ? AND id NOT IN (
	SELECT g.client_id FROM oauth_grants g
	WHERE (g.revoked_at = 0 AND g.id IN (SELECT grant_id FROM oauth_tokens))
		OR g.created_at >= ? OR g.last_used_at >= ? OR g.revoked_at >= ?)`,
	InsertOAuthGrant: `INSERT INTO oauth_grants (id, project_id, user_id, client_id, client_name, scope, resource, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
	OAuthGrant:       selectGrant + ` WHERE g.id = ?`,
	OAuthGrants:      selectGrant + ` WHERE g.project_id = ? AND g.revoked_at = 0 ORDER BY g.created_at DESC, g.id`,
	RevokeOAuthGrant: `UPDATE oauth_grants SET revoked_at = CASE WHEN revoked_at = 0 THEN ? ELSE revoked_at END WHERE id = ?`,
	// TouchOAuthGrant takes the time twice.
	TouchOAuthGrant:  `UPDATE oauth_grants SET last_used_at = ? WHERE id = ? AND last_used_at < ?`,
	InsertOAuthToken: `INSERT INTO oauth_tokens (hash, kind, grant_id, data, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
	OAuthToken:       `SELECT ` + oauthTokenColumns + ` FROM oauth_tokens WHERE hash = ?`,
	UseOAuthToken:    `UPDATE oauth_tokens SET used_at = ? WHERE hash = ? AND used_at = 0 RETURNING ` + oauthTokenColumns,
	PruneOAuthTokens: `DELETE FROM oauth_tokens WHERE expires_at < ?`,

	SetMember: `INSERT INTO members (project_id, user_id, role, created_at) VALUES (?, ?, ?, ?)
ON CONFLICT (project_id, user_id) DO UPDATE SET role = excluded.role`,
	AddMember: `INSERT INTO members (project_id, user_id, role, created_at) VALUES (?, ?, ?, ?)
ON CONFLICT (project_id, user_id) DO NOTHING`,
	RemoveMember:   `DELETE FROM members WHERE project_id = ? AND user_id = ?`,
	Member:         selectMember + ` WHERE m.project_id = ? AND m.user_id = ?`,
	Members:        selectMember + ` WHERE m.project_id = ? ORDER BY m.created_at, m.user_id`,
	Memberships:    selectMember + ` WHERE m.user_id = ? ORDER BY m.project_id`,
	UserAndProject: `SELECT (SELECT COUNT(*) FROM users WHERE id = ?) + (SELECT COUNT(*) FROM projects WHERE id = ?)`,
	// UseProjectInvite is [own.UseInvite] for an invite to a project.
	UseProjectInvite: `UPDATE invites SET used_at = ?
WHERE hash = ? AND used_at IS NULL AND expires_at > ? AND project_id <> 0
RETURNING ` + sqlshared.InviteColumns,
	AppendAudit: `INSERT INTO audit (at, project_id, actor, addr, action, target, before, after)
VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
	PruneAudit: `DELETE FROM audit WHERE at < ?`,

	ToolSettings: `SELECT project_id, tool, description, cache_seconds, access, disabled, updated_at
FROM tool_settings WHERE project_id = ? ORDER BY tool`,
	PutToolSettings: `INSERT INTO tool_settings
(project_id, tool, description, cache_seconds, access, disabled, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (project_id, tool) DO UPDATE SET description = excluded.description,
cache_seconds = excluded.cache_seconds, access = excluded.access, disabled = excluded.disabled,
updated_at = excluded.updated_at`,
	DeleteToolSettings: `DELETE FROM tool_settings WHERE project_id = ? AND tool = ?`,
	Approvals:          selectApproval + ` WHERE project_id = ? ORDER BY tool`,
	Approval:           selectApproval + ` WHERE project_id = ? AND tool = ?`,
	// ApproveTool and RejectTool take the project, the tool, the
	// definition and the time.
	ApproveTool: `INSERT INTO approvals (project_id, tool, definition, approved_at)
VALUES (?, ?, ?, ?) ON CONFLICT (project_id, tool) DO UPDATE SET definition = excluded.definition,
approved_at = excluded.approved_at, rejected = NULL, rejected_at = NULL`,
	RejectTool: `INSERT INTO approvals (project_id, tool, rejected, rejected_at)
VALUES (?, ?, ?, ?) ON CONFLICT (project_id, tool) DO UPDATE SET rejected = excluded.rejected,
rejected_at = excluded.rejected_at`,

	NewestPolicy: `SELECT COALESCE(MAX(version), 0) FROM policies WHERE project_id = ?`,

	RecordGateway: `INSERT INTO gateways (id, host, pid, addr, bus, started_at, seen_at) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, addr = excluded.addr, bus = excluded.bus,
started_at = excluded.started_at, seen_at = excluded.seen_at`,
	Gateways:      `SELECT id, host, pid, addr, bus, started_at, seen_at FROM gateways WHERE seen_at >= ? ORDER BY started_at, id`,
	RemoveGateway: `DELETE FROM gateways WHERE id = ?`,

	SetMeta: `INSERT INTO meta (key, value, updated_at) VALUES (?, ?, ?)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
	Meta:       `SELECT value FROM meta WHERE key = ?`,
	SwapMeta:   `UPDATE meta SET value = ?, updated_at = ? WHERE key = ? AND value = ?`,
	InsertMeta: `INSERT INTO meta (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING`,
	// CheckMeta is the readiness probe's write: an upsert of one row, so
	// the probe never grows the store.
	CheckMeta: `INSERT INTO meta (key, value, updated_at) VALUES ('ready_probe', ?, ?)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,

	// Usage and ProjectUsage: SUM of a BIGINT is NUMERIC on PostgreSQL,
	// hence the cast.
	Usage: `SELECT day, kind, name, CAST(SUM(calls) AS BIGINT) FROM usage_daily WHERE day >= ? AND day <= ?
GROUP BY day, kind, name ORDER BY day, name, kind`,
	ProjectUsage: `SELECT day, kind, name, CAST(SUM(calls) AS BIGINT) FROM usage_daily WHERE day >= ? AND day <= ? AND project_id = ?
GROUP BY day, kind, name ORDER BY day, name, kind`,
	PruneCalls: `DELETE FROM calls WHERE id IN
(SELECT id FROM calls WHERE started_at < ? ORDER BY started_at LIMIT ?)`,
	PruneCallBatches: `DELETE FROM call_batches WHERE written_at < ?`,
}

const selectGrant = `SELECT g.id, g.project_id, p.name, g.user_id, COALESCE(u.email, ''), COALESCE(u.name, ''), g.client_id, g.client_name,
	g.scope, g.resource, g.created_at, g.last_used_at, g.revoked_at
FROM oauth_grants g JOIN projects p ON p.id = g.project_id LEFT JOIN users u ON u.id = g.user_id`

const oauthTokenColumns = `kind, grant_id, data, created_at, expires_at, used_at`

const taskTerminal = `('completed', 'failed', 'cancelled')`

const selectMember = `SELECT m.project_id, m.user_id, u.email, m.role, m.created_at FROM members m JOIN users u ON u.id = m.user_id`

const selectApproval = `SELECT project_id, tool, definition, approved_at, rejected, rejected_at FROM approvals`
