// Package route carries calls to agent replicas: it chooses one replica,
// delivers the call at most once, enforces the wait, passes cancels and
// progress, and turns what comes back into an [Outcome].
//
// [Conn] is the gateway's end of one replica's WebSocket; [Deliver] is the
// flow of one call over it.
package route

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/recovery"
)

// ErrDisconnected means the replica's connection ended before the result.
var ErrDisconnected = errors.New("agent disconnected")

// ErrGoodbye is what [Conn.Serve] returns, wrapped with the reason, when the
// connection ended after the gateway said goodbye ([Conn.Close]): however
// the agent then hangs up, that is a normal ending.
var ErrGoodbye = errors.New("the gateway said goodbye")

// Heartbeat is how often the gateway pings a replica, and how long it waits
// for the pong.
const Heartbeat = 5 * time.Second

// Conn is the gateway's end of one replica's connection. Start, Cancel and
// Close may be called from any goroutine; Serve runs once and returns when
// the connection ends, after failing every pending call.
type Conn struct {
	ws        *websocket.Conn
	log       *slog.Logger
	heartbeat time.Duration
	events    Events

	mu      sync.Mutex
	pending map[string]*Pending
	closed  bool
	goodbye string // the reason Close gave; "" until then
	done    chan struct{}
}

// Pending is a call delivered and not yet answered.
type Pending struct {
	// Result receives exactly one Outcome.
	Result chan Outcome
	// Progress receives progress lines; a line that finds it full is
	// dropped here and the caller's throttle keeps the latest.
	Progress chan string
	// Confirm receives the agent's questions for the user.
	Confirm chan agentproto.Message
}

// Outcome is how a delivered call ended on the agent's side.
type Outcome struct {
	Result json.RawMessage // set on success
	Err    string          // the handler's message, on error
	// Disconnected: the connection ended first.
	Disconnected bool
}

// Events are the agent's own requests; nil funcs ignore them. They run on
// the connection's read goroutine.
type Events struct {
	// SetEnabled switches one of the agent's tools on or off.
	SetEnabled func(name string, on bool) error
	// Drain takes the replica out of rotation: it is stopping and serves
	// only the calls it has.
	Drain func()
}

// NewConn wraps an accepted WebSocket.
func NewConn(ws *websocket.Conn, log *slog.Logger, heartbeat time.Duration, events Events) *Conn {
	if heartbeat <= 0 {
		heartbeat = Heartbeat
	}
	ws.SetReadLimit(agentproto.MaxFrameBytes)
	return &Conn{
		ws: ws, log: log, heartbeat: heartbeat, events: events,
		pending: make(map[string]*Pending), done: make(chan struct{}),
	}
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Send writes one message. ctx only carries values: a write is never cut
// short by a context, because coder/websocket closes the whole connection
// when a write's context ends during the write, and one client giving up
// must not drop an agent. A write to a dead peer ends when the heartbeat
// closes the connection.
func (c *Conn) Send(ctx context.Context, m *agentproto.Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return c.ws.Write(context.Background(), websocket.MessageText, b)
}

// Start registers a pending call and sends it. The caller must eventually
// receive from Result, or call Cancel.
func (c *Conn) Start(ctx context.Context, m *agentproto.Message) (*Pending, error) {
	p := &Pending{Result: make(chan Outcome, 1), Progress: make(chan string, 8), Confirm: make(chan agentproto.Message, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrDisconnected
	}
	c.pending[m.ID] = p
	c.mu.Unlock()
	if err := c.Send(ctx, m); err != nil {
		c.forget(m.ID)
		return nil, ErrDisconnected
	}
	return p, nil
}

// Cancel tells the agent to stop call id and forgets it: a late answer is
// dropped.
func (c *Conn) Cancel(id, reason string) {
	if c.forget(id) {
		// Best effort and off the caller's path: the caller has already
		// given up on this call.
		recovery.Go(c.log, "send a cancel to an agent", func() {
			c.Send(context.Background(), &agentproto.Message{Type: agentproto.TypeCancel, ID: id, Reason: reason})
		})
	}
}

// Forget drops a pending call without telling the agent.
func (c *Conn) forget(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pending[id]
	delete(c.pending, id)
	return ok
}

// Close says goodbye and ends the connection; pending calls fail as
// disconnected once Serve notices.
func (c *Conn) Close(reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.mu.Lock()
	c.goodbye = reason
	ids := make([]string, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.Send(ctx, &agentproto.Message{Type: agentproto.TypeCancel, ID: id, Reason: agentproto.ReasonShutdown})
	}
	c.Send(ctx, &agentproto.Message{Type: agentproto.TypeGoodbye, Message: reason})
	c.ws.Close(websocket.StatusGoingAway, reason)
}

// Serve reads the agent's messages until the connection ends, pinging it
// every heartbeat. It fails every pending call as disconnected on the way
// out.
func (c *Conn) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recovery.Go(c.log, "ping an agent", func() { c.pinger(ctx) })
	err := c.read(ctx)
	c.mu.Lock()
	if c.goodbye != "" {
		err = fmt.Errorf("%w (%s)", ErrGoodbye, c.goodbye)
	}
	c.closed = true
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, p := range pending {
		p.Result <- Outcome{Disconnected: true}
	}
	c.ws.CloseNow()
	close(c.done)
	return err
}

func (c *Conn) pinger(ctx context.Context) {
	t := time.NewTicker(c.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, c.heartbeat)
		err := c.ws.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("agent missed a heartbeat; closing its connection", "err", err)
			}
			c.ws.CloseNow()
			return
		}
	}
}

