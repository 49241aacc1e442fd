package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ProtocolVersion is the MCP version sessions speak unless a shape says
// otherwise ([Config.Version]).
const ProtocolVersion = "2025-11-25"

// StatelessVersion is the first stateless protocol revision: no
// initialize, no session; every request carries the version.
const StatelessVersion = "2026-07-28"

// Target is one server of the echo tool: direct or through the gateway.
type Target struct {
	Name     string // SideDirect, SideGateway or SideGatewayCached
	Endpoint string // the Streamable HTTP URL
	Key      string // the Bearer token to send; empty for direct

	stop       func() error
	agentCalls atomic.Int64

	mu       sync.Mutex
	sessions []*mcp.ClientSession
	closed   bool
}

// Sessions opens n client sessions on t speaking [ProtocolVersion]. Close
// closes them.
func (t *Target) Sessions(ctx context.Context, n int) ([]*mcp.ClientSession, error) {
	return t.SessionsAt(ctx, n, ProtocolVersion)
}

// SessionsAt opens n client sessions on t speaking version: at
// [StatelessVersion] or later they are go-sdk client sessions without a
// server session (each request stands alone). Close closes them.
func (t *Target) SessionsAt(ctx context.Context, n int, version string) ([]*mcp.ClientSession, error) {
	out := make([]*mcp.ClientSession, 0, n)
	var err error
	labelled(ctx, SideClient, func(ctx context.Context) {
		client := mcp.NewClient(&mcp.Implementation{Name: "spacefix-bench", Version: "1"}, nil)
		for range n {
			tr := &mcp.StreamableClientTransport{Endpoint: t.Endpoint, HTTPClient: httpClient(t.Key)}
			var cs *mcp.ClientSession
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			cs, err = client.Connect(cctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
			cancel()
			if err != nil {
				err = fmt.Errorf("connect to %s: %w", t.Name, err)
				return
			}
			out = append(out, cs)
		}
	})
	t.mu.Lock()
	t.sessions = append(t.sessions, out...)
	t.mu.Unlock()
	return out, err
}

// AgentCalls returns how many calls reached the echo handler of a gateway's
// agent so far; 0 for direct. On the cached gateway it stays at 1 after the
// first call: every other call was a hit.
func (t *Target) AgentCalls() int64 { return t.agentCalls.Load() }

// Close closes t's sessions and stops the target. It is safe to call twice.
func (t *Target) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	ss := t.sessions
	t.mu.Unlock()
	var errs []error
	for _, s := range ss {
		s.Close() // an error here says only that the server went first
	}
	errs = append(errs, t.stop())
	return errors.Join(errs...)
}

// transport is shared by every session of both targets: the same client
// drives both. http.DefaultTransport keeps only 2 idle connections per
// host, which with 16 callers would make the client dial and close
// connections all the time and measure that instead.
var transport = func() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 256
	tr.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return tr
}()

// httpClient sends key as a Bearer token when it is set. Both targets go
// through the same wrapper, so they pay the same client-side cost.
func httpClient(key string) *http.Client {
	return &http.Client{Transport: bearer{key: key, base: transport}}
}

type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.key != "" {
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return b.base.RoundTrip(r)
}
