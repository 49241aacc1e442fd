package tasks_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/tasks"
)

// A gateway that starts fails the running tasks of gateways whose record
// is gone, with the message clients read, and the tasks past their
// deadline; a live gateway's tasks run on.
func TestStartSweepsTasksOfGoneGateways(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		st := open(t)
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		mk := func(id, gw string, created time.Time, limit time.Duration) store.Task {
			task := store.Task{ID: id, ProjectID: 1, Owner: "key:k", Tool: "report", AgentKey: "key_a", Gateway: gw, Era: "job",
				Status: store.TaskWorking, CreatedAt: created, UpdatedAt: created, TTL: time.Hour, PollInterval: time.Second,
				Deadline: created.Add(limit), CallID: "c"}
			if err := st.CreateTask(ctx, task); err != nil {
				t.Fatal(err)
			}
			return task
		}
		dead := mk("task_sweep_dead", "gw-dead", now, time.Hour)
		live := mk("task_sweep_live", "gw-live", now, time.Hour)
		overdue := mk("task_sweep_over", "gw-live", now.Add(-3*time.Hour), 2*time.Hour)
		e := newEnv(t, st, store.ProjectSettings{}, tasks.Options{
			LiveGateways: func(context.Context) ([]string, error) { return []string{"gw-live"}, nil },
		})
		for _, c := range []struct {
			task   store.Task
			status store.TaskStatus
			msg    string
		}{
			{dead, store.TaskFailed, "The gateway running this task stopped."},
			{live, store.TaskWorking, ""},
			{overdue, store.TaskFailed, "The task ran longer than the project's longest task (2h0m0s) and was stopped."},
		} {
			got := e.stored(c.task.ID)
			if got.Status != c.status || got.StatusMessage != c.msg {
				t.Errorf("%s after a gateway started = %s %q, want %s %q", c.task.ID, got.Status, got.StatusMessage, c.status, c.msg)
			}
		}
	})
}

// A gateway whose record goes stale while this one runs (a whole cluster
// restarted, a peer on another host killed without a bus to notice) has
// its running tasks failed by the next sweep, not only at a start.
func TestSweepFailsTasksOfGatewaysGoneLater(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		st := open(t)
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		task := store.Task{ID: "task_sweep_later", ProjectID: 1, Owner: "key:k", Tool: "report", AgentKey: "key_a", Gateway: "gw-far",
			Era: "2026-07-28", Status: store.TaskWorking, CreatedAt: now, UpdatedAt: now, TTL: time.Hour, PollInterval: time.Second,
			Deadline: now.Add(time.Hour), CallID: "c"}
		if err := st.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
		var gone atomic.Bool
		e := newEnv(t, st, store.ProjectSettings{}, tasks.Options{
			PruneEvery: 20 * time.Millisecond,
			LiveGateways: func(context.Context) ([]string, error) {
				if gone.Load() {
					return nil, nil
				}
				return []string{"gw-far"}, nil
			},
		})
		if got := e.stored(task.ID); got.Status != store.TaskWorking {
			t.Fatalf("the task of a live gateway after the start = %s, want working", got.Status)
		}
		gone.Store(true)
		eventually(t, "the sweep to fail the task of the gateway gone", func() bool {
			got := e.stored(task.ID)
			return got.Status == store.TaskFailed && got.StatusMessage == tasks.MsgGatewayStopped
		})
	})
}
