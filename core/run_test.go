package core

import (
	"context"
	"errors"
	"net"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(5 * time.Second); leaked != "" {
			os.Stderr.WriteString("goroutines left running after the tests:\n" + leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// ourCreator matches the "created by" part of a goroutine's stack when
// core's own code or the WebSocket library started it.
var ourCreator = regexp.MustCompile(`created by (github\.com/coder/websocket\.\S+|\S+)[^\n]*\n\s+(\S+\.go):\d+`)

// leakedGoroutines waits up to d for every goroutine started by core or by
// the WebSocket library to end, and returns the stacks of those that did
// not.
func leakedGoroutines(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			m := ourCreator.FindStringSubmatch(g)
			if m == nil {
				continue
			}
			file := m[2]
			inCore := strings.Contains(file, "/core/") && !strings.HasSuffix(file, "_test.go")
			if inCore || strings.HasPrefix(m[1], "github.com/coder/websocket") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		attempt int
		rnd     float64
		want    time.Duration
	}{
		{0, 0.5, 250 * time.Millisecond},
		{0, 0, 200 * time.Millisecond},
		{0, 1, 300 * time.Millisecond},
		{1, 0.5, 500 * time.Millisecond},
		{6, 0.5, 16 * time.Second},
		{7, 0.5, 30 * time.Second},
		{7, 0, 24 * time.Second},
		{7, 1, 36 * time.Second},
		{1000, 0.5, 30 * time.Second},
	}
	for _, tt := range tests {
		if got := backoff(tt.attempt, func() float64 { return tt.rnd }); got != tt.want {
			t.Errorf("backoff(%d, %v) = %v, want %v", tt.attempt, tt.rnd, got, tt.want)
		}
	}
}

func TestStopDrainsRunningCalls(t *testing.T) {
	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
	release := make(chan struct{})
	started := make(chan struct{})
	must(t, AddTool(a, "finishing", "d", func(ctx context.Context, _ emptyIn) (string, error) {
		close(started)
		<-release
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "finished", nil
	}))
	stopped := make(chan struct{})
	// The result comes while draining, its context alive; then the agent
	// closes the connection normally.
	p.play(a, script(t, connected+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"finishing","args":{}}
-- do --
stopWhenStarted
-- agent --
{"type":"drain"}
-- do --
release
-- agent --
{"type":"result","id":"c-1","result":{"content":[{"type":"text","text":"finished"}]}}
-- closed --
-- do --
stopped
`), actions{
		"stopWhenStarted": func(string) {
			receive(t, started, "the handler to start")
			go func() { p.stop(); close(stopped) }()
		},
		"release": func(string) { close(release) },
		"stopped": func(string) {
			receive(t, stopped, "Run to return")
			if leaked := leakedGoroutines(2 * time.Second); leaked != "" {
				t.Errorf("goroutines left after Run returned:\n%s", leaked)
			}
		},
	})
}

func TestStopCancelsCallsAfterDrainTimeout(t *testing.T) {
	old := drainTimeout
	drainTimeout = 200 * time.Millisecond
	t.Cleanup(func() { drainTimeout = old })
	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
	started, reports := blockingTool(t, a, "wait")
	returned, slowStarted := make(chan struct{}), make(chan struct{})
	must(t, AddTool(a, "slow_to_stop", "d", func(ctx context.Context, _ emptyIn) (string, error) {
		close(slowStarted)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // cleaning up; Run waits for it
		close(returned)
		return "", nil
	}))
	p.play(a, script(t, connected+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"wait","args":{}}
-- gateway --
{"type":"call","id":"c-2","kind":"tool","name":"slow_to_stop","args":{}}
-- do --
stopWhenStarted
-- agent --
{"type":"drain"}
-- closed --
`), actions{"stopWhenStarted": func(string) {
		receive(t, started, "the handler to start")
		receive(t, slowStarted, "the slow handler to start")
		p.stop() // cancels Run's context and checks that Run returns nil
		select {
		case <-returned:
		default:
			t.Error("Run returned before a running handler did")
		}
		r := receive(t, reports, "the handler's context to end")
		if !errors.Is(r.err, context.Canceled) {
			t.Errorf("handler ctx.Err() = %v, want context.Canceled", r.err)
		}
	}})
	if leaked := leakedGoroutines(2 * time.Second); leaked != "" {
		t.Errorf("goroutines left after Run returned:\n%s", leaked)
	}
}

func TestRunWithoutGateway(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := l.Addr().String()
	l.Close()
	rec := newLogRecorder()
	a, err := New(Options{APIKey: testKey, URL: "http://" + addr, Logger: slogFor(rec)})
	must(t, err)
	stop := run(t, a)
	rec.waitLine(t, "WARN core: cannot connect to the gateway; retrying", "connection refused", "attempt=1")
	rec.waitLine(t, "attempt=2")
	stop()
}

func TestRefusedRegistrationIsRetried(t *testing.T) {
	p := newPlayer(t)
	a, rec := newTestAgent(t, p)
	must(t, AddTool(a, "get_order", "d", func(context.Context, getOrderInput) (string, error) { return "ok", nil }))
	p.play(a, script(t, `
-- refuse --
400 Invalid tool name "x".
-- do --
log ERROR core: the gateway refused the agent; retrying | err=register: 400 Bad Request: Invalid tool name "x". | attempt=1
-- refuse --
503 Starting up.
-- do --
log WARN core: cannot connect to the gateway; retrying | err=register: 503 Service Unavailable: Starting up. | attempt=2
`+connected+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"get_order","args":{"id":"1"}}
-- agent --
{"type":"result","id":"c-1"}
`), logAction(t, rec))
	if n := len(p.registrations()); n != 3 {
		t.Errorf("%d registrations, want 3", n)
	}
}

// logAction is the "log" action: wait for a line of rec that contains every
// part of the argument, parts separated by " | ".
func logAction(t *testing.T, rec *logRecorder) actions {
	return actions{"log": func(arg string) { rec.waitLine(t, strings.Split(arg, " | ")...) }}
}

func TestReconnectCancelsHandlers(t *testing.T) {
	p := newPlayer(t)
	a, rec := newTestAgent(t, p)
	f := watchFinished(a)
	started, reports := blockingTool(t, a, "wait")
	acts := logAction(t, rec)
	acts["started"] = func(string) { receive(t, started, "the handler to start") }
	acts["disconnected"] = func(id string) {
		r := receive(t, reports, "the handler's context to end")
		if !errors.Is(r.err, context.Canceled) || !errors.Is(r.cause, errDisconnected) {
			t.Errorf("handler saw %v (cause %v), want a cancel because the connection ended", r.err, r.cause)
		}
		if f.wait(t, id) {
			t.Error("an answer was sent on a dropped connection")
		}
	}
	acts["cancelled"] = func(string) { receive(t, reports, "the new handler's cancel") }
	p.play(a, script(t, connected+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"wait","args":{}}
-- do --
started
-- drop --
-- do --
disconnected c-1
-- register --
{"protocol":1}
-- gateway --
`+welcome("r-2", 5000)+`
-- do --
log WARN core: lost the connection to the gateway; reconnecting | attempt=1
-- gateway --
{"type":"call","id":"c-2","kind":"tool","name":"wait","args":{}}
-- do --
started
-- gateway --
{"type":"cancel","id":"c-2","reason":"cancelled"}
-- do --
cancelled
`), acts)
	if n := len(p.registrations()); n != 2 {
		t.Errorf("%d registrations, want 2 (one per connection)", n)
	}
}

