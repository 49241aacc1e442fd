//lint:file-ignore SA1019 logging is deprecated in 2026-07-28 (SEP-2577) but still part of every protocol version the gateway serves; agents may use it
package pipeline

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/route"
)

// waitOn waits for the call's next event, passing its progress lines and
// log messages to the client of req.
func waitOn(ctx context.Context, req *Request, call *route.Call) route.Result {
	call.OnLog = logSender(ctx, req)
	return call.Wait(ctx, progressSender(ctx, req, call.ProgressSent()))
}

// logSender passes an agent's log messages (core.Log) to the client as
// notifications/message. go-sdk applies the level the client asked for:
// logging/setLevel on a session, the request's _meta logLevel on
// 2026-07-28; without either nothing is sent, as the spec has it.
func logSender(ctx context.Context, req *Request) func(agentproto.Message) {
	var send func(p *mcp.LoggingMessageParams)
	switch ns := streamOf(ctx); {
	case ns != nil:
		// A call answered before go-sdk (mcpfront/early.go): its own stream, at the
		// level the client asked for.
		if ns.LogLevel == "" {
			return nil
		}
		send = func(p *mcp.LoggingMessageParams) {
			if levelAtLeast(p.Level, mcp.LoggingLevel(ns.LogLevel)) {
				ns.Notify("notifications/message", p)
			}
		}
	case req.Session != nil:
		send = func(p *mcp.LoggingMessageParams) { req.Session.Log(ctx, p) }
	default:
		return nil
	}
	return func(m agentproto.Message) {
		var data any = json.RawMessage(m.Data)
		if len(m.Data) == 0 {
			data = nil
		}
		send(&mcp.LoggingMessageParams{Level: mcp.LoggingLevel(m.Level), Logger: m.Logger, Data: data})
	}
}

// levelAtLeast reports whether a message at level l goes to a client that
// asked for min, as go-sdk's ServerSession.Log decides: by severity, an
// unknown level counting as debug.
func levelAtLeast(l, min mcp.LoggingLevel) bool {
	return severity(l) >= severity(min)
}

func severity(l mcp.LoggingLevel) slog.Level {
	switch l {
	case "info":
		return mcp.LevelInfo
	case "notice":
		return mcp.LevelNotice
	case "warning":
		return mcp.LevelWarning
	case "error":
		return mcp.LevelError
	case "critical":
		return mcp.LevelCritical
	case "alert":
		return mcp.LevelAlert
	case "emergency":
		return mcp.LevelEmergency
	}
	return mcp.LevelDebug
}
