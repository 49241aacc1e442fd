package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// testRunningTaskCount: only an owner's tasks in the project that have not
// ended count, input_required ones included.
func testRunningTaskCount(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	a := newTask("task_count_a", 1, "key:key_a", at)
	b := newTask("task_count_b", 1, "key:key_a", at)
	b.Status = store.TaskInputRequired
	ended := newTask("task_count_ended", 1, "key:key_a", at)
	otherOwner := newTask("task_count_owner", 1, "user:7", at)
	otherProject := newTask("task_count_project", 2, "key:key_a", at)
	for _, task := range []store.Task{a, b, ended, otherOwner, otherProject} {
		mustTask(t, s, task)
	}
	ended.Status = store.TaskCancelled
	if ok, err := s.UpdateTask(ctx, ended); err != nil || !ok {
		t.Fatal(ok, err)
	}
	for _, c := range []struct {
		project int64
		owner   store.TaskOwner
		want    int
	}{{1, "key:key_a", 2}, {1, "user:7", 1}, {2, "key:key_a", 1}, {3, "key:key_a", 0}} {
		if n, err := s.RunningTaskCount(ctx, c.project, c.owner); err != nil || n != c.want {
			t.Errorf("RunningTaskCount(%d, %s) = %d, %v; want %d", c.project, c.owner, n, err, c.want)
		}
	}
}

// testTaskSweeps: the gateways of running tasks are listed once each (a
// gateway whose tasks all ended is not); tasks whose deadline has passed
// are listed, oldest deadline first, up to the limit, ended ones never;
// and after they fail they are pruned like any ended task.
func testTaskSweeps(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	mk := func(id, gw string, deadline time.Duration) store.Task {
		task := newTask(id, 1, "key:key_a", at)
		task.Gateway, task.Deadline = gw, at.Add(deadline)
		mustTask(t, s, task)
		return task
	}
	late1 := mk("task_sweep_late1", "gw-a", time.Minute)
	late2 := mk("task_sweep_late2", "gw-a", 2*time.Minute)
	mk("task_sweep_late3", "gw-b", 3*time.Minute)
	mk("task_sweep_young", "gw-b", time.Hour)
	ended := mk("task_sweep_ended", "gw-c", time.Second)
	ended.Status = store.TaskCompleted
	if ok, err := s.UpdateTask(ctx, ended); err != nil || !ok {
		t.Fatal(ok, err)
	}
	gws, err := s.TaskGateways(ctx)
	slices.Sort(gws)
	if err != nil || !slices.Equal(gws, []string{"gw-a", "gw-b"}) {
		t.Errorf("TaskGateways = %v, %v; want [gw-a gw-b]", gws, err)
	}
	over, err := s.OverdueTasks(ctx, at.Add(10*time.Minute), 2)
	if err != nil {
		t.Fatal(err)
	}
	if ids := taskIDs(over); !slices.Equal(ids, []string{late1.ID, late2.ID}) {
		t.Errorf("OverdueTasks(limit 2) = %v, want the two oldest deadlines [%s %s]", ids, late1.ID, late2.ID)
	}
	if over, err := s.OverdueTasks(ctx, at.Add(10*time.Minute), 10); err != nil || len(over) != 3 {
		t.Errorf("OverdueTasks = %v, %v; want the three past their deadline", taskIDs(over), err)
	}
	if over, err := s.OverdueTasks(ctx, at, 10); err != nil || len(over) != 0 {
		t.Errorf("OverdueTasks before every deadline = %v, %v; want none", taskIDs(over), err)
	}

	// An overdue task failed by the sweep ends like any other: it is no
	// longer overdue, and it is pruned its TTL after.
	late1.Status, late1.StatusMessage, late1.UpdatedAt = store.TaskFailed, "stopped", at.Add(time.Hour)
	if ok, err := s.UpdateTask(ctx, late1); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if over, _ := s.OverdueTasks(ctx, at.Add(10*time.Minute), 10); slices.Contains(taskIDs(over), late1.ID) {
		t.Errorf("OverdueTasks still lists %s after it failed", late1.ID)
	}
	if n, err := s.FailGatewayTasks(ctx, "gw-b", "The gateway running this task stopped.", at.Add(time.Hour)); err != nil || n != 2 {
		t.Fatalf("FailGatewayTasks(gw-b) = %d, %v; want 2", n, err)
	}
	if gws, err := s.TaskGateways(ctx); err != nil || !slices.Equal(gws, []string{"gw-a"}) {
		t.Errorf("TaskGateways after gw-b's tasks failed = %v, %v; want [gw-a]", gws, err)
	}
	// The three that failed at +1h go at +2h (their TTL), with the one
	// completed at once.
	if n, err := s.PruneTasks(ctx, at.Add(2*time.Hour+time.Millisecond)); err != nil || n != 4 {
		t.Errorf("PruneTasks = %d, %v; want 4", n, err)
	}
	for _, id := range []string{late1.ID, "task_sweep_late3"} {
		if _, err := s.Task(ctx, id); err == nil {
			t.Errorf("Task %s is still stored after its TTL", id)
		}
	}
}

func taskIDs(ts []store.Task) []string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}
