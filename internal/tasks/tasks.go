// Package tasks runs MCP tasks: tool calls that go on past the request
// that started them, whose status, progress, questions and result any
// gateway sharing the store can read. Both MCP eras (the 2025-11-25
// experimental tasks and the 2026-07-28 io.modelcontextprotocol/tasks
// extension) and the gateway's job tool are fronts of the one [Manager].
//
// Engineers B and C: this file is the API of the design
// (/tmp/briefs2/tasks-design.md). The records live in internal/store
// (store.Task, store.Tasks) and are aliased here, so tasks.Task, tasks.Status
// and the status constants are exactly as the design spells them. The
// front's conversion of an agent question to inputRequests and back is
// [Questions]; its implementation is pipeline.TaskQuestions
// (internal/mcpfront/pipeline/taskquestions.go), to pass as [Options.Questions].
package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/store"
)

// Status of a task, as MCP spells it.
type Status = store.TaskStatus

// The statuses of a task.
const (
	Working       = store.TaskWorking
	InputRequired = store.TaskInputRequired
	Completed     = store.TaskCompleted
	Failed        = store.TaskFailed
	Cancelled     = store.TaskCancelled
)

// Owner is who may see a task: "key:<key id>" for a key, "user:<user id>"
// for a person through OAuth (any of their apps' grants). [Manager.OwnerOf]
// derives it from the caller's key.
type Owner = store.TaskOwner

// Task is a task as the store keeps it.
type Task = store.Task

// RPCError is the JSON-RPC error a task failed with ({code, message, data}).
type RPCError = store.TaskError

// Store is what the runtime keeps (implemented by store/sqlite and
// store/postgres; contract tests in store/storetest/tasks.go).
type Store = store.Tasks

// ErrNotFound: unknown id, expired, or someone else's (the same error,
// always).
var ErrNotFound = errors.New("no such task")

// Spec is a task to start: the MCP front has checked the key, access, the
// instance argument, validated the arguments against the picked replica's
// schema and the cache/idempotency rules, exactly as for a plain call; it
// built the route.Request with Wait = the task limit ([Manager.Limit]) and
// picked (not sent) the call.
type Spec struct {
	Key  store.Key
	Tool *agents.Tool
	Call *route.Call // picked with route.Pick, validated, not sent
	Era  string
	// TTL is the client's request (0: the project's cap); Run caps it.
	TTL   time.Duration
	Start time.Time
	// Unauthorized, when set, is what the client reads (an isError
	// result) when the call ends with agentproto.CodeUpstreamUnauthorized:
	// a per-person remote refused the person's upstream token. The MCP
	// front's answer; unset, a plain sentence. That code never reaches a
	// client.
	Unauthorized func(ctx context.Context) string
	// Shape, when set, is the project's policy on the call's end (the MCP
	// front's): given the agent's result (nil when the call ended
	// otherwise), it returns the result to keep, which is all the task's
	// owner ever reads, and what the policy did in words for the call
	// log (store.Call.Policy).
	Shape func(ctx context.Context, result json.RawMessage) (json.RawMessage, string)
	// Confirm, when set, is a question the caller must answer before the
	// call is sent (the MCP front's policy, a rule with effect confirm):
	// the task starts input_required with it, and Confirmed reads the
	// client's responses. Yes sends the call; no ends the task with
	// refusal as an isError result, and nothing reaches the agent. No
	// answer by the call's deadline fails the task as a timeout; a cancel
	// cancels it. Both or neither are set.
	Confirm   *agentproto.Message
	Confirmed func(responses map[string]json.RawMessage) (yes bool, refusal string)
}

