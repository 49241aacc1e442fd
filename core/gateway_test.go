package core

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/internal/agentfront"
	"github.com/spacefix/spacefix/internal/agentproto"
)

// This file is test scaffolding: a small fake gateway that speaks the agent
// side's counterpart of docs/agent-protocol.md, so core can be tested while
// the real gateway is written. End-to-end tests against the real gateway
// live with it.

// waitFor bounds every wait in these tests; reaching it is a failure.
const waitFor = 10 * time.Second

const testKey = "sfx_agent_test"

type fakeGateway struct {
	t   *testing.T
	srv *httptest.Server

	// heartbeatMs goes in the welcome; set before the agent connects.
	heartbeatMs int
	// refuse, when set, answers registration number n (from 1) with a
	// status and text instead of a ticket when it returns a status.
	refuse func(n int) (status int, text string)
	// silent connections stop reading after the welcome (no pongs).
	silent bool

	mu      sync.Mutex
	regs    []json.RawMessage
	tickets map[string]bool
	closed  chan struct{}

	conns chan *fakeConn
}

// fakeConn is the gateway's end of one agent connection.
type fakeConn struct {
	t    *testing.T
	ws   *websocket.Conn
	msgs chan agentproto.Message // from the agent
	done chan struct{}           // closed when the agent's side is gone

	closeErr error // why reading ended; set before done is closed
}

func newFakeGateway(t *testing.T) *fakeGateway {
	t.Helper()
	g := &fakeGateway{
		t:           t,
		heartbeatMs: 5000,
		tickets:     map[string]bool{},
		closed:      make(chan struct{}),
		conns:       make(chan *fakeConn, 16),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+agentproto.RegisterPath, g.register)
	mux.HandleFunc("GET "+agentproto.ConnectPath, g.connect)
	g.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(g.closed)
		g.srv.CloseClientConnections()
		g.srv.Close()
	})
	return g
}

func (g *fakeGateway) register(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+testKey {
		http.Error(w, "Unknown agent key.", http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var reg agentproto.Registration
	if err := json.Unmarshal(body, &reg); err != nil {
		http.Error(w, "Registration is not JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	g.regs = append(g.regs, body)
	n := len(g.regs)
	ticket := fmt.Sprintf("t-%d", n)
	g.tickets[ticket] = true
	refuse := g.refuse
	g.mu.Unlock()
	if _, err := agentfront.Check(&reg, agentfront.DefaultLimits()); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if refuse != nil {
		if status, text := refuse(n); status != 0 {
			http.Error(w, text, status)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(agentproto.Ticket{Ticket: ticket, ExpiresInMs: 30000})
}

func (g *fakeGateway) connect(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	g.mu.Lock()
	ok := g.tickets[ticket]
	delete(g.tickets, ticket)
	g.mu.Unlock()
	if !ok || r.Header.Get("Authorization") != "Bearer "+testKey {
		http.Error(w, "Unknown or used ticket.", http.StatusUnauthorized)
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(agentproto.MaxFrameBytes)
	c := &fakeConn{t: g.t, ws: ws, msgs: make(chan agentproto.Message, 256), done: make(chan struct{})}
	defer close(c.done)
	defer ws.CloseNow()
	c.send(agentproto.Message{Type: agentproto.TypeWelcome, Welcome: &agentproto.Welcome{
		Protocol: agentproto.Version, Replica: "r-" + ticket, Project: "p-test", Agent: "key-test",
		CallWaitMs: 30000, HeartbeatMs: g.heartbeatMs,
	}})
	g.conns <- c
	if g.silent {
		select {
		case <-g.closed:
		case <-r.Context().Done():
		}
		return
	}
	for {
		_, data, err := ws.Read(context.Background())
		if err != nil {
			c.closeErr = err
			return
		}
		var m agentproto.Message
		if err := json.Unmarshal(data, &m); err != nil {
			g.t.Errorf("agent sent a frame that is not JSON: %.200q", data)
			continue
		}
		select {
		case c.msgs <- m:
		default:
			g.t.Errorf("fake gateway: message buffer full; dropped %+v", m)
		}
	}
}

// accept waits for the next agent connection.
func (g *fakeGateway) accept(t *testing.T) *fakeConn {
	t.Helper()
	select {
	case c := <-g.conns:
		return c
	case <-time.After(waitFor):
		t.Fatal("no agent connected")
		return nil
	}
}

// registrations returns the registration bodies received so far.
func (g *fakeGateway) registrations() []json.RawMessage {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]json.RawMessage(nil), g.regs...)
}

func (c *fakeConn) send(m agentproto.Message) {
	c.t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, data); err != nil {
		c.t.Errorf("fake gateway: write %s: %v", m.Type, err)
	}
}

var callSeq struct {
	sync.Mutex
	n int
}

// call sends a call with a deadline 30 s away and returns its id.
func (c *fakeConn) call(kind, name, args string) string {
	c.t.Helper()
	return c.callUntil(kind, name, args, time.Now().Add(30*time.Second))
}

func (c *fakeConn) callUntil(kind, name, args string, deadline time.Time) string {
	c.t.Helper()
	callSeq.Lock()
	callSeq.n++
	id := fmt.Sprintf("c-%d", callSeq.n)
	callSeq.Unlock()
	m := agentproto.Message{Type: agentproto.TypeCall, ID: id, Kind: kind, Name: name,
		Caller: &agentproto.Caller{KeyID: "key_42", KeyName: "claude"}}
	if args != "" {
		m.Args = json.RawMessage(args)
	}
	if !deadline.IsZero() {
		m.Deadline = deadline.UnixMilli()
	}
	c.send(m)
	return id
}

// next returns the agent's next message.
func (c *fakeConn) next(t *testing.T) agentproto.Message {
	t.Helper()
	select {
	case m := <-c.msgs:
		return m
	case <-time.After(waitFor):
		t.Fatal("no message from the agent")
		return agentproto.Message{}
	}
}

// answer returns the result or error of call id, with the progress lines
// that came before it. Messages of other calls fail the test.
func (c *fakeConn) answer(t *testing.T, id string) (agentproto.Message, []string) {
	t.Helper()
	var progress []string
	for {
		m := c.next(t)
		if m.ID != id {
			t.Fatalf("got %s for call %q while waiting for call %q", m.Type, m.ID, id)
		}
		switch m.Type {
		case agentproto.TypeProgress:
			progress = append(progress, m.Message)
		case agentproto.TypeResult, agentproto.TypeError:
			return m, progress
		default:
			t.Fatalf("unexpected %s message for call %s", m.Type, id)
		}
	}
}

// closed waits until the agent's side of the connection is gone and
// returns why reading ended.
func (c *fakeConn) closed(t *testing.T) error {
	t.Helper()
	select {
	case <-c.done:
		return c.closeErr
	case <-time.After(waitFor):
		t.Fatal("the agent did not close the connection")
		return nil
	}
}

// drop closes the connection without a close handshake, as a failing
// network would.
func (c *fakeConn) drop() { c.ws.CloseNow() }

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

// newTestAgent returns an agent pointed at g, logging to a recorder.
func newTestAgent(t *testing.T, g *fakeGateway) (*Agent, *logRecorder) {
	t.Helper()
	rec := newLogRecorder()
	a, err := New(Options{APIKey: testKey, URL: g.srv.URL, Logger: slogFor(rec)})
	if err != nil {
		t.Fatal(err)
	}
	return a, rec
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
func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// slogFor is a logger writing to rec.
func slogFor(rec *logRecorder) *slog.Logger { return slog.New(rec) }
