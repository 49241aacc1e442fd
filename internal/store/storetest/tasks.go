package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/store"
)

// newTask is a running task of project p, owner, created at.
func newTask(id string, p int64, owner store.TaskOwner, at time.Time) store.Task {
	return store.Task{
		ID: id, ProjectID: p, Owner: owner, Tool: "report", AgentKey: "key_agent", Gateway: "gw-1",
		Era: "2026-07-28", Status: store.TaskWorking, CreatedAt: at, UpdatedAt: at,
		TTL: time.Hour, PollInterval: time.Second, Deadline: at.Add(time.Hour), CallID: "c-1",
	}
}

func mustTask(t *testing.T, s store.Store, task store.Task) {
	t.Helper()
	if err := s.CreateTask(context.Background(), task); err != nil {
		t.Fatalf("CreateTask %s: %v", task.ID, err)
	}
}

// testTasks: a task comes back as it was stored, every field; an unknown
// id is ErrNotFound and a taken one ErrExists.
func testTasks(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	task := newTask("task_roundtrip", 1, "key:key_a", at)
	task.StatusMessage = "Fetched 3 of 10 pages \x00 ünïcode"
	task.Status = store.TaskInputRequired
	task.InputRequests = json.RawMessage(`{"q1":{"method":"elicitation/create","params":{"message":"Go on?"}}}`)
	mustTask(t, s, task)
	got, err := s.Task(ctx, task.ID)
	if err != nil {
		t.Fatalf("Task: %v", err)
	}
	want := task
	want.StatusMessage = store.CleanText(task.StatusMessage) // PostgreSQL keeps no NUL
	if got.StatusMessage == task.StatusMessage {
		want.StatusMessage = task.StatusMessage // SQLite does
	}
	if d := gocmp.Diff(want, got); d != "" {
		t.Errorf("Task (-want +got):\n%s", d)
	}
	_, err = s.Task(ctx, "task_none")
	wantErr(t, "Task of an unknown id", err, store.ErrNotFound)
	wantErr(t, "CreateTask of a taken id", s.CreateTask(ctx, task), store.ErrExists)
}

