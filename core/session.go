package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

// defaultHeartbeat is used when the welcome names no heartbeat.
const defaultHeartbeat = 5 * time.Second

var (
	errGoodbye      = errors.New("the gateway said goodbye")
	errDisconnected = errors.New("core: the connection to the gateway ended")
	errCallDone     = errors.New("core: the call is over")
)

// session is one WebSocket connection to the gateway, from the welcome
// until it ends. It owns the calls that arrived on it: their contexts end
// with it.
//
// Reads happen on the goroutine running serve; writes come from any
// goroutine (handlers, progress timers, SetEnabled) and are serialised by
// writeMu.
type session struct {
	a    *Agent
	conn *websocket.Conn

	ctx    context.Context // parent of every handler context
	cancel context.CancelCauseFunc

	writeMu sync.Mutex

	mu    sync.Mutex
	calls map[string]*call
	// ended is closed, and replaced, each time a call leaves calls.
	ended chan struct{}

	wg sync.WaitGroup // the heartbeat
}

func newSession(a *Agent, conn *websocket.Conn) *session {
	return &session{a: a, conn: conn, calls: map[string]*call{}, ended: make(chan struct{})}
}

// serve waits for the welcome, then reads and dispatches messages until the
// connection ends or ctx does. welcomed says whether the welcome came.
// When serve returns, the socket is closed, every handler started on it has
// had its context cancelled, and the heartbeat has stopped.
func (s *session) serve(ctx context.Context, registered map[string]bool) (welcomed bool, err error) {
	// Handlers outlive ctx: when the agent stops, the calls it has finish
	// (see drainCalls) before their contexts end.
	s.ctx, s.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	closed := make(chan struct{})
	stopClosing := context.AfterFunc(ctx, func() {
		defer close(closed)
		s.drainCalls()
		s.conn.Close(websocket.StatusNormalClosure, "the agent is stopping")
	})
	defer func() {
		if !stopClosing() {
			<-closed
		}
		s.a.detach(s)
		s.cancel(errDisconnected)
		s.conn.CloseNow()
		s.wg.Wait()
	}()

	w, err := s.welcome()
	if err != nil {
		return false, err
	}
	s.a.log.Info("core: connected to the gateway",
		"replica", w.Replica, "project", w.Project, "call_wait_ms", w.CallWaitMs)
	s.a.attach(s, registered)
	if f := s.a.opts.OnConnect; f != nil {
		f()
	}
	every := time.Duration(w.HeartbeatMs) * time.Millisecond
	if every <= 0 {
		every = defaultHeartbeat
	}
	s.wg.Add(1)
	go s.heartbeat(every)

	// One buffer for every message read (decoding copies what it keeps),
	// dropped after a large one.
	var buf bytes.Buffer
	for {
		// The read is not bound to a context: an expired context would
		// drop the socket without a close frame. Closing the socket ends it.
		buf.Reset()
		if buf.Cap() > 1<<20 {
			buf = bytes.Buffer{}
		}
		_, r, err := s.conn.Reader(context.Background())
		if err == nil {
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			if s.ctx.Err() != nil {
				return true, context.Cause(s.ctx)
			}
			return true, fmt.Errorf("connection: %w", err)
		}
		var m agentproto.Message
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			s.a.log.Warn("core: ignoring a message that is not JSON", "err", err)
			continue
		}
		switch m.Type {
		case agentproto.TypeCall:
			s.start(m)
		case agentproto.TypeCancel:
			s.cancelCall(m.ID, m.Reason)
		case agentproto.TypeConfirmed, agentproto.TypeAnswered:
			s.mu.Lock()
			c := s.calls[m.ID]
			s.mu.Unlock()
			if c != nil {
				select {
				case c.confirmed <- m:
				default: // nobody asked, or an answer is already waiting
				}
			}
		case agentproto.TypeGoodbye:
			return true, fmt.Errorf("%w: %s", errGoodbye, m.Message)
		}
	}
}

