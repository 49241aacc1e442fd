// Package agentfront is the gateway's agent side, the mirror of
// internal/mcpfront: it registers agents (POST /v1/agent/register), hands
// out the tickets they connect with, accepts their WebSocket
// (GET /v1/agent/connect) and makes every registration check. The
// WebSocket is adapted to a route.Transport here, so that route knows no
// wire; a connected replica goes into the agents registry with a route.Conn
// over it.
package agentfront

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/store"
)

// Heartbeat is how often the gateway pings a replica by default, and how
// long it waits for the pong.
const Heartbeat = 5 * time.Second

// TicketTTL is how long a registration's ticket stays redeemable.
const TicketTTL = 30 * time.Second

// Options configure a Front.
type Options struct {
	// Context bounds every agent connection: when it ends, they end.
	Context  context.Context
	Registry *agents.Registry
	Store    store.Store
	Verifier *auth.Verifier
	Logger   *slog.Logger
	// Heartbeat is how often replicas are pinged; 0 means [Heartbeat].
	Heartbeat time.Duration
}

// Front serves the agent side of one gateway. Register and Connect are its
// HTTP handlers; Close waits for the connections it serves.
type Front struct {
	opts    Options
	log     *slog.Logger
	tickets *tickets

	mu      sync.Mutex // orders conns.Add against Close's conns.Wait
	closing bool
	conns   sync.WaitGroup // agent connections being served
}

// New makes the agent front.
func New(opts Options) *Front {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = Heartbeat
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Front{opts: opts, log: opts.Logger, tickets: newTickets(TicketTTL)}
}

// Close refuses new agent connections and waits for those being served to
// end; end them first (cancel Options.Context, close the replicas).
func (f *Front) Close() {
	f.mu.Lock()
	f.closing = true
	f.mu.Unlock()
	f.conns.Wait()
}

// track counts an agent connection that Close waits for; false once Close
// has started waiting (a WaitGroup must not grow from zero while someone
// waits on it).
func (f *Front) track() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return false
	}
	f.conns.Add(1)
	return true
}
