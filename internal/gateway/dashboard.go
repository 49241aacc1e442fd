package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/spacefix/spacefix/internal/dashboard"
	"github.com/spacefix/spacefix/internal/users"
)

// pruneEvery is how often old call log records are deleted.
const pruneEvery = time.Hour

// mountDashboard serves the dashboard and the admin API at the root of mux
// (everything the MCP and agent endpoints do not claim).
func (g *Gateway) mountDashboard(mux *http.ServeMux) {
	mux.Handle("/", dashboard.New(dashboard.Options{
		Store: g.store, Registry: g.reg, Changes: g.changes, BaseURL: g.URL,
		Context: g.ctx, Logger: g.log, Version: g.cfg.Version,
		CallLogHealth: g.calls.Health, OAuth: g.oauth, AuditRetention: g.cfg.AuditRetention, Tasks: g.tasks,
		Identity: g.identity, Upstream: g.upstream,
		Interceptors: g.front.InterceptorStatus, // what this gateway found at them
	}))
}

// startPruning prunes the call log and the audit log in the background for as long as the
// gateway runs (Start calls it).
func (g *Gateway) startPruning() {
	g.conns.Add(1) // Shutdown waits for it before closing the store
	go func() {
		defer g.conns.Done()
		g.pruneCalls(g.cfg.LogRetention)
	}()
}

// pruneCalls deletes call log records older than retention, now and every
// pruneEvery, until the gateway closes.
func (g *Gateway) pruneCalls(retention time.Duration) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		if g.oauth != nil {
			if n, err := g.oauth.Prune(g.ctx); err != nil && g.ctx.Err() == nil {
				g.log.Warn("prune expired OAuth tokens", "err", err)
			} else if n > 0 {
				g.log.Info("pruned expired OAuth tokens", "tokens", n)
			}
		}
		n, err := g.store.PruneCalls(g.ctx, time.Now().Add(-retention))
		switch {
		case err != nil && g.ctx.Err() == nil:
			g.log.Warn("prune call log", "err", err)
		case n > 0:
			g.log.Info("pruned call log", "records", n, "olderThan", retention)
		}
		n, err = g.store.PruneRequests(g.ctx, time.Now())
		switch {
		case err != nil && g.ctx.Err() == nil:
			g.log.Warn("prune request ids", "err", err)
		case n > 0:
			g.log.Info("pruned request ids past their window", "records", n)
		}
		n, err = g.store.PruneAudit(g.ctx, time.Now().Add(-g.cfg.AuditRetention))
		switch {
		case err != nil && g.ctx.Err() == nil:
			g.log.Warn("prune audit log", "err", err)
		case n > 0:
			g.log.Info("pruned audit log", "entries", n, "olderThan", g.cfg.AuditRetention)
		}
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SetupURL returns a one-time link for the first admin to set a password,
// while the store has no dashboard user; "" once someone has one. serve
// prints it at start.
func (g *Gateway) SetupURL(ctx context.Context) (string, error) {
	path, err := users.SetupPath(ctx, g.store)
	if err != nil || path == "" {
		return "", err
	}
	return g.URL() + path, nil
}