// drainSettle is how long a stopping agent keeps reading after it said
// drain, for calls the gateway sent before it heard.
const drainSettle = 100 * time.Millisecond

// drainCalls tells the gateway to send no new calls and waits, up to
// drainTimeout, for the running ones to finish, so that a restart loses
// none.
func (s *session) drainCalls() {
	if err := s.send(agentproto.Message{Type: agentproto.TypeDrain}); err != nil {
		return // the connection is gone; its calls end with it
	}
	if !s.waitIdle(drainSettle, drainTimeout) {
		s.a.log.Warn("core: calls still running when the agent stopped; they are cancelled", "waited", drainTimeout)
	}
}

// waitIdle waits until no call runs and at least settle has passed, and
// reports whether that happened within timeout. It wakes when a call ends,
// not on a clock.
func (s *session) waitIdle(settle, timeout time.Duration) bool {
	settled := time.NewTimer(settle)
	defer settled.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	isSettled := false
	for {
		s.mu.Lock()
		idle, ended := len(s.calls) == 0, s.ended
		s.mu.Unlock()
		if idle && isSettled {
			return true
		}
		select {
		case <-ended:
		case <-settled.C:
			isSettled = true
		case <-deadline.C:
			return false
		}
	}
}

// welcome reads the gateway's first message.
func (s *session) welcome() (*agentproto.Welcome, error) {
	ctx, cancel := context.WithTimeout(s.ctx, openTimeout)
	defer cancel()
	_, data, err := s.conn.Read(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect: wait for welcome: %w", err)
	}
	var m agentproto.Message
	if err := json.Unmarshal(data, &m); err != nil || m.Type != agentproto.TypeWelcome || m.Welcome == nil {
		return nil, fmt.Errorf("connect: the gateway's first message is %.200q, not a welcome", data)
	}
	return m.Welcome, nil
}

// heartbeat pings every interval and closes the connection when a pong does
// not come within another interval.
func (s *session) heartbeat(every time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		// Not s.ctx: a ping cut short by the agent stopping would drop the
		// socket before the close handshake.
		ctx, cancel := context.WithTimeout(context.Background(), every)
		err := s.conn.Ping(ctx)
		cancel()
		if err != nil {
			if s.ctx.Err() == nil {
				s.cancel(fmt.Errorf("no pong from the gateway within %v", every))
				s.conn.CloseNow()
			}
			return
		}
	}
}

// send writes one message.
func (s *session) send(m agentproto.Message) error {
	data, err := marshal(m)
	if err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	// No deadline on the write itself: a context ending mid-write makes
	// coder/websocket close the connection, and a write to a dead gateway
	// ends when the heartbeat closes the connection.
	return s.conn.Write(context.Background(), websocket.MessageText, data)
}

func (s *session) sendSetEnabled(name string, on bool) {
	err := s.send(agentproto.Message{Type: agentproto.TypeSetEnabled, Name: name, Enabled: &on})
	if err != nil {
		s.a.log.Debug("core: set_enabled not sent; the next registration carries it", "tool", name, "err", err)
	}
}

