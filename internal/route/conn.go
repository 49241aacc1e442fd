// Package route carries calls to agent replicas: it chooses one replica,
// delivers the call at most once, enforces the wait, passes cancels and
// progress, and turns what comes back into a [Result].
//
// [Conn] is the gateway's end of one replica's connection, over any
// [Transport]; [Deliver] is the flow of one call over it. route knows no
// wire: the agent front adapts the WebSocket to a Transport.
package route

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/recovery"
)

// ErrDisconnected means the replica's connection ended before the result.
var ErrDisconnected = agents.ErrDisconnected

// ErrGoodbye is what [Conn.Serve] returns, wrapped with the reason, when the
// connection ended after the gateway said goodbye ([Conn.Close]): however
// the agent then hangs up, that is a normal ending.
var ErrGoodbye = errors.New("the gateway said goodbye")

// Transport carries agent-protocol messages between the gateway and one
// replica: a WebSocket (internal/agentfront), or a replica held by another
// gateway, over the bus (internal/cluster). It keeps the connection alive
// itself (heartbeats) and drops what it cannot decode.
//
// Who may call what, concurrently:
//   - Send may be called from several goroutines at once, and concurrently
//     with Recv and Close. It queues m behind what the connection is still
//     writing and returns; messages go out in the order they were queued.
//     A send is never cut short once queued (one client giving up must not
//     drop an agent). While the queue is full, Send waits for room only
//     until ctx ends or, for a message with a Deadline (a call), until that
//     deadline: then m is not sent and Send returns ctx's error or
//     [ErrSendTimeout]. With room in the queue, m is queued whatever ctx
//     says, so an ended ctx means "queue it if that needs no wait".
//   - Recv is called from one goroutine only ([Conn.Serve]'s read loop). It
//     returns the next message, or an error once the connection has ended
//     (the peer left, Close was called, or ctx ended).
//   - Close may be called from any goroutine, more than once, also while
//     Send and Recv block; it unblocks them and does not block itself on a
//     peer that reads nothing. A non-empty reason ends the connection
//     politely (what is queued goes first, then a closing handshake
//     carrying the reason, where the carrier has one, all within a short
//     bound); an empty reason ends it at once.
type Transport interface {
	Send(ctx context.Context, m *agentproto.Message) error
	Recv(ctx context.Context) (*agentproto.Message, error)
	Close(reason string)
}

// ErrSendTimeout is what a [Transport]'s Send returns when a call's
// deadline passed while the connection's queue was full: the agent is not
// reading what it is sent (or its link is too slow for what is queued
// ahead).
var ErrSendTimeout = errors.New("the agent's connection took nothing more before the call's deadline")

// noWait is an ended context: a message sent with it is queued only if the
// queue has room now.
var noWait = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Conn is the gateway's end of one replica's connection; it implements
// [agents.Conn] over a [Transport]. Start, Send, Cancel and Close may be
// called from any goroutine; Serve runs once and returns when the
// connection ends, after failing every pending call.
type Conn struct {
	t      Transport
	log    *slog.Logger
	events Events

	mu      sync.Mutex
	pending map[string]*agents.Pending
	closed  bool
	goodbye string // the reason Close gave; "" until then
	done    chan struct{}
}

var _ agents.Conn = (*Conn)(nil)

// Events are the agent's own requests; nil funcs ignore them. They run on
// the connection's read goroutine.
type Events struct {
	// SetEnabled switches one of the agent's tools (kind tool or ""),
	// prompts or resources on or off.
	SetEnabled func(kind, name string, on bool) error
	// ResourceUpdated says one of the agent's resources changed.
	ResourceUpdated func(uri string) error
	// Drain takes the replica out of rotation: it is stopping and serves
	// only the calls it has.
	Drain func()
}

// NewConn serves the agent protocol over t.
func NewConn(t Transport, log *slog.Logger, events Events) *Conn {
	return &Conn{
		t: t, log: log, events: events,
		pending: make(map[string]*agents.Pending), done: make(chan struct{}),
	}
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Send queues one message; see [Transport] for how long it waits.
func (c *Conn) Send(ctx context.Context, m *agentproto.Message) error {
	return c.t.Send(ctx, m)
}

// Start registers a pending call and queues it. The caller must eventually
// receive from Result, or call Cancel. While the connection's queue is
// full, Start waits for room only until ctx ends or the call's deadline
// (m.Deadline) passes; then the call is not sent and Start returns ctx's
// error or [ErrSendTimeout]. It returns [ErrDisconnected] once the
// connection has ended.
func (c *Conn) Start(ctx context.Context, m *agentproto.Message) (*agents.Pending, error) {
	p := agents.NewPending()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrDisconnected
	}
	c.pending[m.ID] = p
	c.mu.Unlock()
	if err := c.Send(ctx, m); err != nil {
		c.forget(m.ID)
		if errors.Is(err, ErrSendTimeout) || (ctx.Err() != nil && errors.Is(err, ctx.Err())) {
			return nil, err
		}
		return nil, ErrDisconnected
	}
	return p, nil
}

// cancelWait bounds how long a cancel waits for room in a full queue, off
// the caller's path.
const cancelWait = 5 * time.Second

