package core

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/agentproto"
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
	g := newFakeGateway(t)
	a, _ := newTestAgent(t, g)
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
	stop := run(t, a)
	conn := g.accept(t)
	id := conn.call(agentproto.KindTool, "finishing", "")
	receive(t, started, "the handler to start")

	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	if m := conn.next(t); m.Type != agentproto.TypeDrain {
		t.Fatalf("first message after stop = %s, want drain", m.Type)
	}
	close(release)
	m, _ := conn.answer(t, id)
	if m.Type != agentproto.TypeResult || !strings.Contains(string(m.Result), "finished") {
		t.Errorf("answer while draining = %s %s %q; want the result, its context alive", m.Type, m.Result, m.Message)
	}
	if err := conn.closed(t); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("the gateway saw %v, want a normal closure", err)
	}
	receive(t, stopped, "Run to return")
	if leaked := leakedGoroutines(2 * time.Second); leaked != "" {
		t.Errorf("goroutines left after Run returned:\n%s", leaked)
	}
}

func TestStopCancelsCallsAfterDrainTimeout(t *testing.T) {
	old := drainTimeout
	drainTimeout = 200 * time.Millisecond
	t.Cleanup(func() { drainTimeout = old })
	g := newFakeGateway(t)
	a, _ := newTestAgent(t, g)
	started, reports := blockingTool(t, a, "wait")
	returned, slowStarted := make(chan struct{}), make(chan struct{})
	must(t, AddTool(a, "slow_to_stop", "d", func(ctx context.Context, _ emptyIn) (string, error) {
		close(slowStarted)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // cleaning up; Run waits for it
		close(returned)
		return "", nil
	}))
	stop := run(t, a)
	conn := g.accept(t)
	conn.call(agentproto.KindTool, "wait", "")
	conn.call(agentproto.KindTool, "slow_to_stop", "")
	receive(t, started, "the handler to start")
	receive(t, slowStarted, "the slow handler to start")

	stop() // cancels Run's context and checks that Run returns nil
	select {
	case <-returned:
	default:
		t.Error("Run returned before a running handler did")
	}
	r := receive(t, reports, "the handler's context to end")
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("handler ctx.Err() = %v, want context.Canceled", r.err)
	}
	if err := conn.closed(t); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("the gateway saw %v, want a normal closure", err)
	}
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
	g := newFakeGateway(t)
	g.refuse = func(n int) (int, string) {
		switch n {
		case 1:
			return http.StatusBadRequest, `Invalid tool name "x".`
		case 2:
			return http.StatusServiceUnavailable, "Starting up."
		}
		return 0, ""
	}
	a, rec := newTestAgent(t, g)
	must(t, AddTool(a, "get_order", "d", func(context.Context, getOrderInput) (string, error) { return "ok", nil }))
	run(t, a)
	conn := g.accept(t)

	rec.waitLine(t, "ERROR core: the gateway refused the agent; retrying",
		`err=register: 400 Bad Request: Invalid tool name "x".`, "attempt=1")
	rec.waitLine(t, "WARN core: cannot connect to the gateway; retrying",
		"err=register: 503 Service Unavailable: Starting up.", "attempt=2")
	if n := len(g.registrations()); n != 3 {
		t.Errorf("%d registrations, want 3", n)
	}
	if m, _ := conn.answer(t, conn.call(agentproto.KindTool, "get_order", `{"id":"1"}`)); m.Type != agentproto.TypeResult {
		t.Errorf("answer after the retries = %+v", m)
	}
}

func TestReconnectCancelsHandlers(t *testing.T) {
	g := newFakeGateway(t)
	a, rec := newTestAgent(t, g)
	f := watchFinished(a)
	started, reports := blockingTool(t, a, "wait")
	run(t, a)
	conn := g.accept(t)
	id := conn.call(agentproto.KindTool, "wait", "")
	receive(t, started, "the handler to start")

	conn.drop()
	r := receive(t, reports, "the handler's context to end")
	if !errors.Is(r.err, context.Canceled) || !errors.Is(r.cause, errDisconnected) {
		t.Errorf("handler saw %v (cause %v), want a cancel because the connection ended", r.err, r.cause)
	}
	if f.wait(t, id) {
		t.Error("an answer was sent on a dropped connection")
	}
	conn = g.accept(t)
	rec.waitLine(t, "WARN core: lost the connection to the gateway; reconnecting", "attempt=1")
	if n := len(g.registrations()); n != 2 {
		t.Errorf("%d registrations, want 2 (one per connection)", n)
	}
	id = conn.call(agentproto.KindTool, "wait", "")
	receive(t, started, "a handler on the new connection")
	conn.send(agentproto.Message{Type: agentproto.TypeCancel, ID: id, Reason: agentproto.ReasonCancelled})
	receive(t, reports, "the new handler's cancel")
}

func TestGoodbye(t *testing.T) {
	g := newFakeGateway(t)
	a, rec := newTestAgent(t, g)
	run(t, a)
	conn := g.accept(t)
	conn.send(agentproto.Message{Type: agentproto.TypeGoodbye, Message: "The gateway is restarting."})
	conn.ws.Close(websocket.StatusGoingAway, "shutdown")
	rec.waitLine(t, "INFO core: the gateway is going away; reconnecting",
		"err=the gateway said goodbye: The gateway is restarting.")
	g.accept(t)
}

func TestHeartbeat(t *testing.T) {
	t.Run("a silent gateway is dropped", func(t *testing.T) {
		g := newFakeGateway(t)
		g.heartbeatMs = 50
		g.silent = true // reads nothing, so it answers no ping
		a, rec := newTestAgent(t, g)
		run(t, a)
		g.accept(t)
		rec.waitLine(t, "lost the connection", "err=no pong from the gateway within 50ms")
		g.accept(t)
	})
	t.Run("pongs keep the connection", func(t *testing.T) {
		g := newFakeGateway(t)
		g.heartbeatMs = 20
		a, _ := newTestAgent(t, g)
		must(t, AddTool(a, "linger", "d", func(ctx context.Context, _ emptyIn) (string, error) {
			select { // long enough for several pings
			case <-time.After(300 * time.Millisecond):
				return "still here", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}))
		run(t, a)
		conn := g.accept(t)
		m, _ := conn.answer(t, conn.call(agentproto.KindTool, "linger", ""))
		if diff := cmp.Diff(`{"content":[{"type":"text","text":"still here"}]}`, string(m.Result)); diff != "" {
			t.Errorf("result mismatch (-want +got):\n%s", diff)
		}
		if n := len(g.registrations()); n != 1 {
			t.Errorf("%d registrations, want 1: the connection was dropped", n)
		}
	})
}

func TestWrongKeyIsLoggedAndRetried(t *testing.T) {
	g := newFakeGateway(t)
	rec := newLogRecorder()
	a, err := New(Options{APIKey: "sfx_wrong", URL: g.srv.URL, Logger: slogFor(rec)})
	must(t, err)
	run(t, a)
	rec.waitLine(t, "ERROR core: the gateway refused the agent", "err=register: 401 Unauthorized: Unknown agent key.", "attempt=1")
	rec.waitLine(t, "attempt=2")
}
