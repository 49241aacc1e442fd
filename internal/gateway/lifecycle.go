package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// The gateway's life, caddy's way: [New] builds and validates every part
// and starts nothing; [Gateway.Start] starts the parts in one order and
// rolls back what started if one fails; [Gateway.Shutdown] stops them in
// the reverse order, in the phases a graceful stop needs. Each part owns
// its goroutines: Start starts them, Close (or the phases of Shutdown)
// ends them and waits.

const (
	// farewellWait is how long, after goodbye, the answers of the calls
	// it failed get to reach their clients and the agents get to read it
	// and close (as long as an agent's connection has to take what was
	// queued for it).
	farewellWait = 2 * time.Second
	// flushWait is how long the call log gets to write what is queued,
	// after the grace.
	flushWait = 5 * time.Second
)

// Start starts the gateway's parts in order and returns once it listens,
// so /healthz answers as soon as Start returns. If a part fails to start,
// those that started stop again, in reverse order, and the error says what
// failed; Close then still closes the call log and the store.
func (g *Gateway) Start() error {
	ctx := g.ctx
	var started []func()
	fail := func(err error) error {
		for i := len(started) - 1; i >= 0; i-- {
			started[i]()
		}
		return err
	}

	// 1. The metrics listener (--metrics-addr).
	if err := g.startObs(); err != nil {
		return err
	}
	started = append(started, g.obs.close)
	// 2. The listener: connections wait in its backlog until step 7.
	ln, err := net.Listen("tcp", g.cfg.Addr)
	if err != nil {
		return fail(fmt.Errorf("listen on %s: %w", g.cfg.Addr, err))
	}
	started = append(started, func() { ln.Close() })
	// 3. Background work: this gateway's record in the store, kept fresh
	// (refused while an older gateway uses the store and the two would
	// not share a bus), and the pruner of old records.
	if err := g.claimStore(ctx, advertiseAddr(g.cfg.AdvertiseAddr, ln.Addr())); err != nil {
		return fail(err)
	}
	g.startPruning()
	started = append(started, g.stopBackground) // the store record goes
	// 3b. The identity signing keys: loaded (or made) before any call
	// needs them, then re-read from the store every minute.
	if err := g.startIdentity(ctx); err != nil {
		return fail(err)
	}
	started = append(started, func() { g.identity.Close() })
	// 3c. People's upstream tokens sealed with an older key of the secret
	// key file (a rotation), sealed again with its first key. A value no
	// key opens stays as it is: its person is asked to connect again.
	g.resealUpstream(ctx)
	// 4. The bus (--bus), before the agents: their departures go out
	// over it when they stop.
	if err := g.joinBus(ctx); err != nil {
		return fail(err)
	}
	started = append(started, g.leaveBus)
	// 4b. MCP tasks: their pruning, and the signals for those run here.
	if c := g.cluster.Load(); c != nil {
		g.tasks.UseSignals(c.TaskSignals())
	}
	if err := g.tasks.Start(ctx); err != nil {
		return fail(err)
	}
	started = append(started, func() { g.tasks.Close() })
	// 5. The agent endpoint's watchdog.
	if err := g.agents.Start(ctx); err != nil {
		return fail(err)
	}
	started = append(started, func() { g.agents.Close() })
	// 6. The MCP endpoint: views kept up to date, sessions pinged.
	if err := g.front.Start(ctx); err != nil {
		return fail(err)
	}
	// 7. Serve. The hosts to answer to depend on the address actually
	// bound. Metrics outside the Host check, so refused hosts count too;
	// the edge outermost, so that no handler sees a forwarded header it
	// should not believe.
	g.ln = ln
	g.srv.Handler = g.edge.handler(g.obs.metrics.InFlight(checkHost(g.mux, allowedHosts(g.cfg, ln.Addr().String()))))
	go func() {
		if err := g.srv.Serve(g.limit.listen(ln)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("http server stopped", "err", err)
		}
	}()
	g.log.Info("gateway listening", "addr", ln.Addr().String())
	return nil
}

