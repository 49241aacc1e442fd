package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// runningTasksSchema is migration step 15 (sqlshared.RunningTasksSchema).
const runningTasksSchema = sqlshared.RunningTasksSchema

// The queries of the tasks that have not ended, with PostgreSQL's
// placeholders.
var (
	countRunningTasks = sqlshared.Numbered(sqlshared.CountRunningTasks)
	overdueTasks      = sqlshared.Numbered(sqlshared.OverdueTasks)
)

// RunningTaskCount implements [store.Tasks].
func (s *Store) RunningTaskCount(ctx context.Context, projectID int64, owner store.TaskOwner) (int, error) {
	var n int
	err := s.readRetry(ctx, func() error {
		return s.pool.QueryRow(ctx, countRunningTasks, projectID, string(owner)).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("count running tasks: %w", err)
	}
	return n, nil
}

// TaskGateways implements [store.Tasks].
func (s *Store) TaskGateways(ctx context.Context) ([]string, error) {
	var out []string
	err := s.readRetry(ctx, func() error {
		out = nil
		rows, err := s.pool.Query(ctx, sqlshared.TaskGateways)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			out = append(out, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list the gateways of running tasks: %w", err)
	}
	return out, nil
}

// OverdueTasks implements [store.Tasks].
func (s *Store) OverdueTasks(ctx context.Context, before time.Time, limit int) ([]store.Task, error) {
	var ts []store.Task
	err := s.readRetry(ctx, func() (err error) {
		ts, err = s.queryTasks(ctx, overdueTasks, millis(before), limit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list overdue tasks: %w", err)
	}
	return ts, nil
}
