package core

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitFor bounds every wait in these tests; reaching it is a failure.
const waitFor = 10 * time.Second

// testKey is the agent key the transcript player accepts.
const testKey = "sfx_agent_test"

// logRecorder is a slog.Handler that keeps the lines for tests to wait on.
type logRecorder struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{}
}

func newLogRecorder() *logRecorder { return &logRecorder{changed: make(chan struct{})} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	return nil
}

// waitLine waits for a logged line that contains every one of parts.
func (l *logRecorder) waitLine(t *testing.T, parts ...string) string {
	t.Helper()
	timeout := time.After(waitFor)
	for {
		l.mu.Lock()
		for _, line := range l.lines {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				l.mu.Unlock()
				return line
			}
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("no log line with %q; got:\n%s", parts, strings.Join(l.lines, "\n"))
			return ""
		}
	}
}

// run starts a.Run and stops it when the test ends (or when stop is called),
// failing the test if Run does not return nil.
func run(t *testing.T, a *Agent) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-errc:
				if err != nil {
					t.Errorf("Run returned %v, want nil", err)
				}
			case <-time.After(waitFor):
				t.Errorf("Run did not return after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// discard is a logger for tests that do not read the log.
func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// slogFor is a logger writing to rec.
func slogFor(rec *logRecorder) *slog.Logger { return slog.New(rec) }
