package session

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/tasks"
)

// taskWire is a task as 2025-11-25 writes it (the schema's Task).
type taskWire struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval,omitempty"`
}

// wireTime is how task times are written: ISO 8601, UTC, milliseconds.
const wireTime = "2006-01-02T15:04:05.000Z07:00"

// wireTask is t as a 2025-11-25 client reads it.
func wireTask(t tasks.Task) taskWire {
	status, msg := sessionStatus(t)
	return taskWire{
		TaskID: t.ID, Status: string(status), StatusMessage: msg,
		CreatedAt:     t.CreatedAt.UTC().Format(wireTime),
		LastUpdatedAt: t.UpdatedAt.UTC().Format(wireTime),
		TTL:           t.TTL.Milliseconds(),
		PollInterval:  t.PollInterval.Milliseconds(),
	}
}

// sessionStatus is t's status and status message at 2025-11-25, where a
// tool's isError result ends its task failed (at 2026-07-28 it is
// completed, as the runtime may keep it).
func sessionStatus(t tasks.Task) (tasks.Status, string) {
	if t.Status != tasks.Completed || len(t.Result) == 0 {
		return t.Status, t.StatusMessage
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(t.Result, &r) != nil || !r.IsError {
		return t.Status, t.StatusMessage
	}
	msg := t.StatusMessage
	if msg == "" {
		if out, err := pipeline.DecodeResult(t.Result); err == nil {
			msg = pipeline.FirstText(out)
		}
	}
	return tasks.Failed, msg
}

// taskResult is the answer of tasks/get and tasks/cancel: Result & Task.
type taskResult struct {
	mcp.ResultBase
	taskWire
}

// taskList is the answer of tasks/list.
type taskList struct {
	mcp.ResultBase
	Tasks      []taskWire `json:"tasks"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// rawResult is a result already encoded: tasks/result's, the task's
// CallToolResult with the related-task _meta.
type rawResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// taskIDParams are the params of tasks/get, tasks/result and tasks/cancel.
type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// taskListParams are the params of tasks/list.
type taskListParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// Messages a client reads.
const (
	msgTaskNotFound = "Task %s not found: the id is wrong, or the task ended more than its ttl ago. Start the call again to get a new task."
	msgTaskNoID     = "params.taskId is required: the taskId of the CreateTaskResult that started the task."
	msgTaskTerminal = "Cannot cancel task %s: it is already %s."
	msgTaskStopped  = "Task %s was cancelled before it returned a result, so there is none. Call the tool again for one."
	msgTaskRequired = "Tool %s runs only as a task (its execution.taskSupport is required): call it again with params.task, for example {\"ttl\": 60000}."
	msgTaskRefused  = "Tool %s does not run as a task (its execution.taskSupport is forbidden): call it again without params.task."
	msgTaskTTL      = "params.task.ttl must be a number of milliseconds, 0 or more."
	msgTaskTrouble  = "The gateway could not reach its task store; try again in a moment."
)
