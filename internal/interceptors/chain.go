// Package interceptors runs a project's interceptor servers (SEP-1763,
// the MCP interceptors extension; docs/policy.md) on the events of its
// calls: each server is an MCP server offering interceptors/list and
// interceptor/invoke; its validators may block an event, its mutators
// may rewrite the payload.
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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/policy"
)

// Options are what a chain needs from the gateway.
type Options struct {
	HTTPClient *http.Client // dials under the gateway's egress policy
	Log        *slog.Logger
	Version    string // the gateway's, in the client's implementation info
}

// Chain is the interceptor servers of one policy version.
type Chain struct {
	opts    Options
	servers []*server
}

// server is one interceptor server of the policy.
type server struct {
	entry  policy.Interceptor
	label  string // the entry's name, else its URL
	client *mcp.Client

	sessMu  sync.Mutex
	session *mcp.ClientSession

	listMu  sync.Mutex
	infos   []Info
	listed  bool
	lastTry time.Time
	lastErr error
}

// retryAfter is how long a server that could not be listed is left
// alone before the next event tries again.
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
		label := e.Name
		if label == "" {
			label = e.URL
		}
		cl := mcp.NewClient(&mcp.Implementation{Name: "spacefix-gateway", Version: opts.Version}, nil)
		if err := mcp.AddSendingCustomMethod[*ListParams, *ListResult](cl, MethodList); err != nil {
			panic(err) // only for a standard method's name
		}
		if err := mcp.AddSendingCustomMethod[*InvokeParams, *InvokeResult](cl, MethodInvoke); err != nil {
			panic(err)
		}
		c.servers = append(c.servers, &server{entry: e, label: label, client: cl})
	}
	return c
}

// Close ends the chain's sessions.
func (c *Chain) Close() {
	for _, s := range c.servers {
		s.sessMu.Lock()
		if s.session != nil {
			s.session.Close()
			s.session = nil
		}
		s.sessMu.Unlock()
	}
}

// Discover lists every server's interceptors (when the policy changes),
// and returns what could not be listed.
func (c *Chain) Discover(ctx context.Context) []error {
	var errs []error
	for _, s := range c.servers {
		if _, err := s.list(ctx, c.opts, true); err != nil {
			errs = append(errs, fmt.Errorf("interceptor server %s: %w", s.label, err))
		}
	}
	return errs
}

// list returns s's interceptors, listing them first if needed (or if
// force), at most once per retryAfter after a failure.
func (s *server) list(ctx context.Context, opts Options, force bool) ([]Info, error) {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	if s.listed && !force {
		return s.infos, nil
	}
	if !force && s.lastErr != nil && time.Since(s.lastTry) < retryAfter {
		return nil, s.lastErr
	}
	s.lastTry = time.Now()
	ctx, cancel := context.WithTimeout(ctx, max(s.entry.TimeoutOf(), 5*time.Second))
	defer cancel()
	res, err := s.do(ctx, opts, func(cs *mcp.ClientSession) (any, error) {
		return mcp.CallCustomMethod[*ListParams, *ListResult](ctx, cs, MethodList, &ListParams{})
	})
	if err != nil {
		s.lastErr = err
		return nil, err
	}
	s.infos, s.listed, s.lastErr = res.(*ListResult).Interceptors, true, nil
	return s.infos, nil
}

// do runs f on s's session, connecting first if there is none, and
// once more on a new session if the old one broke (the server
// restarted). Calls run side by side on one session.
func (s *server) do(ctx context.Context, opts Options, f func(*mcp.ClientSession) (any, error)) (any, error) {
	for attempt := 0; ; attempt++ {
		cs, err := s.sessionFor(ctx, opts)
		if err != nil {
			return nil, err
		}
		res, err := f(cs)
		if err == nil || attempt > 0 || ctx.Err() != nil || !brokenSession(err) {
			return res, err
		}
		s.sessMu.Lock()
		if s.session == cs {
			s.session.Close()
			s.session = nil
		}
		s.sessMu.Unlock()
	}
}

// sessionFor returns s's session, connecting if there is none.
func (s *server) sessionFor(ctx context.Context, opts Options) (*mcp.ClientSession, error) {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if s.session == nil {
		t := &mcp.StreamableClientTransport{Endpoint: s.entry.URL, HTTPClient: withHeaders(opts.HTTPClient, s.entry.Headers),
			DisableStandaloneSSE: true} // the gateway awaits no notifications from it
		cs, err := s.client.Connect(ctx, t, nil)
		if err != nil {
			return nil, err
		}
		s.session = cs
	}
	return s.session, nil
}

// brokenSession reports whether err says the session is gone (the
// server restarted), as opposed to an error the interceptor answered.
func brokenSession(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "session not found") || strings.Contains(msg, "connection closed") ||
		strings.Contains(msg, "EOF") || strings.Contains(msg, "connection refused")
}

// withHeaders returns a client that adds h to every request.
func withHeaders(c *http.Client, h map[string]string) *http.Client {
	if len(h) == 0 {
		return c
	}
	cc := *c
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cc.Transport = headerTransport{base: base, h: h}
	return &cc
}

type headerTransport struct {
	base http.RoundTripper
	h    map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
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
// failOpen yields an error that blocks the event.
func (c *Chain) hookedOn(ctx context.Context, event, phase string) (muts, vals []hooked, down *server, err error) {
	for _, s := range c.servers {
		infos, err := s.list(ctx, c.opts, false)
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
