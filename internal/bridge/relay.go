//lint:file-ignore SA1019 sampling is deprecated in 2026-07-28 (SEP-2577); 2025 servers still sample, and the bridge relays it
package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/route"
)

// callTool relays one tool call. The server's result goes back untouched
// (isError, every content part, structuredContent, _meta); a JSON-RPC error
// becomes the call's error message; a server that went away mid-call gives
// the gateway's disconnect message. Cancelling ctx (the client cancelled,
// the call timed out) sends notifications/cancelled to the server.
func (b *Bridge) callTool(ctx context.Context, shared *upstream, name string, args json.RawMessage) (out any, err error) {
	err = b.via(ctx, shared, func(up *upstream) error {
		out, err = b.callToolOn(ctx, up, name, args)
		return err
	})
	return out, err
}

func (b *Bridge) callToolOn(ctx context.Context, up *upstream, name string, args json.RawMessage) (any, error) {
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	if up.modern {
		params.Meta = callerMeta(ctx)
	}
	tok, done := b.watchProgress(ctx, up.cs)
	defer done()
	params.SetProgressToken(tok)
	cctx, stop := up.bind(ctx)
	defer stop()
	res, err := up.cs.CallTool(cctx, params)
	for rounds := 0; err == nil && res.NeedsInput(); rounds++ {
		// A 2026-07-28 server asks for input: see inputs.go.
		if rounds == maxInputRounds {
			return nil, fmt.Errorf("The MCP server asked for input %d times in one call; the bridge gave up.", rounds)
		}
		responses, aerr := answer(cctx, res.InputRequests)
		if aerr != nil {
			return nil, aerr
		}
		retry := *params
		retry.InputResponses, retry.RequestState = responses, res.RequestState
		res, err = up.cs.CallTool(cctx, &retry)
	}
	if err != nil {
		return nil, b.callError(ctx, err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("The MCP server's result could not be encoded: %v", err)
	}
	return json.RawMessage(out), nil
}

// upstream is one session with the server. ctx ends when the server is
// gone or stopped answering: calls bound to it end then, even those whose
// request the server will never answer.
type upstream struct {
	cs *mcp.ClientSession
	// client is cs's client, on which a custom request's method is
	// registered before it is sent (request.go).
	client *mcp.Client
	ctx    context.Context
	// modern says the server speaks 2026-07-28: it asks for input with
	// input_required results, which the bridge answers (inputs.go),
	// rather than with requests on the session (relayRequests).
	modern bool
}

// bind returns a context that ends with ctx (the call's) or with the
// session.
func (up *upstream) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(up.ctx, cancel)
	return cctx, func() { stop(); cancel() }
}

// callError words a failed request for the model: ctx is the call's own.
func (b *Bridge) callError(ctx context.Context, err error) error {
	var rpc *jsonrpc.Error
	switch {
	case unauthorized(err): // a person's token, refused: see via
		return errUpstreamUnauthorized
	case errors.Is(err, errUpstreamForbidden):
		return errUpstreamForbidden
	}
	if se := serverError(err); se != nil && se.Code == mcp.CodeMissingRequiredClientCapabilities {
		return missingCapability(ctx, se)
	}
	switch {
	case strings.Contains(err.Error(), errTooLarge.Error()): // go-sdk words the read's error with %v
		b.log.Warn("bridge: request to the MCP server failed", "err", redactErr(err))
		return errResultTooLarge
	case errors.As(err, &rpc):
		return errors.New(rpc.Message)
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case errors.Is(err, mcp.ErrConnectionClosed) || strings.Contains(err.Error(), "closed"):
		return errors.New(route.MsgDisconnected)
	}
	b.log.Warn("bridge: request to the MCP server failed", "err", redactErr(err))
	return errors.New(route.MsgDisconnected)
}

func (b *Bridge) getPrompt(ctx context.Context, shared *upstream, name string, args map[string]string) (out core.PromptResult, err error) {
	err = b.via(ctx, shared, func(up *upstream) error {
		out, err = b.getPromptOn(ctx, up, name, args)
		return err
	})
	return out, err
}

func (b *Bridge) getPromptOn(ctx context.Context, up *upstream, name string, args map[string]string) (core.PromptResult, error) {
	_, done := b.watchProgress(ctx, up.cs) // in flight: see soleCall
	defer done()
	cctx, stop := up.bind(ctx)
	defer stop()
	params := &mcp.GetPromptParams{Name: name, Arguments: args}
	if up.modern {
		params.Meta = callerMeta(ctx)
	}
	res, err := up.cs.GetPrompt(cctx, params)
	for rounds := 0; err == nil && res.NeedsInput(); rounds++ {
		if rounds == maxInputRounds {
			return core.PromptResult{}, fmt.Errorf("The MCP server asked for input %d times for one prompt; the bridge gave up.", rounds)
		}
		responses, aerr := answer(cctx, res.InputRequests)
		if aerr != nil {
			return core.PromptResult{}, aerr
		}
		retry := *params
		retry.InputResponses, retry.RequestState = responses, res.RequestState
		res, err = up.cs.GetPrompt(cctx, &retry)
	}
	if err != nil {
		return core.PromptResult{}, b.callError(ctx, err)
	}
	out := core.PromptResult{Description: res.Description}
	for _, m := range res.Messages {
		out.Messages = append(out.Messages, core.PromptMessage{Role: string(m.Role), Content: content(m.Content)})
	}
	return out, nil
}

