package mcpfront

import (
	"context"
	"log/slog"
)

// sdkLogger is the logger go-sdk's servers and handlers get. go-sdk logs
// every client connection at INFO three or four times ("server connecting",
// "server session connected", "session initialized", "server session
// disconnected"), and a client that simply went away as an ERROR
// ("keepalive ping failed; closing session"). Neither is a fault of the
// gateway. Of those, only "session initialized" stays at INFO, one line per
// session; the rest go to DEBUG. Everything else passes unchanged.
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
}

type sdkHandler struct{ h slog.Handler }

// Enabled asks about the level go-sdk logs at: a record is only ever
// lowered, so one not enabled there is not enabled after either.
func (s sdkHandler) Enabled(ctx context.Context, l slog.Level) bool { return s.h.Enabled(ctx, l) }

func (s sdkHandler) Handle(ctx context.Context, r slog.Record) error {
	if sdkDebug[r.Message] && r.Level > slog.LevelDebug {
		r.Level = slog.LevelDebug // r is a copy; its attributes stay shared and unchanged
	}
	if !s.h.Enabled(ctx, r.Level) {
		return nil
	}
	return s.h.Handle(ctx, r)
}

func (s sdkHandler) WithAttrs(as []slog.Attr) slog.Handler { return sdkHandler{s.h.WithAttrs(as)} }
func (s sdkHandler) WithGroup(name string) slog.Handler    { return sdkHandler{s.h.WithGroup(name)} }
