package mcpfront

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"testing"
)

// What go-sdk logs when a client goes away without a word is not a fault:
// it reaches the gateway's log at DEBUG, not ERROR; go-sdk's own faults
// keep their level.
func TestFirstHourSDKLogLevels(t *testing.T) {
	for _, c := range []struct {
		level slog.Level
		msg   string
		want  string // "" : not logged at INFO
	}{
		{slog.LevelError, "keepalive ping failed; closing session", ""},
		{slog.LevelWarn, "keepalive ping failed; tolerating below threshold", ""},
		{slog.LevelInfo, "server connecting", ""},
		{slog.LevelInfo, "server session connected", ""},
		{slog.LevelInfo, "server session disconnected", ""},
		{slog.LevelWarn, "calling notifications/tools/list_changed: rejected by transport: undelivered message: stream not connected or already closed", ""},
		{slog.LevelWarn, "calling notifications/resources/updated: session is closed", ""},
		{slog.LevelWarn, `rejecting request with protocol version "2026-07-28": this server is stateful; set StreamableHTTPOptions.Stateless = true to accept it`, ""},
		{slog.LevelError, "duplicate initialize request", ""},
		{slog.LevelError, "duplicate initialized notification", ""},
		{slog.LevelError, "initialized before initialize", ""},
		{slog.LevelError, "method invalid during initialization", ""},
		{slog.LevelError, "method removed in the new protocol", ""},
		{slog.LevelInfo, "session initialized", `level=INFO msg="session initialized"`},
		{slog.LevelError, "jsonrpc2 internal error", `level=ERROR msg="jsonrpc2 internal error"`},
		{slog.LevelError, "server connect error", `level=ERROR msg="server connect error"`},
	} {
		for _, base := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
			var buf bytes.Buffer
			log := sdkLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: base})))
			log.Log(t.Context(), c.level, c.msg, "session_id", "S1")
			got := buf.String()
			want := c.want
			if want == "" && base == slog.LevelDebug {
				want = "level=DEBUG msg=" + strconv.Quote(c.msg) + " session_id=S1"
			}
			if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
				t.Errorf("%v %q with the log at %v: got %q, want %q", c.level, c.msg, base, got, want)
			}
		}
	}
}