// content converts one MCP content block into core's.
func content(c mcp.Content) core.Content {
	switch c := c.(type) {
	case *mcp.TextContent:
		return core.Text(c.Text)
	case *mcp.ImageContent:
		return core.Image(c.Data, c.MIMEType)
	case *mcp.AudioContent:
		return core.Audio(c.Data, c.MIMEType)
	case *mcp.EmbeddedResource:
		if r := c.Resource; r != nil {
			if r.Blob != nil {
				return core.Content{Type: "resource", URI: r.URI, MimeType: r.MIMEType, Data: r.Blob}
			}
			return core.EmbeddedText(r.URI, r.MIMEType, r.Text)
		}
	case *mcp.ResourceLink:
		return core.Text(c.URI)
	}
	return core.Text("")
}

// readResource relays a read. Text contents go back as they are (several
// are joined by newlines); a binary one goes back as its bytes (a blob).
func (b *Bridge) readResource(ctx context.Context, shared *upstream, uri string) (out any, err error) {
	err = b.via(ctx, shared, func(up *upstream) error {
		out, err = b.readResourceOn(ctx, up, uri)
		return err
	})
	return out, err
}

func (b *Bridge) readResourceOn(ctx context.Context, up *upstream, uri string) (any, error) {
	cctx, stop := up.bind(ctx)
	defer stop()
	params := &mcp.ReadResourceParams{URI: uri}
	if up.modern {
		params.Meta = callerMeta(ctx) // no capabilities: the gateway passes no asks for reads
	}
	res, err := up.cs.ReadResource(cctx, params)
	if err != nil {
		return nil, b.callError(ctx, err)
	}
	if res.NeedsInput() {
		return nil, fmt.Errorf("The MCP server asked the client for input to read %s; the gateway relays input requests for tool calls and prompts only.", uri)
	}
	var parts []string
	for _, c := range res.Contents {
		if c.Blob != nil {
			if len(res.Contents) > 1 {
				return nil, fmt.Errorf("Resource %s has %d contents, one of them binary; the bridge relays a binary resource only alone.", uri, len(res.Contents))
			}
			return c.Blob, nil
		}
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n"), nil
}

// complete relays completion/complete for a prompt argument or a template
// variable.
func (b *Bridge) complete(ctx context.Context, shared *upstream, ref *mcp.CompleteReference, arg, value string, args map[string]string) (out []string, err error) {
	err = b.via(ctx, shared, func(up *upstream) error {
		out, err = b.completeOn(ctx, up, ref, arg, value, args)
		return err
	})
	return out, err
}

func (b *Bridge) completeOn(ctx context.Context, up *upstream, ref *mcp.CompleteReference, arg, value string, args map[string]string) ([]string, error) {
	cctx, stop := up.bind(ctx)
	defer stop()
	p := &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: arg, Value: value}}
	if len(args) > 0 {
		p.Context = &mcp.CompleteContext{Arguments: args}
	}
	res, err := up.cs.Complete(cctx, p)
	if err != nil {
		return nil, b.callError(ctx, err)
	}
	return res.Completion.Values, nil
}

// progressSink is where a call's progress notifications go.
type progressSink struct {
	ctx context.Context
	// cs is the session the call went to: only its requests, log messages
	// and progress belong to the call (a per-person server has a session
	// per person).
	cs     *mcp.ClientSession
	asking bool // waiting for the client's answer to a request of the server's; guarded by b.mu
}

// watchProgress registers a progress token for the call whose handler holds
// ctx; the server's notifications/progress for it become core.Progress
// lines. done forgets the token.
func (b *Bridge) watchProgress(ctx context.Context, cs *mcp.ClientSession) (token string, done func()) {
	b.mu.Lock()
	b.nextTok++
	token = "sfx-" + strconv.FormatUint(b.nextTok, 10)
	b.progress[token] = &progressSink{ctx: ctx, cs: cs}
	b.mu.Unlock()
	return token, func() {
		b.mu.Lock()
		delete(b.progress, token)
		b.mu.Unlock()
	}
}

func (b *Bridge) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p := req.Params
	b.mu.Lock()
	sink := b.progress[fmt.Sprint(p.ProgressToken)]
	b.mu.Unlock()
	if sink != nil && sink.cs == req.Session {
		core.Progress(sink.ctx, progressLine(p))
	}
}

// progressLine words a notifications/progress as one line: the server's
// message, with the figures when it gave a total.
func progressLine(p *mcp.ProgressNotificationParams) string {
	return progressLineOf(p.Progress, p.Total, p.Message)
}

