package tasks_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/tasks"
)

// TestTaskConfirmFirst: a task with Spec.Confirm is stored input_required
// with the question and sends nothing; a yes sends the call, a no ends the
// task with the refusal as an isError result, a cancel cancels it — the
// agent hears of neither.
func TestTaskConfirmFirst(t *testing.T) {
	each(t, func(t *testing.T, open func(t testing.TB) store.Store) {
		e := newEnv(t, open(t), store.ProjectSettings{}, tasks.Options{Questions: testQuestions{}})
		ctx := context.Background()
		const reqs = `{"policy":{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object"}}}}`
		start := func() tasks.Task {
			t.Helper()
			spec := e.spec(0)
			spec.Confirm = &agentproto.Message{Type: agentproto.TypeAsk, Requests: json.RawMessage(reqs)}
			spec.Confirmed = func(r map[string]json.RawMessage) (bool, string) {
				return string(r["policy"]) == `"yes"`, "The user said no."
			}
			task, err := e.m.Run(ctx, spec)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if task.Status != tasks.InputRequired || string(task.InputRequests) != reqs {
				t.Fatalf("Run = %s %s, want input_required with the question", task.Status, task.InputRequests)
			}
			if s := e.stored(task.ID); s.Status != tasks.InputRequired {
				t.Fatalf("stored = %s, want input_required", s.Status)
			}
			return task
		}
		answer := func(id, yes string) {
			t.Helper()
			if err := e.m.Answer(ctx, e.owner(), e.proj.ID, id, map[string]json.RawMessage{"policy": json.RawMessage(yes)}); err != nil {
				t.Fatal(err)
			}
		}

		no := start()
		answer(no.ID, `"no"`)
		got := e.wait(no.ID)
		var refused struct {
			Content []struct{ Text string }
			IsError bool
		}
		if err := json.Unmarshal(got.Result, &refused); err != nil || got.Status != tasks.Completed || !refused.IsError ||
			len(refused.Content) != 1 || refused.Content[0].Text != "The user said no." {
			t.Fatalf("after a no: %s %s, want completed with the refusal as an isError result", got.Status, got.Result)
		}
		cancelled := start()
		if got, err := e.m.Cancel(ctx, e.owner(), e.proj.ID, cancelled.ID); err != nil || got.Status != tasks.Cancelled {
			t.Fatalf("Cancel = %s, %v; want cancelled", got.Status, err)
		}
		if sent := e.tr.Sent(); len(sent) != 0 {
			t.Fatalf("the agent got %d messages before any yes: %+v", len(sent), sent[0])
		}

		yes := start()
		answer(yes.ID, `"yes"`)
		call := e.tr.Next()
		if call == nil || call.Type != agentproto.TypeCall {
			t.Fatalf("after a yes the agent got %+v, want the call", call)
		}
		e.tr.Reply(&agentproto.Message{Type: agentproto.TypeResult, ID: call.ID, Result: json.RawMessage(okResult)})
		eventually(t, "the confirmed task to complete", func() bool {
			s := e.stored(yes.ID)
			return s.Status == tasks.Completed && string(s.Result) == okResult
		})
		eventually(t, "the one call logged", func() bool { return len(e.calls.all()) == 1 })
	})
}
