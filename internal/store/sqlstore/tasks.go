package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

var _ store.Tasks = (*Store)(nil)

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
	_, err = s.db.Exec(ctx, s.q.InsertTask,
		t.ID, t.ProjectID, string(t.Owner), store.CleanText(t.Tool), t.AgentKey, t.Gateway, t.Era, string(t.Status), store.CleanText(t.StatusMessage),
		millis(t.CreatedAt), millis(t.UpdatedAt), t.TTL.Milliseconds(), t.PollInterval.Milliseconds(), millis(t.Deadline),
		blob(t.Result), e, blob(t.InputRequests), t.CallID, expires)
	if s.d.IsUnique(err) {
		return fmt.Errorf("create task %s: %w", t.ID, store.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("create task %s: %w", t.ID, err)
	}
	return nil
}

// Task implements [store.Tasks].
func (s *Store) Task(ctx context.Context, id string) (store.Task, error) {
	t, err := scanTask(s.db.QueryRow(ctx, s.q.Task, id))
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
	n, err := s.db.Exec(ctx, s.q.UpdateTask,
		string(t.Status), store.CleanText(t.StatusMessage), millis(t.UpdatedAt), t.PollInterval.Milliseconds(),
		blob(t.Result), e, blob(t.InputRequests), expires, t.ID)
	if err != nil {
		return false, fmt.Errorf("update task %s: %w", t.ID, err)
	}
	return n == 1, nil
}

// ListTasks implements [store.Tasks].
func (s *Store) ListTasks(ctx context.Context, projectID int64, owner store.TaskOwner, before string, limit int) ([]store.Task, error) {
	q, args := s.q.ListTasks, []any{projectID, string(owner), limit}
	if before != "" {
		q, args = s.q.ListTasksBefore, []any{projectID, string(owner), before, limit}
	}
	ts, err := list(ctx, s.db, scanTask, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return ts, nil
}

// RunningTasks implements [store.Tasks].
func (s *Store) RunningTasks(ctx context.Context, projectID int64, limit int) ([]store.Task, error) {
	ts, err := list(ctx, s.db, scanTask, s.q.RunningTasks, projectID, limit)
	if err != nil {
		return nil, fmt.Errorf("list running tasks: %w", err)
	}
	return ts, nil
}

// PruneTasks implements [store.Tasks].
func (s *Store) PruneTasks(ctx context.Context, now time.Time) (int64, error) {
	n, err := s.db.Exec(ctx, s.q.PruneTasks, millis(now))
	if err != nil {
		return 0, fmt.Errorf("prune tasks: %w", err)
	}
	return n, nil
}

// FailGatewayTasks implements [store.Tasks].
func (s *Store) FailGatewayTasks(ctx context.Context, gatewayID, message string, now time.Time) (int64, error) {
	n, err := s.db.Exec(ctx, s.q.FailGatewayTasks, store.CleanText(message), millis(now), millis(now), gatewayID)
	if err != nil {
		return 0, fmt.Errorf("fail the tasks of gateway %s: %w", gatewayID, err)
	}
	return n, nil
}

// RunningTaskCount implements [store.Tasks].
func (s *Store) RunningTaskCount(ctx context.Context, projectID int64, owner store.TaskOwner) (int, error) {
	var n int
	if err := s.db.QueryRow(ctx, s.q.CountRunningTasks, projectID, string(owner)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count running tasks: %w", err)
	}
	return n, nil
}

// TaskGateways implements [store.Tasks].
func (s *Store) TaskGateways(ctx context.Context) ([]string, error) {
	out, err := list(ctx, s.db, scanString, s.q.TaskGateways)
	if err != nil {
		return nil, fmt.Errorf("list the gateways of running tasks: %w", err)
	}
	return out, nil
}

// OverdueTasks implements [store.Tasks].
func (s *Store) OverdueTasks(ctx context.Context, before time.Time, limit int) ([]store.Task, error) {
	ts, err := list(ctx, s.db, scanTask, s.q.OverdueTasks, millis(before), limit)
	if err != nil {
		return nil, fmt.Errorf("list overdue tasks: %w", err)
	}
	return ts, nil
}

// scanTask scans a row of [store.TaskColumns].
func scanTask(row Row) (store.Task, error) {
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

// scanString scans a row of one text column.
func scanString(row Row) (string, error) {
	var v string
	return v, row.Scan(&v)
}
