package core

import (
	"context"
	"encoding/json"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

// LogLevel is the severity of a log message for the client, as MCP (and
// RFC 5424) name them.
type LogLevel string

// The log levels, least severe first.
const (
	LogDebug     LogLevel = "debug"
	LogInfo      LogLevel = "info"
	LogNotice    LogLevel = "notice"
	LogWarning   LogLevel = "warning"
	LogError     LogLevel = "error"
	LogCritical  LogLevel = "critical"
	LogAlert     LogLevel = "alert"
	LogEmergency LogLevel = "emergency"
)

// Log sends a log message to the MCP client of the call the handler
// holding ctx serves (MCP notifications/message, with the agent's Name as
// the logger). data is anything that marshals to JSON: a string, a map.
// The client gets it only at or above the level it asked for (MCP
// logging/setLevel, or a 2026-07-28 request's logLevel); a client that
// asked for none gets nothing. Messages whose data is over 16 KiB, or that
// come faster than the gateway passes them on, are dropped. Log never
// blocks the handler for long and returns nothing: logs are best effort.
//
// The logs of the agent's own process are another matter: use
// [Options.Logger] for those.
func Log(ctx context.Context, level LogLevel, data any) {
	c, ok := ctx.Value(callKey{}).(*call)
	if !ok {
		return
	}
	raw, err := json.Marshal(data)
	if err != nil || len(raw) > agentproto.MaxLogBytes {
		c.sess.a.log.Warn("core: a log message for the client was dropped", "tool", c.info.Tool, "bytes", len(raw), "err", err)
		return
	}
	c.sess.send(agentproto.Message{Type: agentproto.TypeLog, ID: c.info.ID, Level: string(level), Logger: c.sess.a.opts.Name, Data: raw})
}
