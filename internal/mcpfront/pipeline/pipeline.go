package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/tasks"
)

// toolStages is the order of the tools/call stages.
var toolStages = [...]stage{
	admitStage{},
	resumeStage{},
	resolveStage{},
	policyStage{},
	cacheStage{},
	repeatStage{},
	shapeStage{},
	runStage{},
}

// stage is one step of the tools/call pipeline. serve answers the call,
// or hands it on with next.run.
type stage interface {
	serve(ctx context.Context, f *Pipeline, c *Call, next next) (*mcp.CallToolResult, error)
}

// next runs the stages after the current one.
type next struct {
	f *Pipeline
	i int // index in toolStages of the stage it runs
}

// run runs the next stage, or policy then shape when c is settled.
func (n next) run(ctx context.Context, c *Call) (*mcp.CallToolResult, error) {
	i := n.i
	switch {
	case c.settled && i < policyAt:
		i = policyAt // its answer is shaped for its caller
	case c.settled && i > policyAt && i < shapeAt:
		i = shapeAt
	}
	return toolStages[i].serve(ctx, n.f, c, next{n.f, i + 1})
}

// policyAt and shapeAt are the indexes of policyStage and shapeStage in
// toolStages.
const (
	policyAt = 3
	shapeAt  = 6
)

// Call is one tools/call as every stage reads it. The view's
// middleware or the early path makes it (newToolCall) with the tool it
// admitted; the stages fill in the rest.
type Call struct {
	req      *Request         // the request, whoever read it
	key      store.Key        // the client key it came with
	tool     *agents.Tool     // nil: not admitted
	controls *access.Controls // the project's controls it was admitted under

	// sink, set for a call the early path answers, is where its
	// notifications go (its answer's stream); nil: through the session.
	sink *Stream
	// ask, set for an early call of a 2025 session, puts the agent's
	// questions to the client on the call's own stream (session/ask_stream.go).
	ask Asker

	// task, set on a task-augmented call (either era), makes the run
	// stage start the call as a task instead of sending it; the entry
	// answers in its era's words.
	task *taskRun

	start   time.Time
	wait    time.Duration   // how long the client's request waits: the tool's wait
	pick    pickRequest     // what resolve picked a replica for
	asJob   bool            // run as a job (jobs.go)
	args    json.RawMessage // the arguments as the agent reads them
	call    *route.Call     // the picked call, then the running one
	res     route.Result    // how the call stands
	settled bool            // how it stands is known: only shape is left
	pol     *callPolicy     // the policy's view of it (policy_call.go); nil: none
}

// Request is a tools/call as the stages read it, whoever parsed it:
// go-sdk (its tool handler, [Pipeline.ToolHandler], turns its request into
// one), the early path (mcpfront/early.go) or a task's entry (stateless/tasks.go,
// session/tasks_call.go). None of them makes a request of go-sdk's types
// that go-sdk did not parse.
type Request struct {
	Name           string
	Args           json.RawMessage
	Meta           mcp.Meta
	RequestState   string               // a 2026-07-28 retry's
	InputResponses mcp.InputResponseMap // and the user's answers in it
	// Session is the call's Session: a 2025 Session's, or the one go-sdk
	// makes for a 2026-07-28 request it serves (its notifications go
	// there); nil for a call the early path or a task's entry serves at
	// 2026-07-28.
	Session *mcp.ServerSession
	// Token is the key's Token info, with the request value (wire/request.go).
	Token *auth.TokenInfo
}

// progressToken returns the progress token the client sent, or nil.
func (r *Request) progressToken() any { return r.Meta["progressToken"] }

// sdkCall is go-sdk's tools/call as the stages read it.
func sdkCall(req *mcp.CallToolRequest) *Request {
	c := &Request{Token: TokenOf(req.Extra)}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
		c.Session = ss
	}
	if p := req.Params; p != nil {
		c.Name, c.Args, c.Meta, c.RequestState, c.InputResponses = p.Name, p.Arguments, p.Meta, p.RequestState, p.InputResponses
	}
	return c
}

