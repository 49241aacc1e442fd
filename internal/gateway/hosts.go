package gateway

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// allowedHosts returns the host names requests may name in Host, lower
// case and without ports; nil allows any. addr is the address the gateway
// listens on.
func allowedHosts(cfg Config, addr string) map[string]bool {
	if len(cfg.AllowedHosts) > 0 {
		m := map[string]bool{}
		for _, h := range cfg.AllowedHosts {
			h = strings.ToLower(strings.TrimSpace(h))
			if h == "*" {
				return nil
			}
			if h != "" {
				m[hostOnly(h)] = true
			}
		}
		return m
	}
	m := map[string]bool{}
	host, _, _ := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	switch {
	case host == "" || (ip != nil && ip.IsUnspecified()):
		// Every local address, as a client on the network may use any.
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					m[n.IP.String()] = true
				}
			}
		}
		if name, err := os.Hostname(); err == nil {
			m[strings.ToLower(name)] = true
		}
		fallthrough
	case ip != nil && ip.IsLoopback(), host == "localhost":
		for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
			m[h] = true
		}
	default:
		m[strings.ToLower(host)] = true
	}
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Hostname() != "" {
		m[strings.ToLower(u.Hostname())] = true
	}
	return m
}

// hostOnly drops the port and the brackets of an IPv6 literal.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return strings.Trim(h, "[]")
}

// checkHost refuses requests whose Host is not one of allowed, on every
// path: a page on another site that points a name of its own at this
// gateway (DNS rebinding) must not reach the dashboard or the MCP endpoint
// with the user's cookies or a local address.
func checkHost(next http.Handler, allowed map[string]bool) http.Handler {
	if allowed == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed[strings.ToLower(hostOnly(r.Host))] {
			http.Error(w, fmt.Sprintf("This gateway does not answer to the host %q. If it should, add it to --allowed-hosts (env SPACEFIX_ALLOWED_HOSTS).", trimHost(r.Host)), http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func trimHost(h string) string {
	if len(h) > 100 {
		h = h[:100] + "…"
	}
	return strings.ToValidUTF8(h, "?")
}
