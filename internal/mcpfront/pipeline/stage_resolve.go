package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/schema"
	"github.com/spacefix/spacefix/internal/store"
)

// resolveStage resolves the admitted tool to a replica in the caller's
// view ([Pipeline.pickCall]): the call is picked, with the tool's wait (a
// job's or a task's, the project's longest task: [Pipeline.asJob]), not sent. A refusal
// answers; a pick that found no replica settles the call.
type resolveStage struct{}

func (resolveStage) serve(ctx context.Context, f *Pipeline, c *Call, next next) (*mcp.CallToolResult, error) {
	req := c.req
	c.pick = pickRequest{Tool: c.tool, Key: c.key, Args: req.Args, Caps: callerCaps(req.Session, req.Meta)}
	if c.task != nil {
		c.pick.Wait = f.tasks.Limit(ctx, c.key.ProjectID) // a task may run up to the project's longest
	} else {
		c.wait = f.wait(ctx, c.tool, c.key, c.controls)
		c.pick.Wait = c.wait
		c.asJob = f.asJob(ctx, &c.pick) // a tool with task support, for a client without tasks: jobs.go
	}
	call, res, args, refused, rpcErr := f.pickCall(ctx, c.pick)
	if refused != nil || rpcErr != nil {
		return refused, rpcErr
	}
	c.call, c.res, c.args = call, res, args
	c.settled = call == nil
	return next.run(ctx, c)
}

// pickRequest is a call [Pipeline.pickCall] checks and picks a replica for.
type pickRequest struct {
	Tool *agents.Tool
	Key  store.Key
	Args json.RawMessage      // as the client sent them
	Caps []string             // the client's capabilities the handler may use (callerCaps)
	Wait time.Duration        // how long the call may run: the tool's wait, or a task's limit
	Opt  func(*route.Request) // nil, or a change to the route request (a task's)
	// token, if set, is the person's upstream token to send to a
	// per-person remote, already refreshed (perperson.go).
	token string
}

// pickCall takes the gateway's own instance argument out of a call's
// arguments, picks the replica (replicas of one agent key may differ in a
// rolling deploy, and a call is validated against the schema of the replica
// it goes to) and validates the arguments there: before any agent sees the
// call; a refusal is not logged, not billed. It returns the picked call and
// the arguments as the agent reads them; or refused, an isError result the
// model reads; or no call and res, how the pick ended (no replica, not
// found), for [Pipeline.await] or the task path to answer. A per-person
// remote's call may instead be refused with rpcErr, a JSON-RPC error (the
// URL elicitation of a connect page, -32042): see perperson.go.
func (f *Pipeline) pickCall(ctx context.Context, p pickRequest) (call *route.Call, res route.Result, args json.RawMessage, refused *mcp.CallToolResult, rpcErr error) {
	t := p.Tool
	// (Arguments over the project's limit were refused in dispatch,
	// before go-sdk parsed them.)
	args, instance, err := prepareArgs(t, p.Args)
	if err != nil {
		return nil, res, nil, ErrorResult(invalidArgs(t, err)), nil
	}
	if instance != "" && !slices.Contains(t.Instances(), instance) {
		return nil, res, nil, ErrorResult(instanceProblem(t, instance)), nil
	}
	caller, err := f.Caller(ctx, p.Key, p.Caps)
	if err != nil {
		return nil, res, nil, ErrorResult(err.Error()), nil
	}
	rr := route.Request{
		Kind:     agentproto.KindTool,
		Name:     t.Def.Name,
		Exposed:  t.Name,
		Args:     args,
		Caller:   caller,
		Wait:     p.Wait,
		Instance: instance,
		Tracer:   f.tracer,
		Identity: f.identityTokens(ctx, p.Key.ProjectID, t.AgentKey, caller),
	}
	if p.Opt != nil {
		p.Opt(&rr)
	}
	call, res = route.Pick(ctx, f.reg, p.Key.ProjectID, toolTarget(t.Name, t.AgentKey), rr)
	if call == nil {
		return nil, res, args, nil, nil
	}
	if err := validate(t.SchemaOn(call.Replica()), args); err != nil {
		call.Release()
		return nil, res, nil, ErrorResult(invalidArgs(t, err)), nil
	}
	if r := f.checkUpstream(ctx, call, p.Key.ProjectID, caller, t.Name, p.Caps, p.token); r != nil {
		call.Release()
		out, err := r.toolAnswer()
		return nil, res, nil, out, err
	}
	return call, res, args, nil, nil
}

// prepareArgs reads a call's arguments ("{}" when there are none) and takes
// out the gateway's instance argument. The error is a
// *[schema.ValidationError] when the instance argument is not a string.
func prepareArgs(t *agents.Tool, args json.RawMessage) (_ json.RawMessage, instance string, err error) {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	if !t.OwnsInstance {
		if args, instance, err = splitInstance(args); err != nil {
			return nil, "", err
		}
	}
	return args, instance, nil
}

// errNoSchema refuses a call whose replica has no compiled schema for the
// tool. Every replica's schemas are compiled at registration; refuse rather
// than let unchecked arguments through.
var errNoSchema = errors.New("the gateway has no input schema for this tool on the replica chosen; try again")

// validate checks args against the tool's schema on the replica chosen for
// the call. The error, ajv-worded, is a *[schema.ValidationError] when they
// do not match.
func validate(s *schema.Schema, args json.RawMessage) error {
	if s == nil {
		return errNoSchema
	}
	return s.Validate(args)
}

// invalidArgs is what the caller reads when err refused a call's arguments.
func invalidArgs(t *agents.Tool, err error) string {
	return fmt.Sprintf("Input validation error: Invalid arguments for tool %s: %v", t.Name, err)
}

// wait is how long a call to t waits for its result. c may be nil.
func (f *Pipeline) wait(ctx context.Context, t *agents.Tool, key store.Key, c *access.Controls) time.Duration {
	if t.Def.TimeoutMs > 0 {
		return time.Duration(t.Def.TimeoutMs) * time.Millisecond
	}
	if c == nil {
		c = f.controls.Get(ctx, key.ProjectID)
	}
	return c.Settings.CallWait()
}

// toolTarget finds the replicas behind an exposed tool name, as long as the
// same agent still offers it.
func toolTarget(name, agentKey string) route.Target {
	return func(s *agents.Snapshot) ([]*agents.Replica, time.Time, bool) {
		t := s.Tools[name]
		if t == nil || t.AgentKey != agentKey || !t.Enabled {
			return nil, time.Time{}, false
		}
		return t.Replicas, t.GraceUntil, true
	}
}
