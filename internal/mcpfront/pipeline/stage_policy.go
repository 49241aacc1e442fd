package pipeline

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/interceptors"
	"github.com/spacefix/spacefix/internal/policy"
)

// policyStage is the policy point: every call that is picked passes here
// exactly once, before the cache, a request id's claim or any agent, and
// every answer of such a call passes here on its way back.
//
// On the way in, the rules `on: call` decide (deny answers a tool error,
// confirm asks the person: policy_confirm.go), then the interceptors'
// tools/call request phase may block the call or rewrite its arguments
// (validated again against the tool's schema). On the way back, the rules
// `on: result` and the interceptors' response phase shape the answer
// ([Pipeline.policyResult]), whether it came from the agent, the cache or a
// repeat's record.
//
// The cache and the request ids' records hold the agent's own result,
// before the policy: result rules may read the caller (a redaction for
// viewers only), and one cached result serves every caller of the
// project, so each answer is shaped for its caller on the way out, never
// stored shaped. A task's or a job's result is shaped when it ends, before
// the runtime stores it (its owner is its only reader): [callPolicy.taskShaper].
//
// A settled call (a retry with the user's answer to the agent's question,
// or one that found no replica) passed the call rules when it was made,
// or reaches no agent: only its answer is shaped. While the project's
// policy cannot be applied (it does not compile, or the controls could not
// be read), every call is refused, a settled one too.
type policyStage struct{}

func (policyStage) serve(ctx context.Context, f *Pipeline, c *Call, next next) (*mcp.CallToolResult, error) {
	if c.controls.PolicyErr != nil {
		// Fail closed, a settled call too: its answer would go out
		// unshaped.
		return f.refuse(c, c.controls.RefusedMessage()), nil
	}
	if c.settled {
		pc := f.policyFor(ctx, c)
		out, err := next.run(ctx, c)
		return f.policyResult(ctx, pc, out), err
	}
	pc := f.policyFor(ctx, c)
	if pc == nil {
		return next.run(ctx, c)
	}
	if pc.who != nil {
		return f.refuse(c, pc.who.Error()), nil
	}
	switch d := pc.decide(policy.OnCall); d.Effect {
	case policy.Deny:
		return f.refuse(c, d.Message), nil
	case policy.Confirm:
		if out, err := f.policyConfirm(ctx, c, pc, d); out != nil || err != nil {
			return out, err
		}
	}
	if out := f.interceptRequest(ctx, c, pc); out != nil {
		return out, nil
	}
	out, err := next.run(ctx, c)
	if c.asJob || c.task != nil {
		return out, err // shaped as it ended: taskShaper
	}
	return f.policyResult(ctx, pc, out), err
}

// policyResult shapes a call's answer for its caller, then writes its log
// record, which [Pipeline.toolResult] held so that it says what the policy
// did. A question for the user (an input_required result) is not shaped.
func (f *Pipeline) policyResult(ctx context.Context, pc *callPolicy, out *mcp.CallToolResult) *mcp.CallToolResult {
	if pc == nil {
		return out
	}
	switch {
	case pc.who != nil && out != nil:
		out = ErrorResult(pc.who.Error())
	case out != nil && out.InputRequests == nil:
		out = pc.shape(ctx, out)
	}
	if rec := pc.pending; rec != nil {
		pc.pending = nil
		rec.Policy = pc.String()
		f.calls.Add(*rec)
	}
	return out
}

// shape applies the rules on result and the interceptors' response phase
// to out, which it never changes in place (it may be the cache's).
func (pc *callPolicy) shape(ctx context.Context, out *mcp.CallToolResult) *mcp.CallToolResult {
	if pc.p.Has(policy.OnResult) {
		pc.in.Result = access.PolicyResult(out)
		d := pc.decide(policy.OnResult)
		pc.in.Result = nil
		switch d.Effect {
		case policy.Deny:
			return ErrorResult(d.Message)
		case policy.Redact:
			out = access.ShapeResult(out, &d)
		}
	}
	hk := pc.chain.Hooked(ctx, "tools/call", interceptors.PhaseResponse)
	if hk == nil {
		return out
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return ErrorResult(msgUnreadable)
	}
	payload, blocked := pc.intercept(ctx, hk, raw)
	if blocked != "" {
		return ErrorResult(blocked)
	}
	if bytes.Equal(payload, raw) {
		return out
	}
	r, err := DecodeResult(payload)
	if err != nil {
		return ErrorResult(msgUnreadable)
	}
	return r
}

// msgUnreadable answers a result an interceptor rewrote into something
// that is not a tool result.
const msgUnreadable = "This call's result was refused: an interceptor of the project's policy rewrote it into something that is not a tool result."

// interceptRequest runs the interceptors' tools/call request phase on c:
// nil, or the refusal to answer. A rewrite of the arguments replaces
// them, once validated against the tool's schema on c's replica.
func (f *Pipeline) interceptRequest(ctx context.Context, c *Call, pc *callPolicy) *mcp.CallToolResult {
	hk := pc.chain.Hooked(ctx, "tools/call", interceptors.PhaseRequest)
	if hk == nil {
		return nil
	}
	payload, err := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}{c.tool.Name, c.args})
	if err != nil {
		return f.refuse(c, msgRewritten)
	}
	out, blocked := pc.intercept(ctx, hk, payload)
	if blocked != "" {
		return f.refuse(c, blocked)
	}
	if bytes.Equal(out, payload) {
		return nil
	}
	var p struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(out, &p) != nil || len(p.Arguments) == 0 {
		return f.refuse(c, msgRewritten)
	}
	if err := validate(c.tool.SchemaOn(c.call.Replica()), p.Arguments); err != nil {
		return f.refuse(c, "An interceptor of the project's policy rewrote this call's arguments into ones the tool does not take. "+invalidArgs(c.tool, err))
	}
	c.args = p.Arguments
	pc.in.SetArgs(p.Arguments)
	c.call.SetArgs(p.Arguments)
	return nil
}

// msgRewritten refuses a call an interceptor rewrote into something that
// is not a call.
const msgRewritten = "This call was refused: an interceptor of the project's policy rewrote it into something that is not a tool call."
