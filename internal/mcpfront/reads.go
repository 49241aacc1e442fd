package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/spacefix/spacefix/core/agentproto"
	"github.com/spacefix/spacefix/core/textfmt"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/store"
)

// A resource read and a prompt get (and a completion) go to their agent as
// a call of their kind: delivered once, within the project's call wait,
// logged and counted.

// deliverRead delivers a resource read or prompt get and logs it. Failures
// come back as JSON-RPC errors.
func (f *Front) deliverRead(ctx context.Context, key store.Key, kind, exposed, registered, agentKey string, args json.RawMessage, target route.Target) (json.RawMessage, error) {
	wait := f.controls.Get(ctx, key.ProjectID).Settings.CallWait()
	start := time.Now()
	caller, err := f.caller(ctx, key, nil)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	res := route.Deliver(ctx, f.reg, key.ProjectID, target, route.Request{
		Kind: kind, Name: registered, Exposed: exposed, Args: args, Wait: wait,
		Caller: caller, Identity: f.identityTokens(ctx, key.ProjectID, agentKey, caller),
	})
	return f.readResult(ctx, key, kind, exposed, agentKey, res, start)
}

// readResult logs how a read (a resource, a prompt, a completion) ended
// and turns it into the client's answer: the agent's result, or a
// JSON-RPC error.
func (f *Front) readResult(ctx context.Context, key store.Key, kind, exposed, agentKey string, res route.Result, start time.Time) (json.RawMessage, error) {
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
