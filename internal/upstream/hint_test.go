package upstream_test

import (
	"net"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store/teststores"
	"github.com/spacefix/spacefix/internal/upstream"
)

// TestBeginHint (issue 32, item 14): when connecting cannot start, the
// operator's hint says what to change: the flag for a refused address,
// the network for a remote that does not answer.
func TestBeginHint(t *testing.T) {
	st := teststores.SQLite(t)
	f := newFixture(t, st)
	r := newRemote(t)
	box := keyFile(t, secrets.NewKey())
	strict := upstream.New(upstream.Options{Store: st, Box: box, PublicURL: func() string { return public }, Log: quiet})
	loose := newService(st, box, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/mcp"
	l.Close()
	for _, c := range []struct {
		svc            *upstream.Service
		resource, hint string
	}{
		{strict, r.base + "/mcp", "to reach a remote or authorization server on this machine (development, tests), start the gateway with --upstream-allow-loopback (env SPACEFIX_UPSTREAM_ALLOW_LOOPBACK=true)"},
		{loose, "http://169.254.169.254/mcp", "link-local addresses (cloud metadata) are never dialled: give the bridge the remote's routable address, or fix the remote's metadata that names this one"},
		{loose, closed, "the gateway could not connect to " + strings.TrimPrefix(closed, "http://")[:len(l.Addr().String())] + ": check that the remote is up at the bridge's --remote URL and that the gateway's network reaches it (firewall)"},
	} {
		_, err := c.svc.Begin(t.Context(), f.project, f.agentKey, f.ann, c.resource, "")
		if err == nil {
			t.Fatalf("Begin(%s) started", c.resource)
		}
		if got := c.svc.BeginHint(err, c.resource); got != c.hint {
			t.Errorf("BeginHint(%v) =\n%s\nwant\n%s", err, got, c.hint)
		}
	}
}
