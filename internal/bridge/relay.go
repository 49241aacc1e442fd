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
func (b *Bridge) callTool(ctx context.Context, up *upstream, name string, args json.RawMessage) (any, error) {
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	tok, done := b.watchProgress(ctx)
	defer done()
	params.SetProgressToken(tok)
	cctx, stop := up.bind(ctx)
	defer stop()
	res, err := up.cs.CallTool(cctx, params)
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
	cs  *mcp.ClientSession
	ctx context.Context
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
	case errors.As(err, &rpc):
		return errors.New(rpc.Message)
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case errors.Is(err, mcp.ErrConnectionClosed) || strings.Contains(err.Error(), "closed"):
		return errors.New(route.MsgDisconnected)
	}
	b.log.Warn("bridge: request to the MCP server failed", "err", err)
	return errors.New(route.MsgDisconnected)
}

func (b *Bridge) getPrompt(ctx context.Context, up *upstream, name string, args map[string]string) (core.PromptResult, error) {
	cctx, stop := up.bind(ctx)
	defer stop()
	res, err := up.cs.GetPrompt(cctx, &mcp.GetPromptParams{Name: name, Arguments: args})
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
func (b *Bridge) readResource(ctx context.Context, up *upstream, uri string) (any, error) {
	cctx, stop := up.bind(ctx)
	defer stop()
	res, err := up.cs.ReadResource(cctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, b.callError(ctx, err)
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
func (b *Bridge) complete(ctx context.Context, up *upstream, ref *mcp.CompleteReference, arg, value string, args map[string]string) ([]string, error) {
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
type progressSink struct{ ctx context.Context }

// watchProgress registers a progress token for the call whose handler holds
// ctx; the server's notifications/progress for it become core.Progress
// lines. done forgets the token.
func (b *Bridge) watchProgress(ctx context.Context) (token string, done func()) {
	b.mu.Lock()
	b.nextTok++
	token = "sfx-" + strconv.FormatUint(b.nextTok, 10)
	b.progress[token] = &progressSink{ctx: ctx}
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
	if sink != nil {
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