// start runs a call in its own goroutine.
func (s *session) start(m agentproto.Message) {
	h := s.a.lookup(m.Kind, m.Name)
	if h == nil {
		s.send(agentproto.Message{Type: agentproto.TypeError, ID: m.ID,
			Message: fmt.Sprintf("This agent has no %s %q.", m.Kind, m.Name)})
		return
	}
	c := &call{info: Call{ID: m.ID, Kind: m.Kind, Tool: m.Name, RetryOf: m.RetryOf, RetryReason: m.RetryReason},
		sess: s, confirmed: make(chan agentproto.Message, 1)}
	if m.Caller != nil {
		c.info.KeyID, c.info.KeyName = m.Caller.KeyID, m.Caller.KeyName
		c.info.ClientCapabilities = m.Caller.Capabilities
		setCaller(&c.info, m.Caller)
	}
	ctx, cancel := context.WithCancelCause(s.ctx)
	ctx = withTrace(ctx, &c.info, m)
	c.cancel = cancel
	stops := []context.CancelFunc{}
	if m.Deadline > 0 {
		c.info.Deadline = time.UnixMilli(m.Deadline)
		var stop context.CancelFunc
		ctx, stop = context.WithDeadlineCause(ctx, c.info.Deadline, errors.New("core: the gateway's deadline for the call passed"))
		stops = append(stops, stop)
	}
	if h.callTimeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, h.callTimeout, fmt.Errorf("core: the tool's CallTimeout of %v passed", h.callTimeout))
		stops = append(stops, stop)
	}
	c.progress = newThrottle(func(line string) {
		s.send(agentproto.Message{Type: agentproto.TypeProgress, ID: m.ID, Message: line})
	})
	ctx = context.WithValue(ctx, callKey{}, c)

	s.mu.Lock()
	if _, dup := s.calls[m.ID]; dup || m.ID == "" {
		s.mu.Unlock()
		cancel(errCallDone)
		for _, stop := range stops {
			stop()
		}
		s.a.log.Warn("core: ignoring a call with an empty or repeated id", "call", m.ID)
		return
	}
	s.calls[m.ID] = c
	s.mu.Unlock()

	s.a.calls.Add(1)
	go func() {
		defer s.a.calls.Done()
		defer func() {
			cancel(errCallDone)
			for _, stop := range stops {
				stop()
			}
		}()
		s.finish(c, s.invoke(ctx, c, h, m.Args))
	}()
}

// invoke runs the handler, turning a panic into its message.
func (s *session) invoke(ctx context.Context, c *call, h *handler, args json.RawMessage) (m agentproto.Message) {
	defer func() {
		if r := recover(); r != nil {
			s.a.log.Error("core: handler panicked", "kind", c.info.Kind, "name", c.info.Tool,
				"call", c.info.ID, "panic", r, "stack", string(debug.Stack()))
			m = errorMessage(c.info.ID, fmt.Sprintf("panic: %v", r))
		}
	}()
	res, err := h.run(ctx, args)
	if err != nil {
		return s.a.failure(c.info.ID, err)
	}
	return agentproto.Message{Type: agentproto.TypeResult, ID: c.info.ID, Result: res}
}

func errorMessage(id, msg string) agentproto.Message {
	if len(msg) > agentproto.MaxResultBytes {
		msg = strings.ToValidUTF8(msg[:agentproto.MaxResultBytes], "")
	}
	return agentproto.Message{Type: agentproto.TypeError, ID: id, Message: msg}
}

// finish sends a call's answer, unless nobody waits for it any more: no
// progress line follows it. The call counts as running until its answer is
// written, so that a draining agent does not close the connection under it.
func (s *session) finish(c *call, answer agentproto.Message) {
	c.progress.stop()
	defer s.forget(c.info.ID)
	sent := false
	if !c.cancelled.Load() && s.ctx.Err() == nil {
		if err := s.send(answer); err != nil {
			s.a.log.Debug("core: answer not sent", "call", c.info.ID, "err", err)
		} else {
			sent = true
		}
	}
	if f := s.a.testFinished; f != nil {
		f(c.info.ID, sent)
	}
}

// forget removes call id from the running ones and wakes waitIdle.
func (s *session) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.calls, id)
	close(s.ended)
	s.ended = make(chan struct{})
}

// cancelCall ends a call's context because the gateway gave up on it.
func (s *session) cancelCall(id, reason string) {
	s.mu.Lock()
	c := s.calls[id]
	s.mu.Unlock()
	if c == nil {
		return // finished already, or never ours
	}
	c.cancelled.Store(true)
	c.cancel(fmt.Errorf("core: the gateway cancelled the call (%s)", reason))
}
