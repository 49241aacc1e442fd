package e2e

import (
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/gateway"
)

// TestPerPersonConnectCannotStart (issue 32, item 14): a front started
// without --upstream-allow-loopback cannot start connecting an account at
// a remote on loopback. The person reads that connecting could not start;
// the operator's log says why at WARN, and which flag to set.
func TestPerPersonConnectCannotStart(t *testing.T) {
	t.Parallel()
	w := newPPWorld(t, ppSetup{config: func(c *gateway.Config) { c.UpstreamAllowLoopback = false }})
	alice := w.person("alice", true)
	status, _, page := browse(t, w.connectURL(), alice.front.session)
	want := html.EscapeString(fmt.Sprintf("The gateway could not start connecting your %s account for up. Try again in a moment; if it keeps failing, the gateway's log says why.", w.host))
	if status != http.StatusBadGateway || !strings.Contains(page, "Could not start connecting") || !strings.Contains(page, want) {
		t.Errorf("GET /connect with the remote on loopback = %d; want 502 saying %q\n%s", status, want, page)
	}
	var line string
	for _, l := range strings.Split(w.frontLogs.String(), "\n") {
		if strings.Contains(l, `msg="upstream connect: could not start"`) {
			line = l
		}
	}
	for _, part := range []string{
		"level=WARN", "host=" + w.host, "user=alice@example.com",
		`the upstream address 127.0.0.1 is loopback; the gateway dials one only with --upstream-allow-loopback"`,
		`hint="to reach a remote or authorization server on this machine (development, tests), start the gateway with --upstream-allow-loopback (env SPACEFIX_UPSTREAM_ALLOW_LOOPBACK=true)"`,
	} {
		if !strings.Contains(line, part) {
			t.Errorf("the front's log line of the connect that could not start lacks %s:\n%s", part, line)
		}
	}
}
