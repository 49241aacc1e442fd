package agents

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// ErrDisconnected means the replica's connection ended before the call was
// sent or answered.
var ErrDisconnected = errors.New("agent disconnected")

// Conn is the gateway's end of one replica's connection: what the registry,
// the router and the dashboard need of it, whatever carries it: a WebSocket
// served by the agent front (an SDK agent, or the bridge, itself an agent
// built on core), or a replica held by another gateway, reached over the bus
// (internal/cluster). route.Conn implements it over a route.Transport.
//
// Every method may be called from any goroutine, concurrently with the
// others and with the connection ending.
type Conn interface {
	// Start registers call m.ID as pending and sends m. Exactly one [Reply]
	// then arrives on the Pending's Result, unless the call is cancelled
	// first. It fails with [ErrDisconnected] if the connection has ended.
	// It waits for the connection to take m only until ctx ends or
	// m.Deadline passes (an agent that reads nothing holds no caller past
	// its wait); it then fails with another error, and m is not sent.
	Start(ctx context.Context, m *agentproto.Message) (*Pending, error)
	// Cancel tells the agent to stop call id and forgets it: a late answer
	// is dropped. It does not block on the network.
	Cancel(id, reason string)
	// Send sends one message outside any pending call's bookkeeping (an
	// answer to a question, say), waiting for the connection to take it
	// only until ctx ends.
	Send(ctx context.Context, m *agentproto.Message) error
	// Close says goodbye and ends the connection; calls in flight fail as
	// disconnected. It does not wait for the agent to read, and may be
	// called more than once.
	Close(reason string)
	// Done is closed once the connection has ended and every pending call
	// has had its Reply.
	Done() <-chan struct{}
}

// Pending is a call delivered and not yet answered.
type Pending struct {
	// Result receives exactly one Reply.
	Result chan Reply
	// Events receives the agent's progress lines and log messages for the
	// client, in the order the agent sent them; one that finds it full is
	// dropped there (of progress lines, the caller's throttle keeps the
	// latest).
	Events chan Event
	// Confirm receives the agent's questions for the user.
	Confirm chan *agentproto.Message
}

// Event is a progress line or a log message of a pending call.
type Event struct {
	Line string              // the progress line, when Log is nil
	Log  *agentproto.Message // a log message
}

// NewPending makes the channels of one pending call. Messages go by
// pointer: every call makes these, and a buffer of messages by value was
// ~6 KiB of its garbage.
func NewPending() *Pending {
	return &Pending{Result: make(chan Reply, 1), Events: make(chan Event, 24), Confirm: make(chan *agentproto.Message, 1)}
}

// Reply is how a delivered call ended on the agent's side.
type Reply struct {
	Result json.RawMessage // set on success
	Err    string          // the handler's message, on error
	// Code, with Err, makes the error a protocol error: the JSON-RPC code
	// the client gets (agentproto.ClientErrorCode already applied), with
	// Data, any JSON; 0 means an isError result.
	Code int
	Data json.RawMessage
	// Disconnected: the connection ended first.
	Disconnected bool
}
