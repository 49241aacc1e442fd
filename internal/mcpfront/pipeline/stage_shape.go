package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/textfmt"
)

// shapeStage turns how a settled call stands into the client's answer for
// its era ([Pipeline.await]): the agent's questions go to the user, then the
// call is logged and its end answered. A call the run stage answered
// itself (a job, a refusal on retry) is not shaped again.
type shapeStage struct{}

func (shapeStage) serve(ctx context.Context, f *Pipeline, c *Call, next next) (*mcp.CallToolResult, error) {
	if c.task != nil {
		// A task's entry answers in its era's words: the task, or how
		// the pick ended (c.res).
		if c.settled {
			return nil, nil
		}
		return next.run(ctx, c)
	}
	if !c.settled {
		out, err := next.run(ctx, c)
		if !c.settled {
			return out, err
		}
	}
	return f.await(ctx, c.req, c.tool, c.key, c.call, c.res, c.start, c.pol)
}

// await passes the agent's questions to the user until the call ends, then
// logs it and turns how it ended into the client's answer.
func (f *Pipeline) await(ctx context.Context, req *Request, t *agents.Tool, key store.Key, call *route.Call, res route.Result, start time.Time, pol *callPolicy) (*mcp.CallToolResult, error) {
	for res.Question != nil {
		q := res.Question
		if q.Type == agentproto.TypeAsk {
			reqs, state, again, err := f.askClient(ctx, req.Session, req.Meta, call, q, key.ID, heldName(agentproto.KindTool, t.Name), start, func(res route.Result, start time.Time) {
				f.toolResult(t, key, res, start, nil)
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
		caps, modern := declared(req.Session, req.Meta)
		if !slices.Contains(caps, "elicitation") {
			call.Answer(q.Input, false, errCannotAsk)
			res = waitOn(ctx, req, call)
			continue
		}
		if !modern && req.Session != nil {
			accepted, err := confirmOver(ctx, askerFor(ctx, req.Session), q, call.Deadline())
			call.Answer(q.Input, accepted, err)
			res = waitOn(ctx, req, call)
			continue
		}
		state := f.held.hold(&held{call: call, input: q.Input, keyID: key.ID, name: heldName(agentproto.KindTool, t.Name), start: start}, func(h *held, res route.Result) {
			f.toolResult(t, key, res, h.start, nil) // the user never answered: log the timeout
		})
		return &mcp.CallToolResult{InputRequests: question(q), RequestState: state}, nil
	}
	out := f.toolResult(t, key, res, start, pol)
	if pe := protocolError(res); pe != nil {
		return nil, pe
	}
	if res.Outcome == route.Cancelled {
		if errors.Is(context.Cause(ctx), ErrSessionClosed) {
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
// call if it reached an agent: at once, or, for a call under a policy
// (pol), once the policy stage has shaped the result ([Pipeline.policyResult]).
func (f *Pipeline) toolResult(t *agents.Tool, key store.Key, res route.Result, start time.Time, pol *callPolicy) *mcp.CallToolResult {
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
		out, outcome = ErrorResult(res.Detail), store.OutcomeError
	case route.TimedOut:
		errText = res.Detail
		out, outcome = ErrorResult(errText), store.OutcomeTimeout
	case route.Cancelled:
		outcome = store.OutcomeCancelled
	case route.Disconnected:
		errText, outcome = f.disconnectedMessage(), store.OutcomeDisconnected
		out = ErrorResult(errText)
	case route.ToolError:
		errText, outcome = res.Detail, store.OutcomeError
		out = ErrorResult(res.Detail)
	default: // route.OK
		var err error
		if out, err = DecodeResult(res.Result); err != nil {
			errText, outcome = "The agent sent a result the gateway could not read: "+err.Error(), store.OutcomeError
			out = ErrorResult(errText)
		} else if out.IsError {
			outcome, errText = store.OutcomeError, FirstText(out)
		}
	}
	if res.Reached() {
		var retryOf string
		if t.Def.IdempotencyKey != "" {
			retryOf = f.repeats.retryOf(res.ID)
		}
		rec := store.Call{
			Time: start, ProjectID: key.ProjectID, Kind: agentproto.KindTool, Name: t.Name,
			KeyID: key.ID, Agent: t.AgentKey, Replica: res.Replica.ID, Duration: time.Since(start),
			Outcome: outcome, Error: textfmt.Cut(errText, agentproto.MaxErrorLogLen), Progress: res.Progress, Billable: true,
			CallID: res.ID, RetryOf: retryOf,
		}
		if pol != nil {
			pol.pending = &rec
		} else {
			f.calls.Add(rec)
		}
	}
	return out
}
