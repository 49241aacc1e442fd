package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/gateway"
)

// hostRequest sends a request to the gateway with the given Host header.
func hostRequest(t *testing.T, e *env, method, path, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(initializeBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	req.Header.Set("Authorization", "Bearer "+e.clientKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// Requests naming a host the gateway does not answer to are refused on
// every path, with a sentence naming the flag.
func TestHostRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want := `This gateway does not answer to the host "evil.example". If it should, add it to --allowed-hosts (env SPACEFIX_ALLOWED_HOSTS).`
	for _, r := range []struct{ method, path string }{{"GET", "/healthz"}, {"POST", "/mcp"}, {"GET", "/"}, {"GET", "/login"}, {"POST", agentproto.RegisterPath}, {"GET", agentproto.ConnectPath}} {
		if code, body := hostRequest(t, e, r.method, r.path, "evil.example"); code != http.StatusMisdirectedRequest || body != want {
			t.Errorf("%s %s with Host evil.example: %d %q, want 421 %q", r.method, r.path, code, body, want)
		}
	}
	// The refusals show in the metrics, by status code.
	wantMetric(t, e.scrape(e.adminToken()), 6, "spacefix_http_responses_total", "code=421")
	_, port, _ := strings.Cut(e.gw.Addr(), ":")
	for _, host := range []string{e.gw.Addr(), "localhost:" + port, "LOCALHOST", "[::1]:" + port} {
		if code, _ := hostRequest(t, e, "GET", "/healthz", host); code != http.StatusOK {
			t.Errorf("GET /healthz with Host %s: %d, want 200", host, code)
		}
	}
}

// --allowed-hosts replaces the defaults; the public URL's host is allowed
// by default.
func TestHostAllowedList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withConfig(func(c *gateway.Config) { c.AllowedHosts = []string{"gw.example", "Other.example:443"} }))
	for host, want := range map[string]int{
		"gw.example": 200, "gw.example:8080": 200, "other.example": 200, e.gw.Addr(): 421, "evil.example": 421,
	} {
		if code, _ := hostRequest(t, e, "GET", "/healthz", host); code != want {
			t.Errorf("Host %s: %d, want %d", host, code, want)
		}
	}
	// An allowed host reaches /mcp over a loopback connection too, as
	// behind a local proxy.
	if code, body := hostRequest(t, e, "POST", "/mcp", "gw.example"); code != http.StatusOK {
		t.Errorf("POST /mcp with an allowed Host: %d %s, want 200", code, body)
	}
	p := newEnv(t, withConfig(func(c *gateway.Config) { c.PublicURL = "https://mcp.example.com" }))
	p.url = "http://" + p.gw.Addr()
	for host, want := range map[string]int{"mcp.example.com": 200, p.gw.Addr(): 200, "evil.example": 421} {
		if code, _ := hostRequest(t, p, "GET", "/healthz", host); code != want {
			t.Errorf("with a public URL, Host %s: %d, want %d", host, code, want)
		}
	}
}
