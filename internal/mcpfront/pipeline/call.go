package pipeline

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/recovery"
	"github.com/spacefix/spacefix/internal/route"
)

// Messages a model reads.
const (
	msgDisconnected = route.MsgDisconnected
	msgShutdown     = "The gateway is shutting down and stopped this call. Try again in a moment."
)

// shareResult returns a copy of r that go-sdk may write into (it adds to
// _meta) while r stays as it was: a cached result is decoded once and
// every hit gets such a copy, its content shared and never modified.
func shareResult(r *mcp.CallToolResult) *mcp.CallToolResult {
	c := *r
	c.Meta = maps.Clone(r.Meta)
	return &c
}

// progressSender passes progress lines to the client when it asked for them
// with a progress token: through the request's session, or, for a call
// answered before go-sdk, onto its answer's stream ([Stream]).
// Progress is best effort: a line the client cannot take is dropped, and
// the call goes on.
// Lines are numbered on from sent, the lines the call passed on before.
func progressSender(ctx context.Context, req *Request, sent int) func(string) {
	token := req.progressToken()
	if token == nil {
		return nil
	}
	var send func(p *mcp.ProgressNotificationParams)
	switch ns := streamOf(ctx); {
	case ns != nil:
		send = func(p *mcp.ProgressNotificationParams) { ns.Notify("notifications/progress", p) }
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

// DecodeResult reads an agent's CallToolResult. Results made only of plain
// text parts, the common case, are read with encoding/json into the MCP
// types directly; anything else goes through go-sdk's own decoding.
func DecodeResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
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

func ErrorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

func FirstText(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}

// Stream is, for a call answered on its own response stream (the early
// path's), where the request's notifications go (progressSender,
// logSender): the stream, and log messages from the level the client asked
// for ("": none).
type Stream struct {
	Notify   func(method string, params any)
	LogLevel string
}

// streamOf returns where the notifications of the call ctx carries go
// when it is answered on its own stream, or nil.
func streamOf(ctx context.Context) *Stream {
	if c := toolCallFrom(ctx); c != nil {
		return c.sink
	}
	return nil
}

// Recovered, deferred, recovers a panic in MCP method method and sets the
// answer the client gets instead.
func Recovered(log *slog.Logger, method string, answer func(mcp.Result, error)) {
	v := recover()
	if v == nil {
		return
	}
	recovery.Log(log, "mcp "+method, v)
	if method == "tools/call" {
		answer(ErrorResult(recovery.Message), nil)
		return
	}
	answer(nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: recovery.Message})
}
