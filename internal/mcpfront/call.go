package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core/agentproto"
	"github.com/spacefix/spacefix/core/textfmt"
	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/schema"
	"github.com/spacefix/spacefix/internal/store"
)

// Messages a model reads.
const (
	msgDisconnected = route.MsgDisconnected
	msgShutdown     = "The gateway is shutting down and stopped this call. Try again in a moment."
)

// toolHandler is the whole tools/call flow, top to bottom. [view.resolve] has
// already checked the key's access and put the tool in ctx; the key check and
// go-sdk's parsing happened before that.
func (f *Front) toolHandler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	t, _ := ctx.Value(toolCtxKey{}).(*agents.Tool)
	key, _ := keyFrom(req.Extra.TokenInfo)
	if t == nil {
		return nil, fmt.Errorf("Tool %s not found", trimName(req.Params.Name))
	}
	// A session's calls run in the session's context: end this one when
	// its client hangs up, as the stateless protocol does, or deletes the
	// session.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if hung := f.hangUp(req.Extra); hung != nil {
		defer context.AfterFunc(hung, func() { cancel(context.Canceled) })()
	}
	if req.Session != nil {
		defer f.viewFor(key).trackCall(req.Session.ID(), cancel)()
	}
	// An early session call go-sdk took over at the agent's question
	// (handoff.go): it goes on from there. (A call that asked is not
	// cached.)
	if h := f.resumeHandoff(req); h != nil {
		return f.await(ctx, req, t, key, h.call, h.res, h.start)
	}

	// A retry that carries the user's answer to the agent's question: the
	// call is still running on its replica.
	if req.Params.RequestState != "" {
		h, err := f.held.resume(req.Params.RequestState, key.ID)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		if h.asked != nil {
			h.respond(req.Params.InputResponses)
		} else {
			accepted, err := answer(req, h.input)
			h.call.Answer(h.input, accepted, err)
		}
		return f.await(ctx, req, t, key, h.call, waitOn(ctx, req, h.call), h.start)
	}

	c, _ := ctx.Value(controlsCtxKey{}).(*access.Controls)
	start := time.Now()
	wait := f.wait(ctx, t, key, c)
	pr := pickRequest{Tool: t, Key: key, Args: req.Params.Arguments, Caps: callerCaps(req.Session, req.Params.Meta), Wait: wait}
	asJob := f.asJob(ctx, &pr) // a tool with task support, for a client without tasks: jobs.go
	call, res, args, refused, rpcErr := f.pickCall(ctx, pr)
	if refused != nil || rpcErr != nil {
		return refused, rpcErr
	}
	if call == nil {
		return f.await(ctx, req, t, key, nil, res, start)
	}

	// The cache: a hit never reaches an agent and is neither logged nor
	// billed; it has passed the key check, the rate limit and validation.
	// (A per-person tool's results are never cached: perperson.go.)
	cacheFor := f.cacheFor(c, t)
	if cacheFor > 0 {
		if _, decoded, ok := f.cache.GetDecoded(key.ProjectID, t.Name, args); ok {
			if cr, ok := decoded.(*cachedResult); ok {
				call.Release()
				f.hits.Add(1)
				return shareResult(cr.res), nil
			}
		}
	}

	// Repeat-safe tools: a repeat of a request id is answered here, or
	// the call goes on with its id claimed (repeat.go).
	if t.Def.IdempotencyKey != "" {
		if out, err := f.repeat(ctx, t, key, c, args, call, start); out != nil || err != nil {
			return out, err
		}
	}

	if asJob {
		out, err := f.runJob(ctx, req, t, key, call, start, wait)
		if t.Def.IdempotencyKey != "" {
			// The job's first answer is what a repeat gets: its result,
			// or its job reference.
			end := route.Result{Outcome: route.OK, Replica: call.Replica()}
			if out == nil {
				end.Outcome = route.Cancelled // it may have started: unknown
			}
			f.repeats.end(call.ID(), end, out, store.OutcomeOK)
		}
		return out, err
	}

	// Delivery to the replica, within the tool's wait.
	call, res = call.Send(ctx)
	if call != nil {
		res = waitOn(ctx, req, call)
		if upstreamRefused(res) {
			// A per-person remote refused the person's token: once more
			// with the account refreshed (perperson.go).
			var (
				out *mcp.CallToolResult
				err error
			)
			if call, res, out, err = f.retryTool(ctx, req, pr, call, res); out != nil || err != nil {
				return out, err
			}
		}
	}
	out, err := f.await(ctx, req, t, key, call, res, start)
	if cacheFor > 0 && err == nil && out != nil && !out.IsError && out.InputRequests == nil && res.Outcome == route.OK && len(res.Result) > 0 {
		f.cache.PutDecoded(key.ProjectID, t.Name, args, res.Result, f.newCachedResult(shareResult(out)), cacheFor)
	}
	return out, err
}