// read handles the agent's messages until the connection ends. A panic
// while handling one is logged and ends this connection only: the agent
// reconnects, and the gateway goes on.
func (c *Conn) read(ctx context.Context) error {
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			return err
		}
		var m agentproto.Message
		if err := json.Unmarshal(data, &m); err != nil {
			c.log.Warn("agent sent a message that is not JSON; ignored", "err", err)
			continue
		}
		if err := recovery.Do(c.log, "agent message "+m.Type, func() { c.handle(ctx, &m) }); err != nil {
			return err
		}
	}
}

// handle acts on one message from the agent.
func (c *Conn) handle(ctx context.Context, m *agentproto.Message) {
	switch m.Type {
	case agentproto.TypeResult:
		out := Outcome{Result: m.Result}
		if len(m.Result) > agentproto.MaxResultBytes {
			out = Outcome{Err: TooLarge(len(m.Result))}
		}
		c.deliver(m.ID, out)
	case agentproto.TypeError:
		c.deliver(m.ID, Outcome{Err: m.Message})
	case agentproto.TypeProgress:
		if p := c.lookup(m.ID); p != nil {
			select {
			case p.Progress <- m.Message:
			default:
			}
		}
	case agentproto.TypeConfirm:
		if p := c.lookup(m.ID); p != nil {
			select {
			case p.Confirm <- *m:
			default:
				// One question at a time: the SDK waits for each answer.
				c.Send(ctx, &agentproto.Message{Type: agentproto.TypeConfirmed, ID: m.ID, Input: m.Input,
					Message: "another question of this call is still waiting for the user"})
			}
		}
	case agentproto.TypeSetEnabled:
		if c.events.SetEnabled != nil && m.Enabled != nil {
			if err := c.events.SetEnabled(m.Name, *m.Enabled); err != nil {
				c.log.Warn("agent set_enabled refused", "tool", m.Name, "err", err)
			}
		}
	case agentproto.TypeDrain:
		if c.events.Drain != nil {
			c.events.Drain()
		}
	}
}

func (c *Conn) lookup(id string) *Pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending[id]
}

func (c *Conn) deliver(id string, out Outcome) {
	c.mu.Lock()
	p := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if p != nil {
		p.Result <- out
	}
}

// TooLarge is the message for a result over the limit.
func TooLarge(n int) string {
	return "Result is too large: " + agentproto.Thousands(n) + " bytes; the limit is 4 MiB (4,194,304 bytes). Return less, or page through it."
}