// taskRun is how a task-augmented call runs, and how its start went.
type taskRun struct {
	era  string        // tasks.Spec.Era
	ttl  time.Duration // what the client asked for; 0: the runtime's
	task tasks.Task    // the task started
	err  error         // why the runtime did not start it
	// confirm, set by the policy point, is the question the task asks
	// before its call is sent, and confirmed reads the answer
	// (policy_confirm.go; tasks.Spec.Confirm).
	confirm   *agentproto.Message
	confirmed func(map[string]json.RawMessage) (bool, string)
}

type toolCallKey struct{}

// WithCall returns ctx carrying c: the one context value of a call,
// from the view's middleware (or the early path) to the tool handler.
func WithCall(ctx context.Context, c *Call) context.Context {
	return context.WithValue(ctx, toolCallKey{}, c)
}

// toolCallFrom returns the call ctx carries, or nil.
func toolCallFrom(ctx context.Context) *Call {
	c, _ := ctx.Value(toolCallKey{}).(*Call)
	return c
}

// NewCall is a call of tool t, admitted ([Pipeline.AdmitCall]) under the
// project's controls c: what an entry of the endpoint hands the pipeline
// through [WithCall] before [Pipeline.Serve] or go-sdk's tool handler.
func NewCall(t *agents.Tool, c *access.Controls) *Call {
	return &Call{tool: t, controls: c}
}

// OnStream makes c a call answered on its own response stream (the early
// path's): its notifications go to s, and, when a is not nil, its
// questions to the client too.
func (c *Call) OnStream(s *Stream, a Asker) *Call {
	c.sink, c.ask = s, a
	return c
}

// TaskStart is how the start of a task-augmented call went: its task, or
// why there is none, for the entry to answer in its era's words.
type TaskStart struct {
	// Refused is a refusal in words the model reads (the policy's);
	// RPCErr one as a JSON-RPC error.
	Refused *mcp.CallToolResult
	RPCErr  error
	// Unpicked, when no replica took the call, is how the pick ended
	// (route.NotFound, route.NoReplica, ...), and Result the answer a plain
	// call gets then, logged.
	Unpicked *route.Result
	Result   *mcp.CallToolResult
	// Task is the task started, or Err why the runtime did not start it.
	Task tasks.Task
	Err  error
}

// StartTask runs a task-augmented call of tool t, admitted under ctl, down
// the pipeline: resolved and past the policy point as any call, then
// started as a task of era (tasks.Spec.Era) that its client keeps for ttl
// (0: the runtime's). The entries of both eras call it
// (stateless.Tasks, session.Era.startSessionTask).
func (f *Pipeline) StartTask(ctx context.Context, key store.Key, t *agents.Tool, ctl *access.Controls, req *Request, era string, ttl time.Duration) TaskStart {
	tr := &taskRun{era: era, ttl: ttl}
	c := &Call{key: key, tool: t, controls: ctl, task: tr, req: req}
	refused, rpcErr := next{f, 0}.run(ctx, c)
	switch {
	case refused != nil || rpcErr != nil:
		return TaskStart{Refused: refused, RPCErr: rpcErr}
	case c.call == nil:
		res := c.res
		return TaskStart{Unpicked: &res, Result: f.toolResult(t, key, res, c.start, nil)}
	}
	return TaskStart{Task: tr.task, Err: tr.err}
}

// ToolHandler is the tool handler go-sdk calls: its request goes down the
// pipeline ([Pipeline.serveCall]).
func (f *Pipeline) ToolHandler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return f.Serve(ctx, sdkCall(req))
}

// serveCall runs a tools/call down the pipeline, whoever parsed it: go-sdk
// (toolHandler) or the early path.
func (f *Pipeline) serveCall(ctx context.Context, req *Request) (*mcp.CallToolResult, error) {
	c := toolCallFrom(ctx)
	if c == nil || c.tool == nil {
		return nil, fmt.Errorf("Tool %s not found", TrimName(req.Name))
	}
	c.req = req
	c.key, _ = KeyFrom(req.Token)
	return next{f, 0}.run(ctx, c)
}
