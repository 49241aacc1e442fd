package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/metrics"
	"github.com/spacefix/spacefix/internal/users"
)

// Readiness probing: the store's write probe runs at most every
// readyProbeEvery, however often /readyz is asked; a failed call log write
// keeps the gateway unready for failingWindow unless a later write works
// (with no calls coming, nothing else could show the store recovered).
const (
	readyProbeEvery = 2 * time.Second
	readyProbeWait  = 3 * time.Second
	failingWindow   = time.Minute
)

// observability is the gateway's metrics, readiness and profiling.
type observability struct {
	g       *Gateway
	metrics *metrics.Metrics

	srv *http.Server // the --metrics-addr listener; nil without one
	ln  net.Listener

	probeMu  sync.Mutex // one store probe at a time
	probedAt time.Time
	probeErr error
}

func newObservability(g *Gateway) *observability {
	o := &observability{g: g}
	o.metrics = metrics.New(metrics.Options{
		Store:    g.store,
		Agents:   g.agentCounts,
		Sessions: func() map[string]int { return g.front.SessionCounts() },
		Dropped:  func() int64 { return g.calls.Dropped() },
		Bus:      g.busConnected(),
		Buffered: func() int64 { return g.calls.Buffered() },
		Retries:  func() int64 { return g.calls.Retries() },
		CacheHits: func() int64 {
			hits, _, _ := g.front.EarlyStats()
			return hits
		},
	})
	return o
}

// agentCounts counts connected replicas by project.
func (g *Gateway) agentCounts() map[int64]int {
	out := map[int64]int{}
	for _, rep := range g.reg.All() {
		out[rep.ProjectID]++
	}
	return out
}

// mountObs serves /readyz to anyone, /metrics to an admin API token, and
// /debug/pprof/ to an admin API token when Config.Pprof is set.
func (g *Gateway) mountObs(mux *http.ServeMux) {
	mux.HandleFunc("GET /readyz", g.handleReady)
	mux.Handle("GET /metrics", g.adminToken(g.obs.metrics.Handler()))
	if !g.cfg.Pprof {
		mux.Handle("/debug/pprof/", http.NotFoundHandler()) // not the dashboard's sign-in redirect
		return
	}
	pp := http.NewServeMux()
	pp.HandleFunc("/debug/pprof/", pprof.Index)
	pp.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	pp.HandleFunc("/debug/pprof/profile", pprof.Profile)
	pp.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	pp.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/debug/pprof/", g.adminToken(pp))
}

// startObs opens the --metrics-addr listener, if there is one.
func (g *Gateway) startObs() error {
	if g.cfg.MetricsAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", g.cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("listen for metrics on %s: %w", g.cfg.MetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", g.obs.metrics.Handler())
	o := g.obs
	o.ln = ln
	o.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() {
		if err := o.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("metrics server stopped", "err", err)
		}
	}()
	g.log.Info("metrics listening", "addr", ln.Addr().String())
	return nil
}

// MetricsAddr returns the address of the --metrics-addr listener, or ""
// without one.
func (g *Gateway) MetricsAddr() string {
	if g.obs.ln == nil {
		return ""
	}
	return g.obs.ln.Addr().String()
}

// close stops the metrics listener. A scrape has nothing worth waiting for.
func (o *observability) close() {
	if o.srv != nil {
		o.srv.Close()
	}
	// http.Server.Close closes only the listeners Serve has taken: one
	// whose goroutine has not run yet (a Start that fails at once rolls
	// back right after opening it) would stay open until it does.
	if o.ln != nil {
		o.ln.Close()
	}
}

// handleReady answers 200 "ready" while the store takes writes and the
// call log's writes work, else 503 with the reason. A gateway whose bus is
// unreachable serves all the same, and says so after "ready" (see
// busDegraded). /healthz only says the process is alive.
func (g *Gateway) handleReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := g.ready(r.Context()); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready:", err)
		return
	}
	fmt.Fprintln(w, "ready"+g.busDegraded())
}

// ready returns why the gateway is not ready, or nil.
func (g *Gateway) ready(ctx context.Context) error {
	o := g.obs
	o.probeMu.Lock()
	if time.Since(o.probedAt) >= readyProbeEvery {
		pctx, cancel := context.WithTimeout(ctx, readyProbeWait)
		err := g.store.Check(pctx)
		cancel()
		// Said once when the store starts failing, and once when it
		// recovers: /readyz asks every few seconds.
		switch {
		case err != nil && o.probeErr == nil:
			g.log.Error("the store fails its check; the gateway is not ready", "err", err)
		case err == nil && o.probeErr != nil:
			g.log.Info("the store passes its check again")
		}
		o.probeErr = err
		o.probedAt = time.Now()
	}
	err := o.probeErr
	o.probeMu.Unlock()
	if err != nil {
		return err
	}
	if h := g.calls.Health(); h.Failing(time.Now(), failingWindow) {
		return fmt.Errorf("%s; see the gateway's log", h.Problem())
	}
	return nil
}

const msgAdminToken = "Send an admin API token: Authorization: Bearer sfx_admin_…. Make one with: spacefix tokens create"

// msgProjectToken refuses a project token where the whole instance shows:
// metrics name every project, and a heap profile may hold anything.
const msgProjectToken = "This needs an instance admin token; a project API token acts only on its project's admin API. Make one with: spacefix tokens create"

// adminToken lets through requests that carry a live instance admin API
// token.
func (g *Gateway) adminToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, err := users.VerifyAPIToken(r.Context(), g.store, auth.BearerToken(r.Header.Get("Authorization")))
		switch {
		case errors.Is(err, users.ErrUnknownToken):
			w.Header().Set("WWW-Authenticate", `Bearer realm="spacefix admin"`)
			http.Error(w, msgAdminToken, http.StatusUnauthorized)
		case err != nil:
			g.log.Error("check admin API token", "path", r.URL.Path, "err", err)
			http.Error(w, "The gateway could not check the token; its log says why. Try again in a moment.", http.StatusInternalServerError)
		case tok.ProjectID != 0:
			http.Error(w, msgProjectToken, http.StatusForbidden)
		default:
			next.ServeHTTP(w, r)
		}
	})
}
