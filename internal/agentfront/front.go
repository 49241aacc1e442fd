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

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/store"
)

// Heartbeat is how often an agent pings the gateway by default (the
// welcome tells it). A connection the agent sent nothing on, not even a
// ping, for two heartbeats is closed.
const Heartbeat = 5 * time.Second

// TicketTTL is how long a registration's ticket stays redeemable.
const TicketTTL = 30 * time.Second

// Options configure a Front.
type Options struct {
	// Context bounds every agent connection: when it ends, they end.
	Context  context.Context
	Registry *agents.Registry
	Store    store.Projects
	Verifier *auth.Verifier
	Logger   *slog.Logger
	// Heartbeat is how often replicas ping; 0 means [Heartbeat].
	Heartbeat time.Duration
	// Redeem asks the other gateways for a registration ticket this one
	// did not issue (the registration reached another gateway); nil when
	// this gateway is alone.
	Redeem func(ctx context.Context, ticket, keyID string) (*agentproto.Registration, bool)
}

// Front serves the agent side of one gateway. Register and Connect are its
// HTTP handlers; Start starts its watchdog, and Shutdown (or Close) ends
// the connections it serves and waits for them (see lifecycle.go).
type Front struct {
	opts    Options
	log     *slog.Logger
	tickets *tickets
	updates *ratelimit.Limiter // resource_updated messages, per replica

	// ctx bounds every agent connection and the watchdog; Shutdown
	// cancels it. A child of Options.Context.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex // orders conns.Add against Shutdown's conns.Wait; guards live, started and closing
	started bool
	closing bool
	conns   sync.WaitGroup // agent connections being served
	watcher sync.WaitGroup // the watchdog
	// live are the connections the watchdog looks after: one goroutine
	// for all of them, not a pinging goroutine per agent (at 10,000
	// agents that was 80 MB of stacks).
	live map[*wsTransport]struct{}
}

// New builds the agent front; it starts nothing (see [Front.Start]).
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
	f := &Front{opts: opts, log: opts.Logger, tickets: newTickets(TicketTTL), updates: ratelimit.New(),
		live: make(map[*wsTransport]struct{})}
	f.ctx, f.cancel = context.WithCancel(opts.Context)
	return f
}