func TestGoodbye(t *testing.T) {
	p := newPlayer(t)
	a, rec := newTestAgent(t, p)
	p.play(a, script(t, connected+`
-- gateway --
{"type":"goodbye","message":"The gateway is restarting."}
-- do --
log INFO core: the gateway is going away; reconnecting | err=the gateway said goodbye: The gateway is restarting.
-- register --
{"protocol":1}
`), logAction(t, rec))
}

func TestHeartbeat(t *testing.T) {
	t.Run("a silent gateway is dropped", func(t *testing.T) {
		p := newPlayer(t)
		a, rec := newTestAgent(t, p)
		p.play(a, script(t, `
-- register --
{"protocol":1}
-- deaf --
-- gateway --
`+welcome("r-1", 50)+`
-- do --
log lost the connection | err=no pong from the gateway within 50ms
-- register --
{"protocol":1}
`), logAction(t, rec))
	})
	t.Run("pongs keep the connection", func(t *testing.T) {
		p := newPlayer(t)
		a, _ := newTestAgent(t, p)
		must(t, AddTool(a, "linger", "d", func(ctx context.Context, _ emptyIn) (string, error) {
			select { // long enough for several pings
			case <-time.After(300 * time.Millisecond):
				return "still here", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}))
		p.play(a, script(t, `
-- register --
{"protocol":1}
-- gateway --
`+welcome("r-1", 20)+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"linger","args":{}}
-- agent --
{"type":"result","id":"c-1","result":{"content":[{"type":"text","text":"still here"}]}}
`), nil)
		if n := len(p.registrations()); n != 1 {
			t.Errorf("%d registrations, want 1: the connection was dropped", n)
		}
	})
}

func TestWrongKeyIsLoggedAndRetried(t *testing.T) {
	p := newPlayer(t)
	rec := newLogRecorder()
	a, err := New(Options{APIKey: "sfx_wrong", URL: p.url(), Logger: slogFor(rec)})
	must(t, err)
	run(t, a)
	rec.waitLine(t, "ERROR core: the gateway refused the agent", "err=register: 401 Unauthorized: Unknown agent key.", "attempt=1")
	rec.waitLine(t, "attempt=2")
}
