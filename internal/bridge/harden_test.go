package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A failed request's error names the URL with its path and query, where
// remote servers keep tokens; every error the bridge logs or returns shows
// scheme://host/… instead, and still wraps what callers test for.
func TestRedactErr(t *testing.T) {
	inner := &url.Error{Op: "Post", URL: "https://mcp.example.com/mcp/PATHSECRET/x?token=QSECRET", Err: errors.New("connection refused")}
	err := redactErr(fmt.Errorf("connect to x: %w: %w", ErrSignIn, inner))
	want := `connect to x: sign-in needed: Post "https://mcp.example.com/…": connection refused`
	if err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if !errors.Is(err, ErrSignIn) {
		t.Errorf("the redacted error no longer wraps ErrSignIn")
	}
	if redactErr(nil) != nil || redactErr(err) != err {
		t.Errorf("redactErr wraps nil or twice")
	}

	var buf bytes.Buffer
	log := slog.New(redactingHandler{slog.NewTextHandler(&buf, nil)}).With("url", "http://127.0.0.1:1/mcp/PATHSECRET")
	log.Warn("failed POST to http://127.0.0.1:1/p/PATHSECRET?token=QSECRET", "err", inner, "group", slog.GroupValue(slog.String("u", "https://h/QSECRET")))
	if out := buf.String(); strings.Contains(out, "SECRET") || !strings.Contains(out, "http://127.0.0.1:1/…") {
		t.Errorf("go-sdk's log shows a secret: %s", out)
	}
}

// A child gets the small default environment and what its config's env
// names: never the bridge's agent key or the shell's other secrets.
func TestChildEnv(t *testing.T) {
	environ := []string{"PATH=/usr/bin", "HOME=/home/ada", "SPACEFIX_API_KEY=sfx_agent_x", "SPACEFIX_TOKEN=t",
		"AWS_SECRET_ACCESS_KEY=a", "LANG=C.UTF-8", "TERM=xterm", "SHELL=() { :; }; echo pwned", "X=from-shell"}
	got := childEnv("linux", environ, map[string]string{"X": "from-config", "API_TOKEN": "tok", "HOME": "/srv"})
	want := []string{"PATH=/usr/bin", "LANG=C.UTF-8", "TERM=xterm", "API_TOKEN=tok", "HOME=/srv", "X=from-config"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("child env (-want +got):\n%s", d)
	}
	// Windows names compare without case.
	got = childEnv("windows", []string{"Path=C:\\bin", "SystemRoot=C:\\Windows", "SPACEFIX_API_KEY=x"}, nil)
	if d := cmp.Diff([]string{"Path=C:\\bin", "SystemRoot=C:\\Windows"}, got); d != "" {
		t.Errorf("windows child env (-want +got):\n%s", d)
	}
	// Empty, not nil: a nil Env would make exec inherit everything.
	if got := childEnv("linux", []string{"SECRET=x"}, nil); got == nil || len(got) != 0 {
		t.Errorf("childEnv = %#v, want an empty slice", got)
	}
}

// A child flooding stderr with short lines is read in linear time, and
// logged within the rate: the burst, then one line counting the rest.
func TestLogLinesFlood(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	lim := newLogLimiter(log, "fx's stderr")
	now := time.Unix(0, 0)
	lim.now, lim.last, lim.delay = func() time.Time { return now }, now, time.Hour // the count comes at close
	const lines = 2_000_000                                                        // 16 MB of short lines
	flood := bytes.Repeat([]byte("flood\r\n"), lines)
	start := time.Now()
	logLines(bytes.NewReader(append(flood, []byte(strings.Repeat("x", 10_000)+"\nlast")...)), log, lim)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("reading %d lines took %v", lines, d)
	}
	out := buf.String()
	if n := strings.Count(out, `msg="bridge: server stderr" line=flood`); n != logBurst {
		t.Errorf("%d flood lines logged, want the burst of %d", n, logBurst)
	}
	want := fmt.Sprintf(`msg="bridge: dropped %d lines from fx's stderr: it writes faster than the bridge logs (%d lines a second)" dropped=%d`,
		lines-logBurst+4, logRate, lines-logBurst+4) // and the long line's three pieces, and "last"
	if !strings.Contains(out, want) {
		t.Errorf("log has no %q:\n%s", want, out[len(out)-300:])
	}
	if n := strings.Count(out, "\n"); n != logBurst+1 {
		t.Errorf("%d log lines, want %d", n, logBurst+1)
	}
}

// After the burst the bucket refills at logRate; the count of what was
// dropped comes once, before the next lines.
func TestLogLimiterRefills(t *testing.T) {
	var buf bytes.Buffer
	lim := newLogLimiter(slog.New(slog.NewTextHandler(&buf, nil)), "fx's log messages")
	now := time.Unix(0, 0)
	lim.now, lim.last = func() time.Time { return now }, now
	allowed := 0
	for range logBurst + 10 {
		if lim.allow() {
			allowed++
		}
	}
	now = now.Add(time.Second)
	for range logRate + 10 {
		if lim.allow() {
			allowed++
		}
	}
	lim.close()
	if allowed != logBurst+logRate {
		t.Errorf("%d allowed, want %d", allowed, logBurst+logRate)
	}
	if !strings.Contains(buf.String(), "dropped 20 lines from fx's log messages") {
		t.Errorf("log = %s", buf.String())
	}
}

// A line over maxStderrLine is logged in pieces, not buffered whole.
func TestLogLinesLong(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	logLines(strings.NewReader(strings.Repeat("y", 3*maxStderrLine)+"\nend\n"), log, newLogLimiter(log, "s"))
	if n := strings.Count(buf.String(), "server stderr"); n != 4 {
		t.Errorf("%d records, want 3 pieces and the next line:\n%s", n, buf.String())
	}
}
