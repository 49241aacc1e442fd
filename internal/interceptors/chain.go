// Package interceptors runs a project's interceptor servers (SEP-1763,
// the MCP interceptors extension; docs/policy.md) on the events of its
// calls: each server is an MCP server offering interceptors/list and
// interceptor/invoke; its validators may block an event, its mutators
// may rewrite the payload. A server is reached at its URL (Streamable
// HTTP, url.go) or, when the policy names a bridged agent of the project,
// through that agent's bridge ([Agents], agent.go).
//
// The gateway sits between two trust boundaries and sends in both
// phases (the request to the agent, the result to the client), so both
// phases run as the SEP's sending side: mutators one after another, by
// priority hint (lower first, then by name), then validators side by
// side on what will be sent. Interceptors in audit mode run in the
// shadow: a blocking verdict or a rewrite is recorded, never applied.
// An interceptor that fails or times out blocks the event (fail closed)
// unless it, or its server's entry in the policy, says failOpen.
package interceptors

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/policy"
)

// Options are what a chain needs from the gateway.
type Options struct {
	HTTPClient *http.Client // dials under the gateway's egress policy
	Log        *slog.Logger
	Version    string // the gateway's, in the client's implementation info
	// Agents carries the requests of the entries that name a bridged agent
	// of the project (policy.Interceptor.Agent); nil: those servers cannot
	// be reached, and block what they hook unless failOpen.
	Agents Agents
}

// Chain is the interceptor servers of one policy version.
type Chain struct {
	opts    Options
	servers []*server
}

// server is one interceptor server of the policy.
type server struct {
	entry policy.Interceptor
	label string // the entry's name, else its URL's host or its agent
	conn  conn

	listMu  sync.Mutex
	infos   []Info
	listed  bool
	listAt  string // conn.state() when listed, or when last tried
	lastTry time.Time
	lastErr error
}

// conn carries the extension's methods to one server. Its methods may be
// called concurrently; close may be called more than once.
type conn interface {
	list(ctx context.Context) ([]Info, error)
	invoke(ctx context.Context, p *InvokeParams) (*InvokeResult, error)
	// state changes when the server's interceptors may have changed
	// without a new policy (a bridged agent connected again): they are
	// listed again then. "" for a server at a URL.
	state() string
	close()
}

// retryAfter is how long a server that could not be listed is left
// alone before the next event tries again (unless its state changed).
const retryAfter = 5 * time.Second

// New returns the chain of entries; it connects to nothing until
// [Chain.Discover] or the first event.
func New(entries []policy.Interceptor, opts Options) *Chain {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	c := &Chain{opts: opts}
	for _, e := range entries {
		s := &server{entry: e, label: Label(e)}
		switch {
		case e.Agent != "":
			s.conn = &agentConn{agents: opts.Agents, name: e.Agent}
		default:
			s.conn = newURLConn(e, opts)
		}
		c.servers = append(c.servers, s)
	}
	return c
}

// hostOf names a server by its URL's host (and port) alone: callers read
// the name in refusals, and the rest of a URL (a path, a query, a user) may
// carry what they must not.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "interceptor server"
	}
	return u.Host
}

// Label is the name of entry e's server in refusals, the call log and
// the operator's views: its name, else its agent, else its URL's host.
func Label(e policy.Interceptor) string {
	switch {
	case e.Name != "":
		return e.Name
	case e.Agent != "":
		return e.Agent
	}
	return hostOf(e.URL)
}

// Close ends the chain's sessions.
func (c *Chain) Close() {
	for _, s := range c.servers {
		s.conn.close()
	}
}

// Discover lists every server's interceptors (when the policy changes),
// and returns what could not be listed.
func (c *Chain) Discover(ctx context.Context) []error {
	var errs []error
	for _, s := range c.servers {
		if _, err := s.list(ctx, true); err != nil {
			errs = append(errs, fmt.Errorf("interceptor server %s: %w", s.label, err))
		}
	}
	return errs
}

// list returns s's interceptors, listing them first if needed (or if
// force, or if the server's state changed since), at most once per
// retryAfter after a failure in the same state.
func (s *server) list(ctx context.Context, force bool) ([]Info, error) {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	state := s.conn.state()
	same := state == s.listAt
	if s.listed && !force && same {
		return s.infos, nil
	}
	if !force && same && s.lastErr != nil && time.Since(s.lastTry) < retryAfter {
		return nil, s.lastErr
	}
	s.lastTry, s.listAt = time.Now(), state
	ctx, cancel := context.WithTimeout(ctx, max(s.entry.TimeoutOf(), 5*time.Second))
	defer cancel()
	infos, err := s.conn.list(ctx)
	if err != nil {
		s.listed, s.lastErr = false, err
		return nil, err
	}
	s.infos, s.listed, s.lastErr = infos, true, nil
	return s.infos, nil
}

// hooked is one interceptor to run on an event.
type hooked struct {
	s        *server
	info     Info
	audit    bool
	failOpen bool
}

func (h hooked) name() string { return h.s.label + "/" + h.info.Name }

// hookedOn returns the interceptors on event in phase: mutators in their
// order, then validators. A server that cannot be listed and is not
// failOpen yields an error that blocks the event; one that is failOpen is
// skipped, and logged.
func (c *Chain) hookedOn(ctx context.Context, event, phase string) (muts, vals []hooked, down *server, err error) {
	for _, s := range c.servers {
		infos, err := s.list(ctx, false)
		if err != nil {
			if s.entry.FailOpen || s.entry.Mode == policy.Audit {
				c.opts.Log.Warn("interceptor server not reachable; skipped (failOpen)", "server", s.label, "err", err)
				continue
			}
			return nil, nil, s, err
		}
		for _, in := range infos {
			if !in.Hook.takes(event, phase) {
				continue
			}
			h := hooked{s: s, info: in, audit: in.Mode == policy.Audit || s.entry.Mode == policy.Audit,
				failOpen: in.FailOpen || s.entry.FailOpen}
			switch in.Type {
			case Mutation:
				muts = append(muts, h)
			case Validation:
				vals = append(vals, h)
			}
		}
	}
	slices.SortStableFunc(muts, func(a, b hooked) int {
		if d := a.info.PriorityHint.of(phase) - b.info.PriorityHint.of(phase); d != 0 {
			return d
		}
		return strings.Compare(a.info.Name, b.info.Name)
	})
	return muts, vals, nil, nil
}
