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
}

const taskTerminal = `('completed', 'failed', 'cancelled')`
