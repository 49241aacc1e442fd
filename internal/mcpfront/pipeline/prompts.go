package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/route"
)

// PromptHandler renders a prompt through its agent, after checking that
// every required argument is there.
func (f *Pipeline) PromptHandler(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	key, _ := KeyFrom(req.Extra.TokenInfo)
	name := req.Params.Name
	p := f.reg.Snapshot(key.ProjectID).Prompts[name]
	if p == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Prompt " + TrimName(name) + " not found"}
	}
	for _, a := range p.Def.Arguments {
		if _, ok := req.Params.Arguments[a.Name]; a.Required && !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: fmt.Sprintf("Invalid arguments for prompt %s: data must have required property '%s'", name, a.Name)}
		}
	}
	args, _ := json.Marshal(req.Params.Arguments)
	if req.Params.Arguments == nil {
		args = []byte("{}")
	}
	target := func(s *agents.Snapshot) ([]*agents.Replica, time.Time, bool) {
		p := s.Prompts[name]
		if p == nil {
			return nil, time.Time{}, false
		}
		return p.Replicas, p.GraceUntil, true
	}
	var (
		call  *route.Call
		res   route.Result
		start = time.Now()
	)
	if req.Params.RequestState != "" {
		// A retry that carries the client's responses to the agent's ask.
		h, err := f.held.resume(req.Params.RequestState, key.ID, heldName(agentproto.KindPrompt, name))
		if err != nil || h.asked == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: ErrBadState.Error()}
		}
		h.respond(req.Params.InputResponses)
		call, start = h.call, h.start
		res = call.Wait(ctx, nil)
	} else {
		caps := callerCaps(req.Session, req.Params.Meta)
		caller, err := f.Caller(ctx, key, caps)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		rr := route.Request{
			Kind: agentproto.KindPrompt, Name: p.Def.Name, Exposed: name, Args: args,
			Wait:   f.controls.Get(ctx, key.ProjectID).Settings.CallWait(),
			Caller: caller, Identity: f.identityTokens(ctx, key.ProjectID, p.AgentKey, caller),
		}
		var refusal *upstreamRefusal
		if call, res, refusal = f.runRead(ctx, key, rr, target, caller, caps); refusal != nil {
			return nil, refusal.rpcError()
		}
	}
	for call != nil && res.Question != nil {
		q := res.Question
		if q.Type != agentproto.TypeAsk {
			call.Answer(q.Input, false, errors.New("a prompt cannot ask a yes/no question (Confirm); use Elicit"))
			res = call.Wait(ctx, nil)
			continue
		}
		reqs, state, again, err := f.askClient(ctx, req.Session, req.Params.Meta, call, q, key.ID, heldName(agentproto.KindPrompt, name), start, func(res route.Result, start time.Time) {
			f.readResult(context.Background(), key, agentproto.KindPrompt, name, p.AgentKey, res, start)
		})
		if again {
			res = call.Wait(ctx, nil)
			continue
		}
		if err != nil {
			return nil, err
		}
		return &mcp.GetPromptResult{InputRequests: reqs, RequestState: state}, nil
	}
	raw, err := f.readResult(ctx, key, agentproto.KindPrompt, name, p.AgentKey, res, start)
	if err != nil {
		return nil, err
	}
	out := new(mcp.GetPromptResult)
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "The agent sent a prompt the gateway could not read: " + err.Error()}
	}
	return out, nil
}
