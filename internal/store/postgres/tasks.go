package postgres

import (
	"context"
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
	result         BYTEA,
	error          BYTEA,
	input_requests BYTEA,
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
	var expires *int64
	if t.Status.Terminal() {
		x := store.TaskExpiry(t.UpdatedAt, t.TTL)
		expires = &x
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO tasks (`+store.TaskColumns+`, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`,
		t.ID, t.ProjectID, string(t.Owner), store.CleanText(t.Tool), t.AgentKey, t.Gateway, t.Era, string(t.Status), store.CleanText(t.StatusMessage),
		millis(t.CreatedAt), millis(t.UpdatedAt), t.TTL.Milliseconds(), t.PollInterval.Milliseconds(), millis(t.Deadline),
		blob(t.Result), e, blob(t.InputRequests), t.CallID, expires)
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
	var t store.Task
	err := s.readRetry(ctx, func() (err error) {
		t, err = scanTask(s.pool.QueryRow(ctx, `SELECT `+store.TaskColumns+` FROM tasks WHERE id = $1`, id))
		return err
	})
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
	var expires *int64
	if t.Status.Terminal() {
		x := millis(t.UpdatedAt)
		expires = &x
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tasks SET status = $1, status_message = $2, updated_at = $3, poll_ms = $4,
	result = $5, error = $6, input_requests = $7, expires_at = $8 + ttl_ms
WHERE id = $9 AND status NOT IN `+taskTerminal,
		string(t.Status), store.CleanText(t.StatusMessage), millis(t.UpdatedAt), t.PollInterval.Milliseconds(),
		blob(t.Result), e, blob(t.InputRequests), expires, t.ID)
	if err != nil {
		return false, fmt.Errorf("update task %s: %w", t.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ListTasks implements [store.Tasks].
func (s *Store) ListTasks(ctx context.Context, projectID int64, owner store.TaskOwner, before string, limit int) ([]store.Task, error) {
	q, args := `SELECT `+store.TaskColumns+` FROM tasks WHERE project_id = $1 AND owner = $2`, []any{projectID, string(owner)}
	if before != "" {
		q += ` AND (created_at, id) < (SELECT created_at, id FROM tasks WHERE id = $4)`
		args = append(args, limit, before)
	} else {
		args = append(args, limit)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT $3`
	var ts []store.Task
	err := s.readRetry(ctx, func() (err error) {
		ts, err = s.queryTasks(ctx, q, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return ts, nil
}

// RunningTasks implements [store.Tasks].
func (s *Store) RunningTasks(ctx context.Context, projectID int64, limit int) ([]store.Task, error) {
	var ts []store.Task
	err := s.readRetry(ctx, func() (err error) {
		ts, err = s.queryTasks(ctx, `SELECT `+store.TaskColumns+` FROM tasks
WHERE project_id = $1 AND status NOT IN `+taskTerminal+` ORDER BY created_at DESC, id DESC LIMIT $2`, projectID, limit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list running tasks: %w", err)
	}
	return ts, nil
}

// PruneTasks implements [store.Tasks].
func (s *Store) PruneTasks(ctx context.Context, now time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM tasks WHERE expires_at < $1`, millis(now))
	if err != nil {
		return 0, fmt.Errorf("prune tasks: %w", err)
	}
	return tag.RowsAffected(), nil
}

// FailGatewayTasks implements [store.Tasks].
func (s *Store) FailGatewayTasks(ctx context.Context, gatewayID, message string, now time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE tasks SET status = 'failed', status_message = $1, updated_at = $2,
	input_requests = NULL, expires_at = $2 + ttl_ms
WHERE gateway = $3 AND status NOT IN `+taskTerminal, store.CleanText(message), millis(now), gatewayID)
	if err != nil {
		return 0, fmt.Errorf("fail the tasks of gateway %s: %w", gatewayID, err)
	}
	return tag.RowsAffected(), nil
}

// queryTasks runs a query of tasks and scans every row.
func (s *Store) queryTasks(ctx context.Context, q string, args ...any) ([]store.Task, error) {
	rows, err := s.pool.Query(ctx, q, args...)
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

// taskRow is a pgx.Row or pgx.Rows.
type taskRow interface{ Scan(dest ...any) error }

func scanTask(row taskRow) (store.Task, error) {
	var (
		t                              store.Task
		owner, status                  string
		created, updated, ttl, poll, d int64
		result, e, inputs              []byte
	)
	err := row.Scan(&t.ID, &t.ProjectID, &owner, &t.Tool, &t.AgentKey, &t.Gateway, &t.Era, &status, &t.StatusMessage,
		&created, &updated, &ttl, &poll, &d, &result, &e, &inputs, &t.CallID)
	if err != nil {
		return store.Task{}, notFound(err)
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
func blob(b json.RawMessage) []byte {
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
