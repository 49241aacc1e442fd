package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

var _ store.Idempotency = (*Store)(nil)

// idempotencySchema is migration step 9: the outcome of each request id of
// a tool with an idempotency key (idempotency.go of package store), and
// the call log's call id, replays and retries.
const idempotencySchema = `
CREATE TABLE idempotency (
	project_id BIGINT NOT NULL,
	tool       TEXT   NOT NULL,
	id_hash    BLOB   NOT NULL,
	args_hash  BLOB   NOT NULL,
	state      TEXT   NOT NULL,
	call_id    TEXT   NOT NULL,
	result     BLOB,
	outcome    TEXT   NOT NULL,
	reason     TEXT   NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	deadline   BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,
	PRIMARY KEY (project_id, tool, id_hash)
);
CREATE INDEX idempotency_expires ON idempotency (expires_at);
ALTER TABLE calls ADD COLUMN call_id  TEXT    NOT NULL DEFAULT '';
ALTER TABLE calls ADD COLUMN replay   BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE calls ADD COLUMN retry_of TEXT    NOT NULL DEFAULT '';
`

// ClaimRequest implements [store.Idempotency]: an expired record that was
// not pruned yet is replaced, in the same statement.
func (s *Store) ClaimRequest(ctx context.Context, r store.Request) (store.Request, bool, error) {
	var claimed bool
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO idempotency (`+store.RequestColumns+`)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (project_id, tool, id_hash) DO UPDATE SET args_hash = excluded.args_hash, state = excluded.state,
	call_id = excluded.call_id, result = excluded.result, outcome = excluded.outcome, reason = excluded.reason,
	created_at = excluded.created_at, updated_at = excluded.updated_at, deadline = excluded.deadline,
	expires_at = excluded.expires_at
WHERE idempotency.expires_at <= excluded.created_at`,
			requestArgs(r)...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		claimed = n == 1
		return err
	})
	if err != nil {
		return store.Request{}, false, fmt.Errorf("claim request id of %s: %w", r.Tool, err)
	}
	if claimed {
		return r, true, nil
	}
	stood, err := s.Request(ctx, r.ProjectID, r.Tool, r.IDHash)
	if err != nil {
		return store.Request{}, false, fmt.Errorf("claim request id of %s: %w", r.Tool, err)
	}
	return stood, false, nil
}

// Request implements [store.Idempotency].
func (s *Store) Request(ctx context.Context, projectID int64, tool string, idHash []byte) (store.Request, error) {
	var (
		r                                   store.Request
		state                               string
		created, updated, deadline, expires int64
		result                              []byte
	)
	err := s.r.QueryRowContext(ctx, `SELECT `+store.RequestColumns+` FROM idempotency
WHERE project_id = ? AND tool = ? AND id_hash = ?`, projectID, tool, idHash).Scan(
		&r.ProjectID, &r.Tool, &r.IDHash, &r.ArgsHash, &state, &r.CallID, &result, &r.Outcome, &r.Reason,
		&created, &updated, &deadline, &expires)
	if err == sql.ErrNoRows {
		return store.Request{}, fmt.Errorf("request id of %s: %w", tool, store.ErrNotFound)
	}
	if err != nil {
		return store.Request{}, fmt.Errorf("request id of %s: %w", tool, err)
	}
	r.State, r.Result = store.RequestState(state), rawJSON(result)
	r.CreatedAt, r.UpdatedAt, r.Deadline, r.ExpiresAt = fromMillis(created), fromMillis(updated), fromMillis(deadline), fromMillis(expires)
	return r, nil
}

// ReclaimRequest implements [store.Idempotency].
func (s *Store) ReclaimRequest(ctx context.Context, r store.Request, prevCallID string) (bool, error) {
	n, err := s.execWrite(ctx, `UPDATE idempotency SET args_hash = ?, state = ?, call_id = ?, result = ?, outcome = ?, reason = ?,
	created_at = ?, updated_at = ?, deadline = ?, expires_at = ?
WHERE project_id = ? AND tool = ? AND id_hash = ? AND call_id = ?
	AND (state = 'unknown' OR (state = 'running' AND deadline < ?))`,
		r.ArgsHash, string(r.State), r.CallID, blob(r.Result), r.Outcome, r.Reason,
		millis(r.CreatedAt), millis(r.UpdatedAt), millis(r.Deadline), millis(r.ExpiresAt),
		r.ProjectID, r.Tool, r.IDHash, prevCallID, millis(store.StaleBefore(r.UpdatedAt)))
	if err != nil {
		return false, fmt.Errorf("reclaim request id of %s: %w", r.Tool, err)
	}
	return n == 1, nil
}

// FinishRequest implements [store.Idempotency].
func (s *Store) FinishRequest(ctx context.Context, r store.Request) (bool, error) {
	n, err := s.execWrite(ctx, `UPDATE idempotency SET state = ?, result = ?, outcome = ?, reason = ?, updated_at = ?, expires_at = ?
WHERE project_id = ? AND tool = ? AND id_hash = ? AND call_id = ? AND state = 'running'`,
		string(r.State), blob(r.Result), r.Outcome, r.Reason, millis(r.UpdatedAt), millis(r.ExpiresAt),
		r.ProjectID, r.Tool, r.IDHash, r.CallID)
	if err != nil {
		return false, fmt.Errorf("finish request id of %s: %w", r.Tool, err)
	}
	return n == 1, nil
}

// ReleaseRequest implements [store.Idempotency].
func (s *Store) ReleaseRequest(ctx context.Context, r store.Request) error {
	_, err := s.execWrite(ctx, `DELETE FROM idempotency
WHERE project_id = ? AND tool = ? AND id_hash = ? AND call_id = ? AND state = 'running'`,
		r.ProjectID, r.Tool, r.IDHash, r.CallID)
	if err != nil {
		return fmt.Errorf("release request id of %s: %w", r.Tool, err)
	}
	return nil
}

// PruneRequests implements [store.Idempotency].
func (s *Store) PruneRequests(ctx context.Context, now time.Time) (int64, error) {
	n, err := s.execWrite(ctx, `DELETE FROM idempotency WHERE expires_at < ?`, millis(now))
	if err != nil {
		return 0, fmt.Errorf("prune request ids: %w", err)
	}
	return n, nil
}

// execWrite runs one statement in a write transaction and returns the
// rows it changed.
func (s *Store) execWrite(ctx context.Context, q string, args ...any) (int64, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// requestArgs are r's values in the order of [store.RequestColumns].
func requestArgs(r store.Request) []any {
	return []any{r.ProjectID, r.Tool, r.IDHash, r.ArgsHash, string(r.State), r.CallID, blob(r.Result), r.Outcome, r.Reason,
		millis(r.CreatedAt), millis(r.UpdatedAt), millis(r.Deadline), millis(r.ExpiresAt)}
}
