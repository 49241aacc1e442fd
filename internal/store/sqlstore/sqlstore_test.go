package sqlstore_test

import (
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/teststores"
)

// TestTaskTextCleaned: a task's tool and status message are stored as
// valid UTF-8 without NUL on both engines, as PostgreSQL's TEXT requires
// (the SQLite copy of the store used to keep them as given).
func TestTaskTextCleaned(t *testing.T) {
	for name, open := range teststores.Openers() {
		t.Run(name, func(t *testing.T) {
			s, ctx := open(t), t.Context()
			at := time.Now().UTC().Truncate(time.Millisecond)
			task := store.Task{
				ID: "task_nul", ProjectID: 1, Owner: "key:key_a", Tool: "re\x00port", AgentKey: "key_agent", Gateway: "gw-1",
				Era: "2026-07-28", Status: store.TaskWorking, StatusMessage: "page \x00 1 \xff", CreatedAt: at, UpdatedAt: at,
				TTL: time.Hour, PollInterval: time.Second, Deadline: at.Add(time.Hour), CallID: "c-1",
			}
			if err := s.CreateTask(ctx, task); err != nil {
				t.Fatal(err)
			}
			got, err := s.Task(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Tool != "re\uFFFDport" || got.StatusMessage != "page \uFFFD 1 \uFFFD" {
				t.Errorf("after CreateTask: tool %q, message %q; want NUL and invalid bytes as U+FFFD", got.Tool, got.StatusMessage)
			}
			task.StatusMessage = "page \x00 2"
			if ok, err := s.UpdateTask(ctx, task); !ok || err != nil {
				t.Fatalf("UpdateTask = %v, %v", ok, err)
			}
			if n, err := s.FailGatewayTasks(ctx, "gw-1", "gone \x00", at); n != 1 || err != nil {
				t.Fatalf("FailGatewayTasks = %d, %v", n, err)
			}
			if got, err = s.Task(ctx, task.ID); err != nil || got.StatusMessage != "gone \uFFFD" {
				t.Errorf("after FailGatewayTasks: message %q, %v; want %q", got.StatusMessage, err, "gone \uFFFD")
			}
		})
	}
}