// The checks every way of calling a tool shares, in the order go-sdk's
// path makes them: a plain call ([Front.toolHandler], through
// [view.resolve]), a 2026-07-28 task (tasks_modern.go) and a 2025-11-25
// task (tasks_session.go) all call [Front.admitCall] (the rate limit, then
// the access policy) and [Front.pickCall] (the instance argument, the
// replica, validation against that replica's schema). The key was checked
// in dispatch. A call that passes is picked, not sent: the caller sends it
// (route.Call.Send) or hands it to the task runtime.

// admitCall looks up tool name for key as the project is now, after the
// key's rate limit (counted is true when the call was counted already: a
// call the early path handed over). A refusal is either an isError result
// (the rate limit, which the model reads) or a JSON-RPC error ("Tool <name>
// not found", the same words whether the tool is unknown, disabled or
// filtered out).
func (f *Front) admitCall(ctx context.Context, key store.Key, name string, counted bool) (*agents.Tool, *access.Controls, *mcp.CallToolResult, error) {
	c := f.controls.Get(ctx, key.ProjectID)
	if n := c.Settings.RateLimitPerMinute; n > 0 && !counted {
		if ok, retry := f.limiter.Allow(key.ID, n); !ok {
			return nil, c, errorResult(ratelimit.Message(n, retry)), nil
		}
	}
	t := f.reg.Snapshot(key.ProjectID).Tools[name]
	if t == nil || !access.For(key, c).Permits(t) {
		return nil, c, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Tool " + trimName(name) + " not found"}
	}
	return t, c, nil, nil
}

// pickRequest is a call [Front.pickCall] checks and picks a replica for.
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
// found), for [Front.await] or the task path to answer. A per-person
// remote's call may instead be refused with rpcErr, a JSON-RPC error (the
// URL elicitation of a connect page, -32042): see perperson.go.
func (f *Front) pickCall(ctx context.Context, p pickRequest) (call *route.Call, res route.Result, args json.RawMessage, refused *mcp.CallToolResult, rpcErr error) {
	t := p.Tool
	// (Arguments over the project's limit were refused in dispatch,
	// before go-sdk parsed them.)
	args, instance, err := prepareArgs(t, p.Args)
	if err != nil {
		return nil, res, nil, errorResult(invalidArgs(t, err)), nil
	}
	if instance != "" && !slices.Contains(t.Instances(), instance) {
		return nil, res, nil, errorResult(instanceProblem(t, instance)), nil
	}
	caller, err := f.caller(ctx, p.Key, p.Caps)
	if err != nil {
		return nil, res, nil, errorResult(err.Error()), nil
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
		return nil, res, nil, errorResult(invalidArgs(t, err)), nil
	}
	if r := f.checkUpstream(ctx, call, p.Key.ProjectID, caller, t.Name, p.Caps, p.token); r != nil {
		call.Release()
		out, err := r.toolAnswer()
		return nil, res, nil, out, err
	}
	return call, res, args, nil, nil
}

