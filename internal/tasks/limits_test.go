package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/tasks"
)

// run starts a task of "report" for key, returning Run's error.
func (e *env) runAs(key store.Key) (tasks.Task, error) {
	e.t.Helper()
	ctx := context.Background()
	tool := e.reg.Snapshot(e.proj.ID).Tools["report"]
	call, res := route.Pick(ctx, e.reg, e.proj.ID, func(s *agents.Snapshot) ([]*agents.Replica, time.Time, bool) {
		return tool.Replicas, tool.GraceUntil, true
	}, route.Request{Kind: agentproto.KindTool, Name: "report", Args: json.RawMessage(`{}`), Wait: time.Hour})
	if call == nil {
		e.t.Fatalf("Pick: %v %s", res.Outcome, res.Detail)
	}
	return e.m.Run(ctx, tasks.Spec{Key: key, Tool: tool, Call: call, Era: "job"})
}

// A caller runs at most the project's running tasks per caller: the next
// is refused with the message the client reads, before anything is stored
// or sent; another caller is not held back, and once one of the caller's
// tasks ends the caller may start one again.
func TestRunningTasksPerCaller(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		e := newEnv(t, open(t), store.ProjectSettings{MaxRunningTasks: 2}, tasks.Options{})
		e.key.ProjectName = e.proj.Name
		first, call := e.start(0)
		e.start(0)
		sent := len(e.tr.Sent())
		_, err := e.runAs(e.key)
		want := fmt.Sprintf("You have 2 tasks running in project %s; wait for one to finish or cancel one.", e.proj.Name)
		var tooMany *tasks.TooManyTasksError
		if !errors.As(err, &tooMany) || !errors.Is(err, tasks.ErrTooManyTasks) || err.Error() != want {
			t.Fatalf("the third task: %v, want %q", err, want)
		}
		if n := len(e.tr.Sent()); n != sent {
			t.Errorf("the refused task sent %d calls to the agent", n-sent)
		}
		if n, _ := e.st.RunningTaskCount(context.Background(), e.proj.ID, e.owner()); n != 2 {
			t.Errorf("running tasks stored = %d, want 2", n)
		}

		other := e.key
		other.ID = "key_client2"
		if _, err := e.runAs(other); err != nil {
			t.Errorf("another key's task: %v", err)
		}

		e.tr.Reply(&agentproto.Message{Type: agentproto.TypeResult, ID: call.ID, Result: json.RawMessage(okResult)})
		if got := e.wait(first.ID); got.Status != tasks.Completed {
			t.Fatalf("first = %s", got.Status)
		}
		if _, err := e.runAs(e.key); err != nil {
			t.Errorf("a task after one ended: %v", err)
		}
	})
}

// A burst of starts by one caller on one gateway stops exactly at the cap.
func TestRunningTasksPerCallerBurst(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		e := newEnv(t, open(t), store.ProjectSettings{MaxRunningTasks: 5}, tasks.Options{})
		errs := make(chan error, 20)
		for range 20 {
			go func() { _, err := e.runAs(e.key); errs <- err }()
		}
		started, refused := 0, 0
		for range 20 {
			switch err := <-errs; {
			case err == nil:
				started++
			case errors.Is(err, tasks.ErrTooManyTasks):
				refused++
			default:
				t.Errorf("Run: %v", err)
			}
		}
		if started != 5 || refused != 15 {
			t.Errorf("started %d, refused %d; want 5 and 15", started, refused)
		}
	})
}
