//lint:file-ignore SA1019 sampling and roots are deprecated in 2026-07-28 (SEP-2577) but still part of every protocol version the gateway serves; agents may use them
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
)

// A 2025 session's server-to-client request (an elicitation, a sampling
// request, roots/list) travels on the SSE stream of the client request it
// relates to, and the client POSTs its response to the session. For a call
// answered before go-sdk (mcpfront/early.go) the gateway does both itself: the
// request goes out as one more event of the call's own answer, numbered
// from streamAskBase so it never meets an id go-sdk numbers in the same
// session, and dispatch hands the client's response to the waiting call
// (view.deliver) instead of go-sdk, answering 202 as go-sdk does. What the
// call then does with the answer is what it does on go-sdk's path: the
// checks go-sdk makes of a response are made here, in its words
// (TestEarlySessionQuestionsAsked holds the two answers equal).

var _ pipeline.Asker = (*StreamAsker)(nil)

// streamAskBase starts the ids of the requests an early call sends: go-sdk
// numbers its own requests of a session from 1.
const streamAskBase = 1 << 40

// StreamAsker sends an early session call's requests on its answer's
// stream and waits for the responses view.deliver hands it.
type StreamAsker struct {
	v       *Sessions
	session string
	ss      *mcp.ServerSession // for the client's capabilities
	out     *wire.SSEStream

	mu sync.Mutex // out is written by the requests pipeline.Fulfil sends at once
}

// Elicit asks for a form (or opens a URL), as ss.Elicit does: the client
// must have declared the mode, and an accepted form's content must match
// its schema (defaults applied).
func (a *StreamAsker) Elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if p == nil {
		return nil, errors.New("invalid params: params cannot be nil")
	}
	if p.Mode == "" {
		q := *p
		if q.URL != "" || q.ElicitationID != "" {
			q.Mode = "url"
		} else {
			q.Mode = "form"
		}
		p = &q
	}
	ip := a.ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return nil, errors.New("client does not support elicitation")
	}
	caps := ip.Capabilities.Elicitation
	switch {
	case p.Mode == "form" && caps.Form == nil && caps.URL != nil:
		return nil, errors.New(`client does not support "form" elicitation`)
	case p.Mode == "url" && caps.URL == nil:
		return nil, errors.New(`client does not support "url" elicitation`)
	}
	var res mcp.ElicitResult
	if err := a.send(ctx, "elicitation/create", p, &res); err != nil {
		return nil, err
	}
	if res.Action != "accept" || res.Content == nil || p.RequestedSchema == nil {
		return &res, nil
	}
	var schema *jsonschema.Schema
	raw, err := json.Marshal(p.RequestedSchema)
	if err == nil {
		err = json.Unmarshal(raw, &schema)
	}
	if err != nil || schema == nil {
		return &res, err
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return nil, err
	}
	if err := resolved.Validate(res.Content); err != nil {
		return nil, fmt.Errorf("elicitation result content does not match requested schema: %v", err)
	}
	if err := resolved.ApplyDefaults(&res.Content); err != nil {
		return nil, fmt.Errorf("failed to apply schema defaults to elicitation result: %v", err)
	}
	return &res, nil
}

// CreateMessageWithTools asks the client's model, as
// ss.CreateMessageWithTools does.
func (a *StreamAsker) CreateMessageWithTools(ctx context.Context, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
	if p == nil {
		p = &mcp.CreateMessageWithToolsParams{}
	}
	if p.Messages == nil {
		q := *p
		q.Messages = []*mcp.SamplingMessageV2{} // not JSON null
		p = &q
	}
	var res mcp.CreateMessageWithToolsResult
	if err := a.send(ctx, "sampling/createMessage", p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ListRoots asks for the client's roots, as ss.ListRoots does.
func (a *StreamAsker) ListRoots(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	var params any = p
	if p == nil {
		params = struct{}{}
	}
	var res mcp.ListRootsResult
	if err := a.send(ctx, "roots/list", params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// notify sends a notification of the call on its stream, in turn with its
// requests.
func (a *StreamAsker) notify(method string, params any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.out.Notify(method, params)
}

// send writes a request of method with params on the call's stream and
// decodes the client's result into out; a JSON-RPC error the client
// answers is the error.
func (a *StreamAsker) send(ctx context.Context, method string, params any, out any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("marshaling %s params: %w", method, err)
	}
	id, answers, forget, ok := a.v.awaitAnswer(a.session)
	if !ok {
		return pipeline.ErrSessionClosed
	}
	defer forget()
	jid, err := jsonrpc.MakeID(float64(id))
	if err != nil {
		return err
	}
	msg, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: jid, Method: method, Params: raw})
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.out.NotifyRaw(msg)
	a.mu.Unlock()
	select {
	case resp := <-answers:
		if len(resp.RPCErr) > 0 {
			var werr jsonrpc.Error
			if err := json.Unmarshal(resp.RPCErr, &werr); err != nil {
				return fmt.Errorf("the client's error answer could not be read: %v", err)
			}
			return &werr
		}
		if err := json.Unmarshal(resp.Result, out); err != nil {
			return fmt.Errorf("unmarshaling %s result: %w", method, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitAnswer opens a wait for the client's response to a request of
// session id this call sends: its id, where the response arrives, and the
// function that closes the wait; ok is false when the session is gone.
func (v *Sessions) awaitAnswer(id string) (rid int64, answers <-chan *wire.Request, forget func(), ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.m[id]
	if s == nil {
		return 0, nil, nil, false
	}
	if s.asked == nil {
		s.asked = map[int64]chan *wire.Request{}
	}
	v.asks++
	rid = streamAskBase + v.asks
	ch := make(chan *wire.Request, 1)
	s.asked[rid] = ch
	return rid, ch, func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		delete(s.asked, rid)
	}, true
}

// Deliver hands req, a client's response POSTed to session id, to the
// early call waiting for it, and reports whether one was: then the
// response is the gateway's, not go-sdk's.
func (v *Sessions) Deliver(id string, req *wire.Request) bool {
	if req.Method != "" || len(req.ID) == 0 || (req.Result == nil && req.RPCErr == nil) {
		return false
	}
	var rid int64
	if json.Unmarshal(req.ID, &rid) != nil || rid <= streamAskBase {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.m[id]
	if s == nil {
		return false
	}
	ch, ok := s.asked[rid]
	if !ok {
		return false
	}
	delete(s.asked, rid) // one response a request
	ch <- req
	return true
}

// Asker returns what puts the questions of an early call of session id
// (ss) to its client on the call's answer stream out.
func (v *Sessions) Asker(id string, ss *mcp.ServerSession, out *wire.SSEStream) *StreamAsker {
	return &StreamAsker{v: v, session: id, ss: ss, out: out}
}

// Notify sends a notification of the call on its answer stream.
func (a *StreamAsker) Notify(method string, params any) { a.notify(method, params) }

// Hold keeps the answer stream for the caller (the call's answer) until
// release: a question's send may still be writing.
func (a *StreamAsker) Hold() (release func()) {
	a.mu.Lock()
	return a.mu.Unlock
}
