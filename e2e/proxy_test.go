package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/dashboard"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/users"
)

// behindProxy trusts the forwarded headers of 127.0.0.1, as
// `spacefix serve --trusted-proxies 127.0.0.1/32` behind a local nginx.
func behindProxy(c *gateway.Config) { c.TrustedProxies = []string{"127.0.0.1/32"} }

// forwarded sends a request as a proxy would, with the given
// X-Forwarded-* headers ("" leaves one out), and returns the response with
// its body read.
func forwarded(t *testing.T, method, u, xff, proto string, form url.Values, h http.Header) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	if proto != "" {
		req.Header.Set("X-Forwarded-Proto", proto)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// signIn tries a dashboard sign-in as coming from the client address xff.
func signIn(t *testing.T, e *env, xff, proto, email, password string) (*http.Response, string) {
	t.Helper()
	return forwarded(t, http.MethodPost, e.url+"/login", xff, proto, url.Values{"email": {email}, "password": {password}, "next": {"/"}}, nil)
}

const tooManySignIns = "Too many sign-in attempts. Try again in"

// Behind a trusted proxy, a password guesser uses up the sign-in limit of
// its own address only; without --trusted-proxies the header is ignored and
// every request counts against the one peer address.
func TestProxySignInLimitPerForwardedAddress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		config         func(*gateway.Config)
		otherIsLimited bool
	}{
		{"trusted", behindProxy, false},
		{"not trusted", func(*gateway.Config) {}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, withConfig(tc.config))
			for i := range 20 { // the per-address limit; another email each, so the per-email one stays clear
				resp, _ := signIn(t, e, "203.0.113.7", "", fmt.Sprintf("guess%d@example.com", i), "wrong")
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("attempt %d: %d, want 401", i+1, resp.StatusCode)
				}
			}
			resp, page := signIn(t, e, "203.0.113.7", "", "guess20@example.com", "wrong")
			if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(page, tooManySignIns) {
				t.Fatalf("21st attempt from the guesser: %d, want 429 %q", resp.StatusCode, tooManySignIns)
			}
			resp, page = signIn(t, e, "203.0.113.8", "", "someone@example.com", "wrong")
			limited := resp.StatusCode == http.StatusTooManyRequests && strings.Contains(page, tooManySignIns)
			if limited != tc.otherIsLimited {
				t.Errorf("another address's first attempt: %d (limited %v), want limited %v", resp.StatusCode, limited, tc.otherIsLimited)
			}
		})
	}
}

// The audit log records the client the trusted proxy names, and the peer
// when the proxy is not trusted.
func TestProxyAuditRecordsForwardedAddress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		config func(*gateway.Config)
		want   string
	}{
		{"trusted", behindProxy, "203.0.113.7"},
		{"not trusted", func(*gateway.Config) {}, "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, withConfig(tc.config))
			h := http.Header{"Authorization": {"Bearer " + e.adminToken()}, "Content-Type": {"application/json"}}
			req, err := http.NewRequest(http.MethodPost, e.url+"/api/tokens", strings.NewReader(`{"name":"ci"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = h
			req.Header.Set("X-Forwarded-For", "198.51.100.1, 203.0.113.7")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("POST /api/tokens: %d", resp.StatusCode)
			}
			entries, err := e.store.Audit(context.Background(), store.AuditFilter{ProjectID: 0, Action: "token.create"})
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 || entries[0].Addr != tc.want {
				t.Fatalf("audit entries %+v, want one from %s", entries, tc.want)
			}
		})
	}
}

// X-Forwarded-Proto: https from a client that is not a trusted proxy does
// not change the OAuth resource and issuer the gateway publishes; from a
// trusted proxy it does.
func TestProxyForwardedProtoNeedsTrust(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		config func(*gateway.Config)
		scheme string
	}{
		{"trusted", behindProxy, "https://"},
		{"not trusted", func(*gateway.Config) {}, "http://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, withConfig(tc.config))
			host := strings.TrimPrefix(e.url, "http://")
			var meta struct {
				Resource             string   `json:"resource"`
				AuthorizationServers []string `json:"authorization_servers"`
			}
			resp, body := forwarded(t, http.MethodGet, e.url+"/.well-known/oauth-protected-resource/mcp", "", "https", nil, nil)
			if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &meta) != nil {
				t.Fatalf("resource metadata: %d %s", resp.StatusCode, body)
			}
			if want := tc.scheme + host + "/mcp"; meta.Resource != want {
				t.Errorf("resource = %q, want %q", meta.Resource, want)
			}
			if want := []string{tc.scheme + host}; fmt.Sprint(meta.AuthorizationServers) != fmt.Sprint(want) {
				t.Errorf("authorization_servers = %q, want %q", meta.AuthorizationServers, want)
			}
			var server struct {
				Issuer string `json:"issuer"`
			}
			resp, body = forwarded(t, http.MethodGet, e.url+"/.well-known/oauth-authorization-server", "", "https", nil, nil)
			if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &server) != nil {
				t.Fatalf("server metadata: %d %s", resp.StatusCode, body)
			}
			if want := tc.scheme + host; server.Issuer != want {
				t.Errorf("issuer = %q, want %q", server.Issuer, want)
			}
		})
	}
}

// The session cookie is Secure when the browser reached the gateway over
// https: by a trusted proxy's word or an https public URL, never by a
// client's own X-Forwarded-Proto over plain http.
func TestProxySessionCookieSecure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		config func(*gateway.Config)
		proto  string
		secure bool
	}{
		{"plain http, no proxy", func(*gateway.Config) {}, "", false},
		{"client claims https, not trusted", func(*gateway.Config) {}, "https", false},
		{"trusted proxy says https", behindProxy, "https", true},
		{"trusted proxy says http", behindProxy, "http", false},
		{"https public url", func(c *gateway.Config) { c.PublicURL = "https://mcp.example.com" }, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, withConfig(tc.config))
			url := "http://" + e.gw.Addr()
			if _, err := e.store.CreateUser(context.Background(), store.User{Email: "ada@example.com", Admin: true}, users.HashPassword("correct horse")); err != nil {
				t.Fatal(err)
			}
			resp, body := forwarded(t, http.MethodPost, url+"/login", "203.0.113.7", tc.proto,
				map[string][]string{"email": {"ada@example.com"}, "password": {"correct horse"}, "next": {"/"}}, nil)
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("sign in: %d %s", resp.StatusCode, body)
			}
			var cookie *http.Cookie
			for _, c := range resp.Cookies() {
				if c.Name == dashboard.SessionCookieName(e.gw.URL()) {
					cookie = c
				}
			}
			if cookie == nil {
				t.Fatalf("no session cookie in %q", resp.Header.Values("Set-Cookie"))
			}
			if cookie.Secure != tc.secure {
				t.Errorf("session cookie Secure = %v, want %v (Set-Cookie %q)", cookie.Secure, tc.secure, resp.Header.Get("Set-Cookie"))
			}
		})
	}
}
