// Package routetest is an in-memory [route.Transport] for tests: the test
// plays the agent at the other end, reading what the gateway sends and
// answering, with no network. Its channels suit testing/synctest: make it
// inside the bubble.
package routetest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/route"
)

// ErrClosed is what Send and Recv return once the transport is closed.
var ErrClosed = errors.New("routetest: transport closed")

// Transport is the gateway's end of an in-memory connection; its methods
// from [route.Transport] are for the gateway, the others for the test
// playing the agent. Every method may be called from any goroutine.
type Transport struct {
	toAgent chan *agentproto.Message
	toGW    chan *agentproto.Message
	closed  chan struct{}

	once   sync.Once
	mu     sync.Mutex
	reason string
}

var _ route.Transport = (*Transport)(nil)

// New makes a connected transport. Up to 64 messages wait in each direction
// before a sender blocks.
func New() *Transport { return NewQueue(64) }

// NewQueue makes a connected transport whose queue to the agent holds n
// messages: with the agent not reading, the n+1st Send waits, as on a
// connection whose socket is full.
func NewQueue(n int) *Transport {
	return &Transport{
		toAgent: make(chan *agentproto.Message, n),
		toGW:    make(chan *agentproto.Message, 64),
		closed:  make(chan struct{}),
	}
}

// Send passes m to the agent's end; while the queue is full it waits as
// [route.Transport] says: until ctx ends or m's deadline passes.
func (t *Transport) Send(ctx context.Context, m *agentproto.Message) error {
	select {
	case <-t.closed:
		return ErrClosed
	default:
	}
	select {
	case t.toAgent <- m:
		return nil
	case <-t.closed:
		return ErrClosed
	default:
	}
	var deadline <-chan time.Time
	if m.Deadline != 0 {
		tm := time.NewTimer(time.Until(time.UnixMilli(m.Deadline)))
		defer tm.Stop()
		deadline = tm.C
	}
	select {
	case t.toAgent <- m:
		return nil
	case <-t.closed:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	case <-deadline:
		return route.ErrSendTimeout
	}
}

// Recv returns the agent's next message.
func (t *Transport) Recv(ctx context.Context) (*agentproto.Message, error) {
	select {
	case m := <-t.toGW:
		return m, nil
	case <-t.closed:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close ends the connection; the first reason given is kept.
func (t *Transport) Close(reason string) {
	t.once.Do(func() {
		t.mu.Lock()
		t.reason = reason
		t.mu.Unlock()
		close(t.closed)
	})
}

// Reason returns the reason the first Close gave.
func (t *Transport) Reason() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reason
}

// Closed is closed once the connection has ended.
func (t *Transport) Closed() <-chan struct{} { return t.closed }

// Next returns the next message the gateway sent, or nil once the
// connection has ended and nothing is left to read.
func (t *Transport) Next() *agentproto.Message {
	select {
	case m := <-t.toAgent:
		return m
	default:
	}
	select {
	case m := <-t.toAgent:
		return m
	case <-t.closed:
		return nil
	}
}

// Sent returns the messages the gateway sent and nobody read yet, without
// waiting.
func (t *Transport) Sent() []*agentproto.Message {
	var out []*agentproto.Message
	for {
		select {
		case m := <-t.toAgent:
			out = append(out, m)
		default:
			return out
		}
	}
}

// Reply sends m from the agent to the gateway; false once the connection
// has ended.
func (t *Transport) Reply(m *agentproto.Message) bool {
	select {
	case t.toGW <- m:
		return true
	case <-t.closed:
		return false
	}
}
