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

	"github.com/spacefix/spacefix/core/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/recovery"
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
	Store    store.Store
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
// HTTP handlers; Close waits for the connections it serves.
type Front struct {
	opts    Options
	log     *slog.Logger
	tickets *tickets
	updates *ratelimit.Limiter // resource_updated messages, per replica

	mu      sync.Mutex // orders conns.Add against Close's conns.Wait; guards live
	closing bool
	conns   sync.WaitGroup // agent connections being served
	// live are the connections the watchdog looks after: one goroutine
	// for all of them, not a pinging goroutine per agent (at 10,000
	// agents that was 80 MB of stacks).
	live     map[*wsTransport]struct{}
	watching bool
	stop     chan struct{} // closed by Close: the watchdog ends
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
	return &Front{opts: opts, log: opts.Logger, tickets: newTickets(TicketTTL), updates: ratelimit.New(),
		live: make(map[*wsTransport]struct{}), stop: make(chan struct{})}
}

// Close refuses new agent connections and waits for those being served to
// end; end them first (cancel Options.Context, close the replicas).
func (f *Front) Close() {
	f.mu.Lock()
	if !f.closing {
		close(f.stop)
	}
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

// watch puts t under the watchdog, which starts with the first connection.
func (f *Front) watch(t *wsTransport) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live[t] = struct{}{}
	if !f.watching {
		f.watching = true
		recovery.Go(f.log, "watch agent connections", f.watchdog)
	}
}

// unwatch takes t from the watchdog's care.
func (f *Front) unwatch(t *wsTransport) {
	f.mu.Lock()
	delete(f.live, t)
	f.mu.Unlock()
}

// watchdog closes, every half heartbeat, the connections whose agent sent
// nothing for two heartbeats: the SDKs ping every heartbeat, so such an
// agent is dead, or cut off, or too stuck to serve calls. It runs until
// Close or the end of Options.Context.
func (f *Front) watchdog() {
	hb := f.opts.Heartbeat
	tick := time.NewTicker(hb / 2)
	defer tick.Stop()
	for {
		var now time.Time
		select {
		case <-f.opts.Context.Done():
			return
		case <-f.stop:
			return
		case now = <-tick.C:
		}
		var dead []*wsTransport
		f.mu.Lock()
		for t := range f.live {
			if t.silent(now) > 2*hb {
				dead = append(dead, t)
			}
		}
		f.mu.Unlock()
		for _, t := range dead {
			t.log.Warn("agent sent nothing, not even a ping, for two heartbeats; closing its connection", "heartbeat", hb)
			t.ws.CloseNow()
		}
	}
}
