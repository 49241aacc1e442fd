package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// runningTasksSchema is migration step 15 (sqlshared.RunningTasksSchema).
const runningTasksSchema = sqlshared.RunningTasksSchema

// RunningTaskCount implements [store.Tasks].
func (s *Store) RunningTaskCount(ctx context.Context, projectID int64, owner store.TaskOwner) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, sqlshared.CountRunningTasks, projectID, string(owner)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count running tasks: %w", err)
	}
	return n, nil
}

// TaskGateways implements [store.Tasks].
func (s *Store) TaskGateways(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, sqlshared.TaskGateways)
	if err != nil {
		return nil, fmt.Errorf("list the gateways of running tasks: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list the gateways of running tasks: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the gateways of running tasks: %w", err)
	}
	return out, nil
}

// OverdueTasks implements [store.Tasks].
func (s *Store) OverdueTasks(ctx context.Context, before time.Time, limit int) ([]store.Task, error) {
	ts, err := s.queryTasks(ctx, sqlshared.OverdueTasks, millis(before), limit)
	if err != nil {
		return nil, fmt.Errorf("list overdue tasks: %w", err)
	}
	return ts, nil
}
