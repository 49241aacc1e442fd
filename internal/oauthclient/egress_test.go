package oauthclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/spacefix/spacefix/internal/egress"
	"github.com/spacefix/spacefix/internal/oauthclient"
)

// hosted serves the named hosts from handlers in memory, as if they were
// public servers, and sends every other request out through the egress
// policy's transport: what a remote's metadata names is dialled under the
// policy, whatever the remote said.
type hosted struct {
	hosts map[string]http.Handler
	out   http.RoundTripper
}

func (h hosted) RoundTrip(r *http.Request) (*http.Response, error) {
	if hd, ok := h.hosts[r.URL.Host]; ok {
		rec := httptest.NewRecorder()
		hd.ServeHTTP(rec, r)
		return rec.Result(), nil
	}
	return h.out.RoundTrip(r)
}

func jsonOK(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// publicRemote is a public MCP server at remote.example whose 401 names
// its resource metadata at prm, and whose metadata names the
// authorization server issuer.
func publicRemote(prm, issuer string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata=%q`, prm))
		http.Error(w, "sign in", http.StatusUnauthorized)
	})
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		jsonOK(w, map[string]any{"resource": "https://remote.example/mcp", "authorization_servers": []string{issuer}})
	})
	return mux
}

// network is the test's view of the world beyond the in-memory hosts:
// names in dns resolve as a public DNS would answer for a hostile remote,
// every dial is checked by the policy, and the refusals are recorded. An
// address of dns the policy lets through is dialled at closed, a closed
// loopback port, so that the test reaches no real network.
type network struct {
	dns     map[string]string // host → IP
	closed  string            // host:port nobody listens on
	mu      sync.Mutex
	refused []string
}

func newNetwork(t *testing.T, dns map[string]string) *network {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	return &network{dns: dns, closed: closed}
}

func (n *network) transport(p egress.Policy) *http.Transport {
	d := p.Dialer()
	t := p.Transport()
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		var c net.Conn
		if ip, ok := n.dns[host]; ok {
			if err = p.CheckAddress(net.JoinHostPort(ip, port)); err == nil {
				c, err = (&net.Dialer{}).DialContext(ctx, network, n.closed)
			}
		} else {
			c, err = d.DialContext(ctx, network, addr)
		}
		if r := egress.RefusalIn(err); r != nil {
			n.mu.Lock()
			n.refused = append(n.refused, r.Addr.String())
			n.mu.Unlock()
		}
		return c, err
	}
	return t
}

func (n *network) refusals() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.refused...)
}

// TestDiscoverUnderEgress (issue 32, item 18): a public remote's metadata
// names an authorization server whose name resolves to a link-local,
// private or loopback address: it is refused at the dial, before any
// byte goes there; with the operator's leave (--upstream-allow-loopback,
// --upstream-allow-private) the same discovery dials it.
func TestDiscoverUnderEgress(t *testing.T) {
	var hits atomic.Int32
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/.well-known/oauth-authorization-server" {
			jsonOK(w, map[string]any{"issuer": "http://" + r.Host, "authorization_endpoint": "http://" + r.Host + "/authorize",
				"token_endpoint": "http://" + r.Host + "/token", "registration_endpoint": "http://" + r.Host + "/register",
				"code_challenge_methods_supported": []string{"S256"}})
			return
		}
		http.NotFound(w, r)
	}))
	defer local.Close()

	const resource = "https://remote.example/mcp"
	loose := egress.Policy{AllowLoopback: true}
	for _, c := range []struct {
		name, issuer, ip string
		policy           egress.Policy
		want             egress.Kind // "": dialled
	}{
		{"link-local", "https://metadata.evil.example", "169.254.169.254", loose, egress.KindLinkLocal},
		{"private", "https://intranet.evil.example", "10.1.2.3", loose, egress.KindPrivate},
		{"private IPv6", "https://ula.evil.example", "fd00::7", loose, egress.KindPrivate},
		{"shared address space", "https://cgnat.evil.example", "100.64.0.9", loose, egress.KindPrivate},
		{"loopback", local.URL, "", egress.Policy{}, egress.KindLoopback},
		{"loopback allowed", local.URL, "", loose, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			hits.Store(0)
			n := newNetwork(t, map[string]string{})
			if c.ip != "" {
				n.dns[strings.TrimPrefix(c.issuer, "https://")] = c.ip
			}
			out := n.transport(c.policy)
			defer out.CloseIdleConnections()
			hc := &http.Client{Transport: hosted{hosts: map[string]http.Handler{
				"remote.example": publicRemote("https://remote.example/.well-known/oauth-protected-resource/mcp", c.issuer),
			}, out: out}}
			challenges, unauthorized, err := oauthclient.Probe(t.Context(), hc, resource)
			if err != nil || !unauthorized {
				t.Fatalf("Probe = %v, %v; want a 401", unauthorized, err)
			}
			srv, err := oauthclient.Discover(t.Context(), hc, resource, challenges, oauthclient.DiscoverOptions{})
			if c.want == "" {
				if err != nil || srv.Issuer != local.URL || hits.Load() == 0 {
					t.Errorf("Discover = %+v, %v (%d requests at it); want issuer %s", srv, err, hits.Load(), local.URL)
				}
				return
			}
			r := egress.RefusalIn(err)
			if r == nil || r.Kind != c.want {
				t.Errorf("Discover with the authorization server at %s = %+v, %v; want it refused as %s", c.issuer, srv, err, c.want)
			}
			if got := n.refusals(); len(got) == 0 || (c.ip != "" && got[0] != c.ip) {
				t.Errorf("refused dials = %v; want %s's", got, c.issuer)
			}
			if hits.Load() != 0 {
				t.Errorf("the loopback authorization server got %d requests; want none", hits.Load())
			}
		})
	}
}

// TestRegisterUnderEgress: a public authorization server whose metadata
// names a registration endpoint at a private address gets no request
// there; listed with --upstream-allow-private, the dial is let through.
func TestRegisterUnderEgress(t *testing.T) {
	for _, c := range []struct {
		name    string
		policy  egress.Policy
		refused bool
	}{
		{"strict", egress.Policy{}, true},
		{"listed", egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/24")}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The registration endpoint resolves to 192.168.0.10.
			n := newNetwork(t, map[string]string{"reg.as.example": "192.168.0.10"})
			out := n.transport(c.policy)
			defer out.CloseIdleConnections()
			hc := &http.Client{Transport: hosted{hosts: map[string]http.Handler{
				"remote.example": publicRemote("https://remote.example/.well-known/oauth-protected-resource/mcp", "https://as.example"),
				"as.example": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path != "/.well-known/oauth-authorization-server" {
						http.NotFound(w, r)
						return
					}
					jsonOK(w, map[string]any{"issuer": "https://as.example", "authorization_endpoint": "https://as.example/authorize",
						"token_endpoint": "https://as.example/token", "registration_endpoint": "https://reg.as.example/register",
						"code_challenge_methods_supported": []string{"S256"}})
				}),
			}, out: out}}
			srv, err := oauthclient.Discover(t.Context(), hc, "https://remote.example/mcp", nil, oauthclient.DiscoverOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = oauthclient.Register(t.Context(), hc, srv, oauthclient.RegisterOptions{RedirectURI: "https://gw.example/upstream/callback", ClientName: "test"})
			if err == nil {
				t.Fatalf("Register at a private registration endpoint succeeded")
			}
			if got := n.refusals(); c.refused != (len(got) == 1 && got[0] == "192.168.0.10") {
				t.Errorf("refused dials = %v; want 192.168.0.10 refused: %v", got, c.refused)
			}
		})
	}
}
