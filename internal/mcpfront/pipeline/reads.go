package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/textfmt"
)

// A resource read and a prompt get (and a completion) go to their agent as
// a call of their kind: delivered once, within the project's call wait,
// logged and counted.

// deliverRead delivers a resource read or a completion and logs it.
// Failures come back as JSON-RPC errors. caps are the client's declared
// capabilities, for a per-person remote's connect answer (perperson.go);
// the agent is told of none.
func (f *Pipeline) deliverRead(ctx context.Context, key store.Key, kind, exposed, registered, agentKey string, args json.RawMessage, target route.Target, caps []string) (json.RawMessage, error) {
	wait := f.controls.Get(ctx, key.ProjectID).Settings.CallWait()
	start := time.Now()
	caller, err := f.Caller(ctx, key, nil)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	rr := route.Request{
		Kind: kind, Name: registered, Exposed: exposed, Args: args, Wait: wait,
		Caller: caller, Identity: f.identityTokens(ctx, key.ProjectID, agentKey, caller),
	}
	_, res, refusal := f.runRead(ctx, key, rr, target, caller, caps)
	if refusal != nil {
		return nil, refusal.rpcError()
	}
	return f.readResult(ctx, key, kind, exposed, agentKey, res, start)
}

// runRead delivers a read, a prompt get or a completion and waits for its
// end, or its first question (a prompt's): the call, and how it is going;
// or the refusal of a per-person remote's call. A call such a remote
// refused for the person's token is delivered once more, with the account
// refreshed, within what is left of its wait.
func (f *Pipeline) runRead(ctx context.Context, key store.Key, rr route.Request, target route.Target, caller agentproto.Caller, caps []string) (*route.Call, route.Result, *upstreamRefusal) {
	call, res, refusal := f.startRead(ctx, key, rr, target, caller, caps, "")
	if call == nil {
		return nil, res, refusal
	}
	if res = call.Wait(ctx, nil); !upstreamRefused(res) {
		return call, res, nil
	}
	token, refusal := f.refreshUpstream(ctx, res.Replica, key.ProjectID, caller, rr.Exposed, caps, call.UpstreamToken())
	if refusal != nil {
		return nil, res, refusal
	}
	rr.Wait = max(time.Until(call.Deadline()), time.Millisecond)
	if call, res, refusal = f.startRead(ctx, key, rr, target, caller, caps, token); call == nil {
		return nil, res, refusal
	}
	if res = call.Wait(ctx, nil); upstreamRefused(res) {
		return nil, res, f.refusedAgain(res.Replica, rr.Exposed, caps)
	}
	return call, res, nil
}

// startRead picks the replica of a read, a prompt get or a completion,
// checks it as a per-person remote's call (token: see
// [Pipeline.checkUpstream]) and sends it: the call under way, or how it
// ended (no call), or the refusal.
func (f *Pipeline) startRead(ctx context.Context, key store.Key, rr route.Request, target route.Target, caller agentproto.Caller, caps []string, token string) (*route.Call, route.Result, *upstreamRefusal) {
	call, res := route.Pick(ctx, f.reg, key.ProjectID, target, rr)
	if call == nil {
		return nil, res, nil
	}
	if r := f.checkUpstream(ctx, call, key.ProjectID, caller, rr.Exposed, caps, token); r != nil {
		call.Release()
		return nil, res, r
	}
	call, res = call.Send(ctx)
	return call, res, nil
}

// readResult logs how a read (a resource, a prompt, a completion) ended
// and turns it into the client's answer: the agent's result, or a
// JSON-RPC error.
func (f *Pipeline) readResult(ctx context.Context, key store.Key, kind, exposed, agentKey string, res route.Result, start time.Time) (json.RawMessage, error) {
	var errText, outcome = "", store.OutcomeOK
	switch res.Outcome {
	case route.NotFound:
		errText = fmt.Sprintf("%s %s not found", kindWord(kind), exposed)
	case route.NoReplica:
		errText = res.Detail
	case route.TimedOut:
		errText, outcome = res.Detail, store.OutcomeTimeout
	case route.Cancelled:
		outcome = store.OutcomeCancelled
	case route.Disconnected:
		errText, outcome = f.disconnectedMessage(), store.OutcomeDisconnected
	case route.ToolError:
		errText, outcome = res.Detail, store.OutcomeError
	}
	if res.Reached() {
		f.calls.Add(store.Call{
			Time: start, ProjectID: key.ProjectID, Kind: kind, Name: exposed, KeyID: key.ID,
			Agent: agentKey, Replica: res.Replica.ID, Duration: time.Since(start), Outcome: outcome,
			Error: textfmt.Cut(errText, agentproto.MaxErrorLogLen), Progress: res.Progress,
			Billable: kind != agentproto.KindComplete, // suggestions as a person types are not calls they pay for
		})
	}
	if res.Outcome == route.Cancelled {
		return nil, ctx.Err()
	}
	if pe := protocolError(res); pe != nil {
		return nil, pe
	}
	if errText != "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: errText}
	}
	return res.Result, nil
}

func kindWord(kind string) string {
	switch kind {
	case agentproto.KindPrompt:
		return "Prompt"
	case agentproto.KindComplete:
		return "Completion for"
	}
	return "Resource"
}