func progressLineOf(progress, total float64, msg string) string {
	num := strconv.FormatFloat(progress, 'f', -1, 64)
	if total > 0 {
		num += "/" + strconv.FormatFloat(total, 'f', -1, 64)
	}
	if msg == "" {
		return num
	}
	return msg + " (" + num + ")"
}

// soleCall returns the context of the one call in flight on session cs:
// a request the server sends the client (elicitation, sampling) or a log
// message belongs to it. With several in flight the bridge cannot tell
// which (a 2025 session does not say), and says so.
// Calls already waiting for the client's answer to an earlier request do
// not count: the server waits for that answer before it asks again.
func (b *Bridge) soleCall(cs *mcp.ClientSession) (context.Context, error) {
	s, err := b.sole(cs)
	if err != nil {
		return nil, err
	}
	return s.ctx, nil
}

func (b *Bridge) sole(cs *mcp.ClientSession) (*progressSink, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var found *progressSink
	n := 0
	for _, s := range b.progress {
		if !s.asking && s.cs == cs {
			found = s
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("the bridge cannot tell which call this request is for: %d calls to the server are in flight", n)
	}
	return found, nil
}

// idle reports whether no call is in flight on session cs.
func (b *Bridge) idle(cs *mcp.ClientSession) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.progress {
		if s.cs == cs {
			return false
		}
	}
	return true
}

// asking marks s as waiting for the client's answer until the returned
// function is called.
func (b *Bridge) asking(s *progressSink) func() {
	b.mu.Lock()
	s.asking = true
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		s.asking = false
		b.mu.Unlock()
	}
}

// onElicit relays the server's elicitation/create to the user of the call
// it belongs to (core.Elicit): the gateway asks the client.
func (b *Bridge) onElicit(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	s, err := b.sole(r.Session)
	if err != nil {
		return nil, err
	}
	defer b.asking(s)()
	cctx := s.ctx
	if r.Params.Mode == "url" {
		return nil, errors.New("the bridge relays form elicitation only, not URL mode")
	}
	res, err := core.Elicit(cctx, r.Params.Message, r.Params.RequestedSchema)
	if err != nil {
		return nil, err
	}
	return &mcp.ElicitResult{Action: res.Action, Content: res.Content}, nil
}

// onSample relays the server's sampling/createMessage to the client of the
// call it belongs to (core.Sample).
func (b *Bridge) onSample(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	s, err := b.sole(r.Session)
	if err != nil {
		return nil, err
	}
	defer b.asking(s)()
	cctx := s.ctx
	p := r.Params
	req := core.SampleRequest{SystemPrompt: p.SystemPrompt, MaxTokens: int(p.MaxTokens), Temperature: p.Temperature,
		StopSequences: p.StopSequences, IncludeContext: p.IncludeContext}
	for _, m := range p.Messages {
		req.Messages = append(req.Messages, core.SamplingMessage{Role: string(m.Role), Content: content(m.Content)})
	}
	req.ModelPreferences = modelPreferences(p.ModelPreferences)
	res, err := core.Sample(cctx, req)
	if err != nil {
		return nil, err
	}
	out := &mcp.CreateMessageResult{Role: mcp.Role(res.Role), Model: res.Model, StopReason: res.StopReason}
	if len(res.Content) > 0 {
		out.Content = mcpContent(res.Content[0])
	}
	return out, nil
}

// mcpContent converts one of core's content parts into MCP's.
func mcpContent(c core.Content) mcp.Content {
	switch c.Type {
	case "image":
		return &mcp.ImageContent{Data: c.Data, MIMEType: c.MimeType}
	case "audio":
		return &mcp.AudioContent{Data: c.Data, MIMEType: c.MimeType}
	}
	return &mcp.TextContent{Text: c.Text}
}

// relayRequests takes the server's elicitation/create and roots/list before
// go-sdk's client does: a form goes to the client of the call it belongs to
// unchecked by go-sdk (onElicit), and roots/list is answered with that
// client's roots (core.Roots), where go-sdk would answer from a fixed list.
func (b *Bridge) relayRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "elicitation/create" {
			// Before go-sdk's own checks of the form, which refuse some the
			// spec allows (legacy enumNames, multi-select arrays): the
			// gateway and the client judge the form.
			if er, ok := req.(*mcp.ElicitRequest); ok {
				return b.onElicit(ctx, er)
			}
		}
		if method != "roots/list" {
			return next(ctx, method, req)
		}
		cs, _ := req.GetSession().(*mcp.ClientSession)
		if b.idle(cs) {
			// Outside any call (many servers ask for roots as they start):
			// no client to ask, and no roots of the bridge's own.
			return &mcp.ListRootsResult{Roots: []*mcp.Root{}}, nil
		}
		s, err := b.sole(cs)
		if err != nil {
			return nil, err
		}
		defer b.asking(s)()
		roots, err := core.Roots(s.ctx)
		if err != nil {
			return nil, err
		}
		out := &mcp.ListRootsResult{Roots: []*mcp.Root{}}
		for _, r := range roots {
			out.Roots = append(out.Roots, &mcp.Root{URI: r.URI, Name: r.Name})
		}
		return out, nil
	}
}
