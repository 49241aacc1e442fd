package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/gateway"
)

// The gateway that holds 2025 sessions takes the streams another gateway
// forwards to it however many there are: the peer's connections come
// from one address, and the per-address cap (2 here) leaves the other
// gateways on the bus out, as it does trusted proxies. Before, the third
// forwarded stream was refused with 429.
func TestClusterForwardedStreamsUncapped(t *testing.T) {
	t.Parallel()
	bus := startNATS(t)
	a := newEnv(t, withConfig(func(c *gateway.Config) {
		c.Bus, c.BusHeartbeat = bus, 250*time.Millisecond
		c.MaxConnsPerAddr = 2
	}))
	b := a.sibling()
	const streams = 4
	var sessions []*rawSession
	for range streams {
		s := a.newRawSession(a.clientKey)
		s.client.CloseIdleConnections() // only the streams stay open
		sessions = append(sessions, s)
	}
	open := func(s *rawSession) int {
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/mcp", nil)
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+a.clientKey)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		tr := &http.Transport{}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			cancel()
			t.Fatalf("GET stream through the other gateway: %v", err)
		}
		t.Cleanup(func() { cancel(); resp.Body.Close(); tr.CloseIdleConnections() })
		if resp.StatusCode != http.StatusOK {
			cancel()
		}
		return resp.StatusCode
	}
	// The first one once the gateways know each other.
	waitFor(t, "the other gateway to forward the first session's stream", func() bool { return open(sessions[0]) == http.StatusOK })
	for i, s := range sessions[1:] {
		if code := open(s); code != http.StatusOK {
			t.Errorf("forwarded stream %d of %d: HTTP %d, want 200", i+2, streams, code)
		}
	}
}