// testTaskEnds: updates apply while a task runs; the first end wins, and
// later updates (a result after a cancel) report false and change nothing.
func testTaskEnds(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	task := newTask("task_ends", 1, "key:key_a", at)
	mustTask(t, s, task)

	step := task
	step.StatusMessage, step.UpdatedAt, step.PollInterval = "halfway", at.Add(time.Second), 2*time.Second
	if ok, err := s.UpdateTask(ctx, step); err != nil || !ok {
		t.Fatalf("UpdateTask of a running task = %v, %v; want true", ok, err)
	}
	cancelled := step
	cancelled.Status, cancelled.StatusMessage, cancelled.UpdatedAt = store.TaskCancelled, "Cancelled by the client.", at.Add(2*time.Second)
	if ok, err := s.UpdateTask(ctx, cancelled); err != nil || !ok {
		t.Fatalf("UpdateTask to cancelled = %v, %v; want true", ok, err)
	}
	late := cancelled
	late.Status, late.Result, late.UpdatedAt = store.TaskCompleted, json.RawMessage(`{"content":[]}`), at.Add(3*time.Second)
	late.Error = &store.TaskError{Code: -32603, Message: "late"}
	if ok, err := s.UpdateTask(ctx, late); err != nil || ok {
		t.Fatalf("UpdateTask of a cancelled task = %v, %v; want false", ok, err)
	}
	got, err := s.Task(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := gocmp.Diff(cancelled, got); d != "" {
		t.Errorf("after a late result (-want +got):\n%s", d)
	}

	// A failure with a JSON-RPC error keeps it.
	failed := newTask("task_failed", 1, "key:key_a", at)
	mustTask(t, s, failed)
	failed.Status, failed.Error = store.TaskFailed, &store.TaskError{Code: -32602, Message: "bad", Data: json.RawMessage(`{"x":1}`)}
	if ok, err := s.UpdateTask(ctx, failed); err != nil || !ok {
		t.Fatalf("UpdateTask to failed = %v, %v", ok, err)
	}
	if got, err := s.Task(ctx, failed.ID); err != nil || gocmp.Diff(failed, got) != "" {
		t.Errorf("failed task (-want +got):\n%s (err %v)", gocmp.Diff(failed, got), err)
	}
}

// testTaskList: an owner's tasks of a project, newest first, page by page;
// nobody else's.
func testTaskList(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	var want []string
	for i := range 5 {
		id := fmt.Sprintf("task_list%d", i)
		mustTask(t, s, newTask(id, 7, "user:3", at.Add(time.Duration(i)*time.Second)))
		want = append([]string{id}, want...)
	}
	// Two of the same time come back in a stable order too.
	mustTask(t, s, newTask("task_list5", 7, "user:3", at.Add(4*time.Second)))
	want = append([]string{"task_list5"}, want...)
	mustTask(t, s, newTask("task_other_owner", 7, "user:4", at))
	mustTask(t, s, newTask("task_other_project", 8, "user:3", at))

	var got []string
	before := ""
	for range 10 {
		page, err := s.ListTasks(ctx, 7, "user:3", before, 4)
		if err != nil {
			t.Fatalf("ListTasks: %v", err)
		}
		for _, task := range page {
			got = append(got, task.ID)
		}
		if len(page) < 4 {
			break
		}
		before = page[len(page)-1].ID
	}
	if d := gocmp.Diff(want, got); d != "" {
		t.Errorf("ListTasks pages (-want +got):\n%s", d)
	}
}

// testRunningTasks: a project's tasks that have not ended, of every
// owner, newest first; ended ones and other projects' are left out.
func testRunningTasks(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	mustTask(t, s, newTask("task_run_a", 5, "key:key_a", at))
	asking := newTask("task_run_b", 5, "user:9", at.Add(time.Second))
	asking.Status = store.TaskInputRequired
	mustTask(t, s, asking)
	mustTask(t, s, newTask("task_run_other", 6, "key:key_a", at))
	done := newTask("task_run_done", 5, "key:key_a", at.Add(2*time.Second))
	mustTask(t, s, done)
	done.Status, done.Result = store.TaskCompleted, json.RawMessage(`{"content":[]}`)
	if ok, err := s.UpdateTask(ctx, done); err != nil || !ok {
		t.Fatalf("UpdateTask: %v %v", ok, err)
	}
	ts, err := s.RunningTasks(ctx, 5, 10)
	if err != nil {
		t.Fatalf("RunningTasks: %v", err)
	}
	var got []string
	for _, task := range ts {
		got = append(got, task.ID+" "+string(task.Owner))
	}
	if d := gocmp.Diff([]string{"task_run_b user:9", "task_run_a key:key_a"}, got); d != "" {
		t.Errorf("RunningTasks (-want +got):\n%s", d)
	}
	if ts, err := s.RunningTasks(ctx, 5, 1); err != nil || len(ts) != 1 {
		t.Errorf("RunningTasks with limit 1 = %d tasks, %v", len(ts), err)
	}
}

// testTaskPrune: an ended task goes once its TTL after its end has passed;
// a running task stays, however old.
func testTaskPrune(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	running := newTask("task_prune_running", 1, "key:key_a", at.Add(-48*time.Hour))
	mustTask(t, s, running)
	done := newTask("task_prune_done", 1, "key:key_a", at)
	mustTask(t, s, done)
	done.Status, done.UpdatedAt, done.Result = store.TaskCompleted, at, json.RawMessage(`{"content":[]}`)
	if ok, err := s.UpdateTask(ctx, done); err != nil || !ok {
		t.Fatalf("UpdateTask: %v %v", ok, err)
	}
	if n, err := s.PruneTasks(ctx, at.Add(time.Hour-time.Millisecond)); err != nil || n != 0 {
		t.Fatalf("PruneTasks before the TTL = %d, %v; want 0", n, err)
	}
	if n, err := s.PruneTasks(ctx, at.Add(time.Hour+time.Millisecond)); err != nil || n != 1 {
		t.Fatalf("PruneTasks after the TTL = %d, %v; want 1", n, err)
	}
	_, err := s.Task(ctx, done.ID)
	wantErr(t, "Task of a pruned task", err, store.ErrNotFound)
	if _, err := s.Task(ctx, running.ID); err != nil {
		t.Errorf("a running task was pruned: %v", err)
	}
}

// testTaskFailGateway: the running tasks of one gateway fail with the
// message; ended tasks and other gateways' stay as they were.
func testTaskFailGateway(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	a := newTask("task_gw_a", 1, "key:key_a", at)
	b := newTask("task_gw_b", 1, "key:key_a", at)
	b.Status = store.TaskInputRequired
	b.InputRequests = json.RawMessage(`{"q":{}}`)
	other := newTask("task_gw_other", 1, "key:key_a", at)
	other.Gateway = "gw-2"
	ended := newTask("task_gw_ended", 1, "key:key_a", at)
	for _, task := range []store.Task{a, b, other, ended} {
		mustTask(t, s, task)
	}
	ended.Status = store.TaskCompleted
	if ok, err := s.UpdateTask(ctx, ended); err != nil || !ok {
		t.Fatal(ok, err)
	}
	const msg = "The gateway running this task stopped."
	n, err := s.FailGatewayTasks(ctx, "gw-1", msg, at.Add(time.Minute))
	if err != nil || n != 2 {
		t.Fatalf("FailGatewayTasks = %d, %v; want 2", n, err)
	}
	for _, id := range []string{a.ID, b.ID} {
		got, err := s.Task(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != store.TaskFailed || got.StatusMessage != msg || got.InputRequests != nil || !got.UpdatedAt.Equal(at.Add(time.Minute)) {
			t.Errorf("%s after FailGatewayTasks = %s %q inputs %s at %v", id, got.Status, got.StatusMessage, got.InputRequests, got.UpdatedAt)
		}
	}
	for _, want := range []store.TaskStatus{store.TaskWorking, store.TaskCompleted} {
		id := other.ID
		if want == store.TaskCompleted {
			id = ended.ID
		}
		if got, err := s.Task(ctx, id); err != nil || got.Status != want {
			t.Errorf("%s = %s, %v; want %s", id, got.Status, err, want)
		}
	}
	// The failed tasks are pruned a TTL after they failed.
	if n, err := s.PruneTasks(ctx, at.Add(time.Minute+time.Hour+time.Millisecond)); err != nil || n != 3 {
		t.Errorf("PruneTasks = %d, %v; want 3 (two failed, one completed)", n, err)
	}
}

// testTaskCall: a call log record keeps the task it ran as.
func testTaskCall(t *testing.T, s store.Store) {
	at := time.Now().UTC().Truncate(time.Millisecond)
	mustAppend(t, s, store.Call{Time: at, ProjectID: 3, Kind: "tool", Name: "report", KeyID: "key_a", Outcome: store.OutcomeOK, Billable: true, TaskID: "task_abc"},
		store.Call{Time: at, ProjectID: 3, Kind: "tool", Name: "plain", KeyID: "key_a", Outcome: store.OutcomeOK, Billable: true})
	got, err := s.Calls(context.Background(), store.CallFilter{ProjectID: 3})
	if err != nil || len(got) != 2 {
		t.Fatalf("Calls = %d, %v", len(got), err)
	}
	ids := map[string]string{}
	for _, c := range got {
		ids[c.Name] = c.TaskID
	}
	if ids["report"] != "task_abc" || ids["plain"] != "" {
		t.Errorf("task ids = %v, want report: task_abc, plain: none", ids)
	}
}