// Questions is the MCP front's conversion of an agent's question (a
// confirm or an ask) to 2026-07-28 inputRequests, and of the client's
// inputResponses back to the agent's answer. Its methods are called from
// the task's runner goroutine and from Answer; they must be safe for
// concurrent use.
type Questions interface {
	// InputRequests returns the inputRequests map (id → {method, params})
	// for question q. An error says, for the agent's developer, why q
	// cannot be asked; the runner gives it to the agent as its answer.
	InputRequests(q *agentproto.Message) (json.RawMessage, error)
	// Answer gives call the client's responses to question q, asked as
	// asked, or tells the agent why they do not answer it.
	Answer(call *route.Call, q *agentproto.Message, asked json.RawMessage, responses map[string]json.RawMessage)
}

// CallLog is where a task's call is logged when it ends: a *store.CallLog.
type CallLog interface {
	Add(c store.Call)
}

// Grants finds the person behind an OAuth grant (store.OAuth has it).
type Grants interface {
	OAuthGrant(ctx context.Context, id string) (store.OAuthGrant, error)
}

// Signal is a cancel or an answer for a task that another gateway runs.
type Signal struct {
	Kind      string                     `json:"kind"` // "cancel" or "answer"
	TaskID    string                     `json:"task"`
	Responses map[string]json.RawMessage `json:"responses,omitempty"`
}

// Signals carries [Signal]s between the gateways that share a store
// (internal/cluster implements it over NATS). Both methods are safe for
// concurrent use.
type Signals interface {
	// Send delivers sig to gateway, at most once; an error means it may
	// not have arrived.
	Send(ctx context.Context, gateway string, sig Signal) error
	// Receive calls fn with each signal sent to this gateway, until the
	// returned func is called.
	Receive(fn func(Signal)) (stop func(), err error)
}

// Options configure a [Manager]. The zero value of each field means what
// its comment says.
type Options struct {
	// Store keeps the tasks. Required.
	Store Store
	// Calls logs each task's call once it ends. Required.
	Calls CallLog
	// Settings returns a project's settings (the longest task, the TTL
	// cap). Nil means the defaults.
	Settings func(ctx context.Context, projectID int64) (store.ProjectSettings, error)
	// ProjectName returns a project's name, for the refusal of a task
	// beyond the running tasks per caller when the key does not carry it
	// (an OAuth grant's); nil leaves it out.
	ProjectName func(ctx context.Context, projectID int64) string
	// Grants finds the person of an OAuth key; nil makes every key its own
	// owner.
	Grants Grants
	// Gateway is this gateway's id, written on the tasks it runs. "" means
	// "local".
	Gateway string
	// Signals reaches the other gateways; nil on a gateway alone.
	Signals Signals
	// Questions converts agent questions; nil answers every question with
	// an error that the client cannot be asked.
	Questions Questions
	// Log; nil means slog.Default().
	Log *slog.Logger
	// Now; nil means time.Now.
	Now func() time.Time
	// LiveGateways returns the ids of the gateways recorded alive in the
	// store; the tasks of any other (but this one) are failed at Start and
	// every PruneEvery. Nil fails none that way.
	LiveGateways func(ctx context.Context) ([]string, error)
	// PruneEvery is how often the tasks of gone gateways are failed and
	// ended tasks past their TTL deleted; 0 means a minute.
	PruneEvery time.Duration
}

// ErrBadResponses wraps the error [Manager.Answer] returns for responses
// to input requests the task never asked: the front answers -32602.
var ErrBadResponses = errors.New("bad input responses")

// ErrClosed is what [Manager.Run] returns once the gateway is shutting
// down.
var ErrClosed = errors.New("the gateway is shutting down; call the tool again to start the task on another gateway")

// Messages a client reads when a task fails for the gateway's reasons.
const (
	MsgGatewayStopped  = "The gateway running this task stopped."
	MsgGatewayShutDown = "The gateway running this task shut down."
	MsgCancelled       = "The task was cancelled."
)

// msgLimit is why a task that ran past the project's longest task failed.
func msgLimit(limit time.Duration) string {
	return fmt.Sprintf("The task ran longer than the project's longest task (%s) and was stopped.", limit)
}
