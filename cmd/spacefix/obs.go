package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spacefix/spacefix/internal/gateway"
)

// obsFlags adds serve's observability flags (docs/operations.md) to fs and
// returns the function that makes the logger they ask for, once fs is
// parsed.
func obsFlags(fs *flag.FlagSet, cfg *gateway.Config) func(w io.Writer) (*slog.Logger, error) {
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", os.Getenv("SPACEFIX_METRICS_ADDR"),
		"also serve /metrics without authentication on this `address`, for example 127.0.0.1:9090 (env SPACEFIX_METRICS_ADDR)")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve /debug/pprof/ to admin API tokens")
	format := fs.String("log-format", envOr("SPACEFIX_LOG_FORMAT", "text"), "log `format`: text or json (env SPACEFIX_LOG_FORMAT)")
	return func(w io.Writer) (*slog.Logger, error) { return newLogger(*format, w) }
}

// newLogger returns the operator log in the format asked for.
func newLogger(format string, w io.Writer) (*slog.Logger, error) {
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, usageError{fmt.Sprintf("serve: --log-format %q: want text or json", format)}
}
