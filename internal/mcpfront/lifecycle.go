package mcpfront

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/spacefix/spacefix/internal/recovery"
)

// The endpoint's life: [New] builds it and starts nothing; [Front.Start]
// subscribes to changes and starts the background work (the resource
// updates' sender, the keepalive pings and the idle sweeps). Shutdown has
// phases, and the gateway runs them in order between its own steps:
// [Front.StartDrain] (calls that lose their agent say the gateway is
// shutting down), [Front.WaitIdle] (calls in flight finish), then, once
// the agents were told goodbye, [Front.Close] (every session ends, the
// background work stops).

// errStarted is Start called twice: a programmer's error.
var errStarted = errors.New("mcpfront: Start called twice")

// Start subscribes the endpoint to Options.Changes and starts its
// background work, which runs until [Front.Close]. It returns once both
// run; ctx bounds the start only. The endpoint serves requests without
// Start, but keeps no view up to date and pings no session.
func (f *Front) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.life.Lock()
	defer f.life.Unlock()
	switch {
	case f.life.closed:
		return errClosed
	case f.life.started:
		return errStarted
	}
	f.life.started = true
	stop := f.life.stop
	f.life.wg.Add(2)
	go func() {
		defer f.life.wg.Done()
		f.tellSubscribers(stop)
	}()
	go func() {
		defer f.life.wg.Done()
		f.keepAlive(f.keepAliveEvery, f.sessionIdle, stop)
	}()
	// After the goroutines: a resource update heard from here on has a
	// sender waiting for it.
	f.life.unsubscribe = f.changes.Subscribe(f.changed)
	return nil
}

// errClosed is Start after Close.
var errClosed = errors.New("mcpfront: Start after Close")

// StartDrain marks the endpoint as shutting down: calls that lose their
// agent from now on say so. It refuses nothing: the HTTP server stops
// taking new connections.
func (f *Front) StartDrain() {
	f.pipe.Drain()
}

// WaitIdle returns nil once no request is in flight (a POST counts until
// its response is written), or ctx's error if ctx ends first. Requests may
// start again after it returns.
func (f *Front) WaitIdle(ctx context.Context) error { return f.inflight.wait(ctx) }

// Close ends every MCP session, so that long-lived streams let the HTTP
// server stop, then ends the subscription to changes and the background
// work and waits for it. It is safe to call twice, and without Start.
func (f *Front) Close() error {
	f.life.Lock()
	first := !f.life.closed
	f.life.closed = true
	unsubscribe := f.life.unsubscribe
	f.life.Unlock()
	if !first {
		f.life.wg.Wait()
		return nil
	}
	f.closeSessions()
	if unsubscribe != nil {
		unsubscribe()
	}
	close(f.life.stop)
	f.life.wg.Wait()
	f.pipe.Close()
	return nil
}

// closeSessions ends every MCP session of every view.
func (f *Front) closeSessions() {
	f.mu.Lock()
	vs := make([]*view, 0, len(f.views))
	for _, v := range f.views {
		vs = append(vs, v)
	}
	f.mu.Unlock()
	for _, v := range vs {
		for s := range v.server.Sessions() {
			recovery.Do(f.log, "close an MCP session", func() { s.Close() })
		}
	}
}

// lifecycle is what Start and Close share.
type lifecycle struct {
	sync.Mutex
	started, closed bool
	unsubscribe     func()        // from the change path; nil before Start
	stop            chan struct{} // closed by Close: the background work ends
	wg              sync.WaitGroup
}

// inFlight counts the requests being served, and lets shutdown wait for
// none without polling. The count is atomic (every POST passes here); the
// lock is taken only when the count reaches zero, and by waiters.
type inFlight struct {
	n    atomic.Int64
	mu   sync.Mutex
	zero chan struct{} // closed when n next reaches zero; nil while nobody waits
}

func (c *inFlight) add() { c.n.Add(1) }

func (c *inFlight) done() {
	if c.n.Add(-1) != 0 {
		return
	}
	c.mu.Lock()
	if c.zero != nil {
		close(c.zero)
		c.zero = nil
	}
	c.mu.Unlock()
}

// wait returns nil once the count is zero, or ctx's error.
func (c *inFlight) wait(ctx context.Context) error {
	for {
		// Under the lock, so that a done that reaches zero after this
		// load finds the channel to close.
		c.mu.Lock()
		if c.n.Load() == 0 {
			c.mu.Unlock()
			return nil
		}
		if c.zero == nil {
			c.zero = make(chan struct{})
		}
		zero := c.zero
		c.mu.Unlock()
		select {
		case <-zero: // a request may have started since: look again
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