// Shutdown stops the gateway gracefully, its parts in the reverse order of
// Start: it stops taking new work, lets calls in flight finish within the
// configured grace (or ctx, whichever ends first), tells agents goodbye
// (the calls still running fail with a message that says why), closes the
// sessions, flushes the call log and closes the store. It is safe to call
// twice; later calls wait for the first and return its error.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.closeOnce.Do(func() { g.closeErr = g.shutdown(ctx) })
	return g.closeErr
}

// Close is Shutdown without a deadline of its own: calls in flight get the
// configured ShutdownGrace to finish, as on a first Ctrl-C. To stop sooner,
// call Shutdown with a context that ends sooner.
func (g *Gateway) Close() error {
	return g.Shutdown(context.Background())
}

// shutdown is Shutdown's steps, in order.
func (g *Gateway) shutdown(ctx context.Context) error {
	grace, cancel := context.WithTimeout(ctx, g.cfg.ShutdownGrace)
	defer cancel()
	var errs []error

	// 1. Take no new work: the HTTP server accepts no connection from here
	// on (and waits, in the background, for those open to go idle), and
	// calls that lose their agent say the gateway is shutting down.
	g.front.StartDrain()
	served := make(chan error, 1)
	go func() { served <- g.srv.Shutdown(grace) }()
	// 2. Drain: calls in flight get the grace to finish.
	g.front.WaitIdle(grace)
	// 2b. MCP tasks run on until the grace ends; those still running
	// then fail ("shut down") and their agents' calls are cancelled.
	g.tasks.WaitIdle(grace)
	errs = append(errs, g.tasks.Close())
	// 3. Goodbye: this gateway's agents are told so, and close. Calls
	// still running fail now, with a message that says why; their answers
	// get a moment to reach the clients.
	g.sayGoodbye()
	farewell, cancelFarewell := context.WithTimeout(context.Background(), farewellWait)
	defer cancelFarewell()
	g.front.WaitIdle(farewell)
	// 4. The MCP endpoint: every session ends (and with it its GET stream,
	// which the HTTP server waits for), then its background work.
	errs = append(errs, g.front.Close())
	// 5. The agent endpoint: the agents told goodbye get the rest of the
	// moment to read it and close; the connections still open then end.
	errs = append(errs, g.agents.Shutdown(farewell))
	// 6. The bus, after the agents: their departures went out over it.
	g.leaveBus()
	// 7. Background work: the dashboard's live tails, the store record
	// (removed), the pruner and the identity keys' reload.
	g.stopBackground()
	errs = append(errs, g.identity.Close())
	// 8. The HTTP server, once its connections are idle; what is still
	// open when the grace ends is cut. Then the metrics listener.
	if err := <-served; err != nil {
		g.srv.Close()
	}
	g.obs.close()
	// 9. The call log is flushed, then the store closed, with a fresh
	// context: the grace may have ended, and both must still be closed
	// properly.
	flush, cancelFlush := context.WithTimeout(context.Background(), flushWait)
	defer cancelFlush()
	errs = append(errs, g.calls.Close(flush))
	errs = append(errs, g.store.Close())
	return errors.Join(errs...)
}

// sayGoodbye tells the agents connected to this gateway that it is going
// away and closes their connections; their calls still running fail. The
// replicas other gateways hold are theirs to end.
func (g *Gateway) sayGoodbye() {
	for _, rep := range g.reg.All() {
		if rep.Gateway == "" {
			rep.Conn.Close("gateway shutting down")
		}
	}
}

// stopBackground ends the work that lives in g.ctx and waits for the
// goroutines Start began. It is safe to call twice.
func (g *Gateway) stopBackground() {
	g.cancel()
	g.conns.Wait()
}

// leaveBus leaves the other gateways, with --bus. It is safe to call
// twice, and without a bus.
func (g *Gateway) leaveBus() {
	if c := g.cluster.Load(); c != nil {
		c.Close()
	}
}