// shareResult returns a copy of r that go-sdk may write into (it adds to
// _meta) while r stays as it was: a cached result is decoded once and
// every hit gets such a copy, its content shared and never modified.
func shareResult(r *mcp.CallToolResult) *mcp.CallToolResult {
	c := *r
	c.Meta = maps.Clone(r.Meta)
	return &c
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
func (f *Front) wait(ctx context.Context, t *agents.Tool, key store.Key, c *access.Controls) time.Duration {
	if t.Def.TimeoutMs > 0 {
		return time.Duration(t.Def.TimeoutMs) * time.Millisecond
	}
	if c == nil {
		c = f.controls.Get(ctx, key.ProjectID)
	}
	return c.Settings.CallWait()
}

// await passes the agent's questions to the user until the call ends, then
// logs it and turns how it ended into the client's answer.
func (f *Front) await(ctx context.Context, req *mcp.CallToolRequest, t *agents.Tool, key store.Key, call *route.Call, res route.Result, start time.Time) (*mcp.CallToolResult, error) {
	for res.Question != nil {
		if handingOff(ctx, call, res, key, start) {
			return nil, errHandedOff
		}
		q := res.Question
		if q.Type == agentproto.TypeAsk {
			reqs, state, again, err := f.askClient(ctx, req.Session, req.Params.Meta, call, q, key.ID, start, func(res route.Result, start time.Time) {
				f.toolResult(t, key, res, start)
			})
			if again {
				res = waitOn(ctx, req, call)
				continue
			}
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{InputRequests: reqs, RequestState: state}, nil
		}
		caps, modern := declared(req.Session, req.Params.Meta)
		if !slices.Contains(caps, "elicitation") {
			call.Answer(q.Input, false, errCannotAsk)
			res = waitOn(ctx, req, call)
			continue
		}
		if !modern && req.Session != nil {
			accepted, err := confirmOver(ctx, req.Session, q, call.Deadline())
			call.Answer(q.Input, accepted, err)
			res = waitOn(ctx, req, call)
			continue
		}
		state := f.held.hold(&held{call: call, input: q.Input, keyID: key.ID, start: start}, func(h *held, res route.Result) {
			f.toolResult(t, key, res, h.start) // the user never answered: log the timeout
		})
		return &mcp.CallToolResult{InputRequests: question(q), RequestState: state}, nil
	}
	out := f.toolResult(t, key, res, start)
	if pe := protocolError(res); pe != nil {
		return nil, pe
	}
	if res.Outcome == route.Cancelled {
		if errors.Is(context.Cause(ctx), errSessionClosed) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msgSessionClosed}
		}
		return nil, ctx.Err()
	}
	if res.Outcome == route.NotFound {
		return nil, fmt.Errorf("Tool %s not found", t.Name)
	}
	return out, nil
}