// Cancel tells the agent to stop call id and forgets it: a late answer is
// dropped. It never waits: the cancel is queued at once when there is
// room, else by a goroutine that waits a while for room (the agent is
// behind on reading; the call's deadline, which it has, ends the call
// there anyway).
func (c *Conn) Cancel(id, reason string) {
	if !c.forget(id) {
		return
	}
	m := &agentproto.Message{Type: agentproto.TypeCancel, ID: id, Reason: reason}
	if err := c.Send(noWait, m); err == nil || !errors.Is(err, context.Canceled) {
		return // queued, or the connection has ended
	}
	recovery.Go(c.log, "send a cancel to an agent", func() {
		ctx, cancel := context.WithTimeout(context.Background(), cancelWait)
		defer cancel()
		c.Send(ctx, m)
	})
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
// disconnected once Serve notices. It does not wait: the cancels of the
// calls in flight and the goodbye are queued if there is room (an agent
// whose queue is full is not reading them), and the transport ends the
// connection within its own short bound.
func (c *Conn) Close(reason string) {
	c.mu.Lock()
	c.goodbye = reason
	ids := make([]string, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.Send(noWait, &agentproto.Message{Type: agentproto.TypeCancel, ID: id, Reason: agentproto.ReasonShutdown})
	}
	c.Send(noWait, &agentproto.Message{Type: agentproto.TypeGoodbye, Message: reason})
	c.t.Close(reason)
}

// Serve reads the agent's messages until the connection ends. It fails
// every pending call as disconnected on the way out.
func (c *Conn) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
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
		p.Result <- agents.Reply{Disconnected: true}
	}
	c.t.Close("")
	close(c.done)
	return err
}

// read handles the agent's messages until the connection ends. A panic
// while handling one is logged and ends this connection only: the agent
// reconnects, and the gateway goes on.
func (c *Conn) read(ctx context.Context) error {
	for {
		m, err := c.t.Recv(ctx)
		if err != nil {
			return err
		}
		if err := recovery.Do(c.log, "agent message "+m.Type, func() { c.handle(ctx, m) }); err != nil {
			return err
		}
	}
}

// handle acts on one message from the agent.
func (c *Conn) handle(ctx context.Context, m *agentproto.Message) {
	switch m.Type {
	case agentproto.TypeResult:
		out := agents.Reply{Result: m.Result}
		if len(m.Result) > agentproto.MaxResultBytes {
			out = agents.Reply{Err: TooLarge(len(m.Result))}
		}
		c.deliver(m.ID, out)
	case agentproto.TypeError:
		c.deliver(m.ID, errorReply(m))
	case agentproto.TypeProgress:
		if p := c.lookup(m.ID); p != nil {
			select {
			case p.Events <- agents.Event{Line: m.Message}:
			default:
			}
		}
	case agentproto.TypeLog:
		if p := c.lookup(m.ID); p != nil && slices.Contains(agentproto.LogLevels, m.Level) && len(m.Data) <= agentproto.MaxLogBytes {
			select {
			case p.Events <- agents.Event{Log: &agentproto.Message{Type: m.Type, ID: m.ID, Level: m.Level, Logger: m.Logger, Data: m.Data}}:
			default: // a flood: dropped
			}
		}
	case agentproto.TypeConfirm, agentproto.TypeAsk:
		if p := c.lookup(m.ID); p != nil {
			select {
			case p.Confirm <- m:
			default:
				// One question at a time: the SDK waits for each answer.
				busy := &agentproto.Message{Type: agentproto.TypeConfirmed, ID: m.ID, Input: m.Input,
					Message: "another question of this call is still waiting for the user"}
				if m.Type == agentproto.TypeAsk {
					busy.Type, busy.Input = agentproto.TypeAnswered, ""
					busy.Message = "another input request of this call is still waiting for the client; ask for several together instead"
				}
				c.Send(noWait, busy) // not held up by a full queue: this is the read loop
			}
		}
	case agentproto.TypeSetEnabled:
		if c.events.SetEnabled != nil && m.Enabled != nil {
			if err := c.events.SetEnabled(m.Kind, m.Name, *m.Enabled); err != nil {
				c.log.Warn("agent set_enabled refused", "kind", m.Kind, "name", m.Name, "err", err)
			}
		}
	case agentproto.TypeUpdated:
		if c.events.ResourceUpdated != nil {
			if err := c.events.ResourceUpdated(m.Name); err != nil {
				c.log.Warn("agent resource_updated refused", "uri", m.Name, "err", err)
			}
		}
	case agentproto.TypeDrain:
		if c.events.Drain != nil {
			c.events.Drain()
		}
	}
}

func (c *Conn) lookup(id string) *agents.Pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending[id]
}

func (c *Conn) deliver(id string, out agents.Reply) {
	c.mu.Lock()
	p := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if p != nil {
		p.Result <- out
	}
}

// errorReply is how an agent's error message m ends its call: the
// handler's message, and, for a protocol error, the code the client gets
// and the error's data.
func errorReply(m *agentproto.Message) agents.Reply {
	out := agents.Reply{Err: m.Message}
	switch {
	case m.Code == agentproto.CodeUpstreamUnauthorized:
		// Not for a client: the MCP front refreshes the person's
		// upstream account and delivers the call again, or asks them to
		// connect it.
		out.Code = m.Code
	case m.Code != 0:
		out.Code, out.Data = agentproto.ClientErrorCode(m.Code), m.Data
		if out.Err == "" {
			out.Err = fmt.Sprintf("The agent failed the call with JSON-RPC error %d and no message.", m.Code)
		}
	}
	return out
}

// TooLarge is the message for a result over the limit.
func TooLarge(n int) string {
	return "Result is too large: " + agentproto.Thousands(n) + " bytes; the limit is 4 MiB (4,194,304 bytes). Return less, or page through it."
}
