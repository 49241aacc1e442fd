package mcpfront

import (
	"context"
	"log/slog"
	"strings"
)

// sdkLogger is the logger go-sdk's servers and handlers get. go-sdk logs
// every client connection at INFO three or four times ("server connecting",
// "server session connected", "session initialized", "server session
// disconnected"), a client that simply went away as an ERROR ("keepalive
// ping failed; closing session"), a notification a session without a GET
// stream could not take as a WARN ("calling notifications/tools/list_changed:
// rejected by transport", one per session and change), and a client that
// breaks the protocol's order or rules as an ERROR ("duplicate initialize
// request", "method invalid during initialization"). None is a fault of the
// gateway: ERROR is kept for those. Of those, only "session initialized"
// stays at INFO, one line per session; the rest go to DEBUG. Everything
// else passes unchanged.
func sdkLogger(base *slog.Logger) *slog.Logger {
	return slog.New(sdkHandler{base.Handler()})
}

// sdkDebug are the go-sdk messages logged at DEBUG instead of their level.
var sdkDebug = map[string]bool{
	"server connecting":                                 true,
	"server session connected":                          true,
	"server session disconnected":                       true,
	"server run start":                                  true,
	"server session ended":                              true,
	"keepalive ping failed; closing session":            true,
	"keepalive ping failed; tolerating below threshold": true,
	// A client's mistakes, answered with a JSON-RPC error that says so.
	"initialized before initialize":        true,
	"duplicate initialized notification":   true,
	"duplicate initialize request":         true,
	"method invalid during initialization": true,
	"method removed in the new protocol":   true,
}

// sdkDebugPrefixes start the go-sdk messages, worded per case, logged at
// DEBUG instead of their level: a notification a client's session could
// not take (it has no GET stream, or it closed), and a request of a
// protocol version the endpoint does not serve.
var sdkDebugPrefixes = []string{
	"calling notifications/",
	"rejecting request with protocol version ",
}

// sdkQuiet reports whether go-sdk's message msg goes to DEBUG.
func sdkQuiet(msg string) bool {
	if sdkDebug[msg] {
		return true
	}
	for _, p := range sdkDebugPrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

type sdkHandler struct{ h slog.Handler }

// Enabled asks about the level go-sdk logs at: a record is only ever
// lowered, so one not enabled there is not enabled after either.
func (s sdkHandler) Enabled(ctx context.Context, l slog.Level) bool { return s.h.Enabled(ctx, l) }

func (s sdkHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level > slog.LevelDebug && sdkQuiet(r.Message) {
		r.Level = slog.LevelDebug // r is a copy; its attributes stay shared and unchanged
	}
	if !s.h.Enabled(ctx, r.Level) {
		return nil
	}
	return s.h.Handle(ctx, r)
}

func (s sdkHandler) WithAttrs(as []slog.Attr) slog.Handler { return sdkHandler{s.h.WithAttrs(as)} }
func (s sdkHandler) WithGroup(name string) slog.Handler    { return sdkHandler{s.h.WithGroup(name)} }