// toolResult turns how a call ended into the client's result, and logs the
// call if it reached an agent.
func (f *Front) toolResult(t *agents.Tool, key store.Key, res route.Result, start time.Time) *mcp.CallToolResult {
	var (
		out     *mcp.CallToolResult
		errText string
		outcome = store.OutcomeOK
	)
	if t.Def.IdempotencyKey != "" {
		defer func() { f.repeats.end(res.ID, res, out, outcome) }()
	}
	switch res.Outcome {
	case route.NotFound:
		return nil
	case route.NoReplica:
		out, outcome = errorResult(res.Detail), store.OutcomeError
	case route.TimedOut:
		errText = res.Detail
		out, outcome = errorResult(errText), store.OutcomeTimeout
	case route.Cancelled:
		outcome = store.OutcomeCancelled
	case route.Disconnected:
		errText, outcome = f.disconnectedMessage(), store.OutcomeDisconnected
		out = errorResult(errText)
	case route.ToolError:
		errText, outcome = res.Detail, store.OutcomeError
		out = errorResult(res.Detail)
	default: // route.OK
		var err error
		if out, err = decodeResult(res.Result); err != nil {
			errText, outcome = "The agent sent a result the gateway could not read: "+err.Error(), store.OutcomeError
			out = errorResult(errText)
		} else if out.IsError {
			outcome, errText = store.OutcomeError, firstText(out)
		}
	}
	if res.Reached() {
		var retryOf string
		if t.Def.IdempotencyKey != "" {
			retryOf = f.repeats.retryOf(res.ID)
		}
		f.calls.Add(store.Call{
			Time: start, ProjectID: key.ProjectID, Kind: agentproto.KindTool, Name: t.Name,
			KeyID: key.ID, Agent: t.AgentKey, Replica: res.Replica.ID, Duration: time.Since(start),
			Outcome: outcome, Error: textfmt.Cut(errText, agentproto.MaxErrorLogLen), Progress: res.Progress, Billable: true,
			CallID: res.ID, RetryOf: retryOf,
		})
	}
	return out
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

// progressSender passes progress lines to the client when it asked for them
// with a progress token: through the request's session, or, for a call
// answered before go-sdk, onto its answer's stream (earlySink).
// Progress is best effort: a line the client cannot take is dropped, and
// the call goes on.
// Lines are numbered on from sent, the lines the call passed on before.
func progressSender(ctx context.Context, req *mcp.CallToolRequest, sent int) func(string) {
	token := req.Params.GetProgressToken()
	if token == nil {
		return nil
	}
	var send func(p *mcp.ProgressNotificationParams)
	switch ns, ok := ctx.Value(earlySinkKey{}).(earlySink); {
	case ok:
		send = func(p *mcp.ProgressNotificationParams) { ns.notify("notifications/progress", p) }
	case req.Session != nil:
		send = func(p *mcp.ProgressNotificationParams) { req.Session.NotifyProgress(ctx, p) }
	default:
		return nil
	}
	n := sent
	return func(line string) {
		n++
		send(&mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: line})
	}
}

// decodeResult reads an agent's CallToolResult. Results made only of plain
// text parts, the common case, are read with encoding/json into the MCP
// types directly; anything else goes through go-sdk's own decoding.
func decodeResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	var fast struct {
		Content []struct {
			Type        string          `json:"type"`
			Text        string          `json:"text"`
			Annotations json.RawMessage `json:"annotations"`
			Meta        json.RawMessage `json:"_meta"`
			Data        json.RawMessage `json:"data"`
			Resource    json.RawMessage `json:"resource"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
		Meta              json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &fast); err == nil && fast.Meta == nil {
		out := &mcp.CallToolResult{IsError: fast.IsError, Content: make([]mcp.Content, 0, len(fast.Content))}
		plain := true
		for _, c := range fast.Content {
			if c.Type != "text" || c.Annotations != nil || c.Meta != nil || c.Data != nil || c.Resource != nil {
				plain = false
				break
			}
			out.Content = append(out.Content, &mcp.TextContent{Text: c.Text})
		}
		if plain {
			if len(fast.StructuredContent) > 0 && string(fast.StructuredContent) != "null" {
				out.StructuredContent = fast.StructuredContent
			}
			return out, nil
		}
	}
	out := new(mcp.CallToolResult)
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, err
	}
	return out, nil
}

// protocolError is the JSON-RPC error the client gets when the agent
// ended the call with one (a core.ProtocolError, Node's ProtocolError)
// instead of a result, or nil: its code, message and data, answered as
// go-sdk answers a handler's error (at 2026-07-28, -32602 with HTTP 400).
func protocolError(res route.Result) *jsonrpc.Error {
	if res.Outcome != route.ToolError || res.Code == 0 {
		return nil
	}
	if res.Code == agentproto.CodeUpstreamUnauthorized {
		// Never a client's (perperson.go): a refusal of the person's
		// token that came too late in the call to deliver it again.
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msgUpstreamLate}
	}
	return &jsonrpc.Error{Code: int64(res.Code), Message: res.Detail, Data: res.Data}
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

func firstText(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}
