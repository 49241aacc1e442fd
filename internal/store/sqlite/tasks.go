package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

var _ store.Tasks = (*Store)(nil)

// tasksSchema is migration step 8: the tasks table, and the task id on a
// call log record. expires_at is NULL while a task runs: pruning reads the
// ended ones by it.
const tasksSchema = `
CREATE TABLE tasks (
	id             TEXT   PRIMARY KEY,
	project_id     BIGINT NOT NULL,
	owner          TEXT   NOT NULL,
	tool           TEXT   NOT NULL,
	agent_key      TEXT   NOT NULL,
	gateway        TEXT   NOT NULL,
	era            TEXT   NOT NULL,
	status         TEXT   NOT NULL,
	status_message TEXT   NOT NULL,
	created_at     BIGINT NOT NULL,
	updated_at     BIGINT NOT NULL,
	ttl_ms         BIGINT NOT NULL,
	poll_ms        BIGINT NOT NULL,
	deadline       BIGINT NOT NULL,
	result         BLOB,
	error          BLOB,
	input_requests BLOB,
	call_id        TEXT   NOT NULL,
	expires_at     BIGINT
);
CREATE INDEX tasks_owner ON tasks (project_id, owner, created_at);
CREATE INDEX tasks_expires ON tasks (expires_at);
CREATE INDEX tasks_gateway ON tasks (gateway, status);
ALTER TABLE calls ADD COLUMN task_id TEXT NOT NULL DEFAULT '';
`

const taskTerminal = `('completed', 'failed', 'cancelled')`

// CreateTask implements [store.Tasks].
func (s *Store) CreateTask(ctx context.Context, t store.Task) error {
	e, err := store.EncodeTaskError(t.Error)
	if err != nil {
		return fmt.Errorf("create task %s: %w", t.ID, err)
	}
	var expires any
	if t.Status.Terminal() {
		expires = store.TaskExpiry(t.UpdatedAt, t.TTL)
	}
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO tasks (`+store.TaskColumns+`, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			t.ID, t.ProjectID, string(t.Owner), t.Tool, t.AgentKey, t.Gateway, t.Era, string(t.Status), t.StatusMessage,
			millis(t.CreatedAt), millis(t.UpdatedAt), t.TTL.Milliseconds(), t.PollInterval.Milliseconds(), millis(t.Deadline),
			blob(t.Result), e, blob(t.InputRequests), t.CallID, expires)
		return err
	})
	if isUnique(err) {
		return fmt.Errorf("create task %s: %w", t.ID, store.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("create task %s: %w", t.ID, err)
	}
	return nil
}

// Task implements [store.Tasks].
func (s *Store) Task(ctx context.Context, id string) (store.Task, error) {
	t, err := scanTask(s.r.QueryRowContext(ctx, `SELECT `+store.TaskColumns+` FROM tasks WHERE id = ?`, id))
	if err != nil {
		return store.Task{}, fmt.Errorf("task %s: %w", id, err)
	}
	return t, nil
}

// UpdateTask implements [store.Tasks].
func (s *Store) UpdateTask(ctx context.Context, t store.Task) (bool, error) {
	e, err := store.EncodeTaskError(t.Error)
	if err != nil {
		return false, fmt.Errorf("update task %s: %w", t.ID, err)
	}
	var done bool
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE tasks SET status = ?, status_message = ?, updated_at = ?, poll_ms = ?,
	result = ?, error = ?, input_requests = ?, expires_at = CASE WHEN ? THEN ? + ttl_ms END
WHERE id = ? AND status NOT IN `+taskTerminal,
			string(t.Status), t.StatusMessage, millis(t.UpdatedAt), t.PollInterval.Milliseconds(),
			blob(t.Result), e, blob(t.InputRequests), t.Status.Terminal(), millis(t.UpdatedAt), t.ID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		done = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("update task %s: %w", t.ID, err)
	}
	return done, nil
}

// ListTasks implements [store.Tasks].
func (s *Store) ListTasks(ctx context.Context, projectID int64, owner store.TaskOwner, before string, limit int) ([]store.Task, error) {
	q, args := `SELECT `+store.TaskColumns+` FROM tasks WHERE project_id = ? AND owner = ?`, []any{projectID, string(owner)}
	if before != "" {
		q += ` AND (created_at, id) < (SELECT created_at, id FROM tasks WHERE id = ?)`
		args = append(args, before)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	ts, err := s.queryTasks(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return ts, nil
}

// RunningTasks implements [store.Tasks].
func (s *Store) RunningTasks(ctx context.Context, projectID int64, limit int) ([]store.Task, error) {
	ts, err := s.queryTasks(ctx, `SELECT `+store.TaskColumns+` FROM tasks
WHERE project_id = ? AND status NOT IN `+taskTerminal+` ORDER BY created_at DESC, id DESC LIMIT ?`, projectID, limit)
	if err != nil {
		return nil, fmt.Errorf("list running tasks: %w", err)
	}
	return ts, nil
}

// PruneTasks implements [store.Tasks].
func (s *Store) PruneTasks(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM tasks WHERE expires_at < ?`, millis(now))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune tasks: %w", err)
	}
	return n, nil
}

// FailGatewayTasks implements [store.Tasks].
func (s *Store) FailGatewayTasks(ctx context.Context, gatewayID, message string, now time.Time) (int64, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'failed', status_message = ?, updated_at = ?,
	input_requests = NULL, expires_at = ? + ttl_ms
WHERE gateway = ? AND status NOT IN `+taskTerminal, message, millis(now), millis(now), gatewayID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("fail the tasks of gateway %s: %w", gatewayID, err)
	}
	return n, nil
}

// queryTasks runs a query of tasks and scans every row.
func (s *Store) queryTasks(ctx context.Context, q string, args ...any) ([]store.Task, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// taskRow is a *sql.Row or *sql.Rows.
type taskRow interface{ Scan(dest ...any) error }

func scanTask(sc taskRow) (store.Task, error) {
	var (
		t                              store.Task
		owner, status                  string
		created, updated, ttl, poll, d int64
		result, e, inputs              []byte
	)
	err := sc.Scan(&t.ID, &t.ProjectID, &owner, &t.Tool, &t.AgentKey, &t.Gateway, &t.Era, &status, &t.StatusMessage,
		&created, &updated, &ttl, &poll, &d, &result, &e, &inputs, &t.CallID)
	if err == sql.ErrNoRows {
		return store.Task{}, store.ErrNotFound
	}
	if err != nil {
		return store.Task{}, err
	}
	t.Owner, t.Status = store.TaskOwner(owner), store.TaskStatus(status)
	t.CreatedAt, t.UpdatedAt, t.Deadline = fromMillis(created), fromMillis(updated), fromMillis(d)
	t.TTL, t.PollInterval = time.Duration(ttl)*time.Millisecond, time.Duration(poll)*time.Millisecond
	t.Result, t.InputRequests = rawJSON(result), rawJSON(inputs)
	if t.Error, err = store.DecodeTaskError(e); err != nil {
		return store.Task{}, fmt.Errorf("decode error of task %s: %w", t.ID, err)
	}
	return t, nil
}

// blob is raw JSON as stored: nil (NULL) for none.
func blob(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

// rawJSON is a stored blob as raw JSON: nil for NULL.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}
