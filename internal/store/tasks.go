package store

import (
	"context"
	"encoding/json"
	"time"
)

// Tasks keeps MCP tasks: calls that run on past the request that started
// them, whose status and result any gateway sharing the store can read.
// The runtime is internal/tasks; these are its records.
type Tasks interface {
	// CreateTask stores a new task; ErrExists if its id is taken.
	CreateTask(ctx context.Context, t Task) error
	// Task returns a task by id, or ErrNotFound.
	Task(ctx context.Context, id string) (Task, error)
	// UpdateTask applies t's Status, StatusMessage, UpdatedAt, PollInterval,
	// Result, Error and InputRequests to the stored task of t.ID, only while
	// the stored task is not terminal: the first end wins, and a result
	// that arrives after a cancel is dropped. It reports whether it
	// applied them.
	UpdateTask(ctx context.Context, t Task) (bool, error)
	// ListTasks returns a project's tasks of owner, newest first, at most
	// limit of them, starting after the task with id before ("" starts
	// at the newest).
	ListTasks(ctx context.Context, projectID int64, owner TaskOwner, before string, limit int) ([]Task, error)
	// RunningTasks returns a project's tasks that have not ended, of
	// every owner, newest first, at most limit of them: the dashboard's
	// list, for people who manage the project.
	RunningTasks(ctx context.Context, projectID int64, limit int) ([]Task, error)
	// PruneTasks deletes the terminal tasks whose UpdatedAt+TTL is before
	// now and returns how many went.
	PruneTasks(ctx context.Context, now time.Time) (int64, error)
	// FailGatewayTasks marks Failed, with message, the tasks of gatewayID
	// that are not terminal, and returns how many.
	FailGatewayTasks(ctx context.Context, gatewayID, message string, now time.Time) (int64, error)
	// RunningTaskCount returns how many of owner's tasks in the project
	// have not ended: what the project's running tasks per caller caps.
	RunningTaskCount(ctx context.Context, projectID int64, owner TaskOwner) (int, error)
	// TaskGateways returns the ids of the gateways that run tasks which
	// have not ended, each once: a gateway that starts fails those of
	// gateways that are gone.
	TaskGateways(ctx context.Context) ([]string, error)
	// OverdueTasks returns at most limit tasks that have not ended although
	// their Deadline is before before, oldest deadline first: the runner
	// of each should have stopped it, so it is gone.
	OverdueTasks(ctx context.Context, before time.Time, limit int) ([]Task, error)
}

// TaskStatus is a task's status, as MCP spells it.
type TaskStatus string

// The statuses of a task.
const (
	TaskWorking       TaskStatus = "working"
	TaskInputRequired TaskStatus = "input_required"
	TaskCompleted     TaskStatus = "completed"
	TaskFailed        TaskStatus = "failed"
	TaskCancelled     TaskStatus = "cancelled"
)

// Terminal reports whether a task with status s is over.
func (s TaskStatus) Terminal() bool {
	return s == TaskCompleted || s == TaskFailed || s == TaskCancelled
}

// TaskOwner is who may see a task: "key:<key id>" or "user:<user id>".
type TaskOwner string

// TaskError is the JSON-RPC error a task failed with.
type TaskError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Task is a task as the store keeps it.
type Task struct {
	ID            string // "task_" + 26 lowercase base32 characters
	ProjectID     int64
	Owner         TaskOwner
	Tool          string // exposed tool name
	AgentKey      string // the agent key that serves it
	Gateway       string // id of the gateway that runs the call
	Era           string // "2025-11-25", "2026-07-28" or "job"
	Status        TaskStatus
	StatusMessage string // the handler's latest progress line, or why it failed
	CreatedAt     time.Time
	UpdatedAt     time.Time
	TTL           time.Duration // kept this long after it ends
	PollInterval  time.Duration // suggested to clients
	Deadline      time.Time     // the agent's call is cancelled then
	// Result is the CallToolResult, when Completed.
	Result json.RawMessage
	// Error is the JSON-RPC error, when Failed with one.
	Error *TaskError
	// InputRequests, when InputRequired: the 2026-07-28 inputRequests map
	// (id → {method, params}).
	InputRequests json.RawMessage
	CallID        string // the agent call's id, for the log
}

// TaskColumns are the columns of the tasks table, in the order the stores
// read and write them.
const TaskColumns = `id, project_id, owner, tool, agent_key, gateway, era, status, status_message,
created_at, updated_at, ttl_ms, poll_ms, deadline, result, error, input_requests, call_id`

// EncodeTaskError is e as stored: JSON, or nil for none.
func EncodeTaskError(e *TaskError) ([]byte, error) {
	if e == nil {
		return nil, nil
	}
	return json.Marshal(e)
}

// DecodeTaskError reads what [EncodeTaskError] stored.
func DecodeTaskError(b []byte) (*TaskError, error) {
	if len(b) == 0 {
		return nil, nil
	}
	e := new(TaskError)
	if err := json.Unmarshal(b, e); err != nil {
		return nil, err
	}
	return e, nil
}

// TaskExpiry is when a task that ended at updated with ttl may be pruned.
func TaskExpiry(updated time.Time, ttl time.Duration) int64 {
	return updated.Add(ttl).UnixMilli()
}
