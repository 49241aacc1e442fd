package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/spacefix/spacefix/core/agentproto"
	"github.com/spacefix/spacefix/core/textfmt"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/recovery"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/store"
)

// resourceHandler reads a resource through its agent. A read is a call:
// logged, counted and bounded by the project's call wait. A failure reaches
// the client as JSON-RPC error -32603 with the handler's message.
func (f *Front) resourceHandler(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	key, _ := keyFrom(req.Extra.TokenInfo)
	uri := req.Params.URI
	r := f.reg.Snapshot(key.ProjectID).Resources[uri]
	if r == nil || r.Def.Template {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	target := func(s *agents.Snapshot) ([]*agents.Replica, time.Time, bool) {
		r := s.Resources[uri]
		if r == nil {
			return nil, time.Time{}, false
		}
		return r.Replicas, r.GraceUntil, true
	}
	raw, err := f.deliverRead(ctx, key, agentproto.KindResource, uri, uri, r.AgentKey, nil, target)
	if err != nil {
		return nil, err
	}
	return resourceContents(uri, r, raw)
}

// templateHandler reads a resource through the template it matches: the
// agent's template handler gets the URI and the template's variables.
func (f *Front) templateHandler(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	key, _ := keyFrom(req.Extra.TokenInfo)
	uri := req.Params.URI
	r, params := matchTemplate(f.reg.Snapshot(key.ProjectID), uri)
	if r == nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	tmpl := r.Def.URI
	target := func(s *agents.Snapshot) ([]*agents.Replica, time.Time, bool) {
		r := s.Resources[tmpl]
		if r == nil || !r.Def.Template {
			return nil, time.Time{}, false
		}
		return r.Replicas, r.GraceUntil, true
	}
	args, _ := json.Marshal(map[string]any{"uri": uri, "params": params})
	raw, err := f.deliverRead(ctx, key, agentproto.KindResource, uri, tmpl, r.AgentKey, args, target)
	if err != nil {
		return nil, err
	}
	return resourceContents(uri, r, raw)
}

// matchTemplate finds the project's resource template that uri matches,
// first by template order, and the values of its variables.
func matchTemplate(s *agents.Snapshot, uri string) (*agents.Resource, map[string]string) {
	for _, r := range s.ResList {
		if !r.Def.Template {
			continue
		}
		t, err := uritemplate.New(r.Def.URI)
		if err != nil {
			continue // checked at registration
		}
		vals := t.Match(uri)
		if vals == nil {
			continue
		}
		params := make(map[string]string, len(t.Varnames()))
		for _, name := range t.Varnames() {
			params[name] = vals.Get(name).String()
		}
		return r, params
	}
	return nil, nil
}

// resourceContents turns an agent's read of r at uri into the client's
// result.
func resourceContents(uri string, r *agents.Resource, raw json.RawMessage) (*mcp.ReadResourceResult, error) {
	var rr agentproto.ResourceResult
	if err := json.Unmarshal(raw, &rr); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "The agent sent a resource the gateway could not read: " + err.Error()}
	}
	mime := rr.MimeType
	if mime == "" {
		mime = resourceMime(r.Def.MimeType)
	}
	if rr.Blob != nil {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Blob: rr.Blob}}}, nil
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: rr.Text}}}, nil
}

// promptHandler renders a prompt through its agent, after checking that
// every required argument is there.
func (f *Front) promptHandler(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	key, _ := keyFrom(req.Extra.TokenInfo)
	name := req.Params.Name
	p := f.reg.Snapshot(key.ProjectID).Prompts[name]
	if p == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Prompt " + trimName(name) + " not found"}
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
		h, err := f.held.resume(req.Params.RequestState, key.ID)
		if err != nil || h.asked == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: errBadState.Error()}
		}
		h.respond(req.Params.InputResponses)
		call, start = h.call, h.start
		res = call.Wait(ctx, nil)
	} else {
		call, res = route.Start(ctx, f.reg, key.ProjectID, target, route.Request{
			Kind: agentproto.KindPrompt, Name: p.Def.Name, Exposed: name, Args: args,
			Wait:   f.controls.Get(ctx, key.ProjectID).Settings.CallWait(),
			Caller: agentproto.Caller{KeyID: key.ID, KeyName: key.Name, Capabilities: callerCaps(req.Session, req.Params.Meta)},
		})
		if call != nil {
			res = call.Wait(ctx, nil)
		}
	}
	for call != nil && res.Question != nil {
		q := res.Question
		if q.Type != agentproto.TypeAsk {
			call.Answer(q.Input, false, errors.New("a prompt cannot ask a yes/no question (Confirm); use Elicit"))
			res = call.Wait(ctx, nil)
			continue
		}
		reqs, state, again, err := f.askClient(ctx, req.Session, req.Params.Meta, call, q, key.ID, start, func(res route.Result, start time.Time) {
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

// deliverRead delivers a resource read or prompt get and logs it. Failures
// come back as JSON-RPC errors.
func (f *Front) deliverRead(ctx context.Context, key store.Key, kind, exposed, registered, agentKey string, args json.RawMessage, target route.Target) (json.RawMessage, error) {
	wait := f.controls.Get(ctx, key.ProjectID).Settings.CallWait()
	start := time.Now()
	res := route.Deliver(ctx, f.reg, key.ProjectID, target, route.Request{
		Kind: kind, Name: registered, Exposed: exposed, Args: args, Wait: wait,
		Caller: agentproto.Caller{KeyID: key.ID, KeyName: key.Name},
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

// tellSubscribers passes resource updates on, in the order they came,
// until stop is closed.
func (f *Front) tellSubscribers(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case c := <-f.updated:
			recovery.Do(f.log, "tell subscribers a resource changed", func() { f.resourceUpdated(c.Project, c.URI) })
		}
	}
}

// resourceUpdated tells the project's sessions subscribed to uri that it
// changed (notifications/resources/updated), as its agent said.
func (f *Front) resourceUpdated(projectID int64, uri string) {
	f.mu.Lock()
	var servers []*mcp.Server
	for _, v := range f.views {
		if v.key.ProjectID == projectID {
			servers = append(servers, v.server)
		}
	}
	f.mu.Unlock()
	for _, s := range servers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			f.log.Debug("tell subscribers a resource changed", "uri", uri, "err", err)
		}
		cancel()
	}
}
