package gateway

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// forwardedHeaders are the headers a proxy uses to say who its client was
// and how it reached the proxy. From a peer outside Config.TrustedProxies
// they are lies as likely as not, so the edge deletes them all; from a
// trusted one it reads them once and deletes them too. Inner code sees
// only the result: r.RemoteAddr, and X-Forwarded-Proto as the edge sets it.
var forwardedHeaders = []string{
	"Forwarded", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host",
	"X-Forwarded-Port", "X-Real-Ip",
}

// edge decides who a request comes from and whether it came over https,
// for every handler behind it: the dashboard's sign-in limit and session
// cookie, OAuth's per-address limits, issuer and resource, the audit log
// and the logs all read r.RemoteAddr and X-Forwarded-Proto and need not
// know about proxies.
type edge struct {
	trusted     []netip.Prefix
	publicHTTPS bool // the public URL is https: browsers reach us over TLS
}

// parseTrustedProxies parses Config.TrustedProxies: CIDR prefixes or
// single addresses. An error names the entry at fault.
func parseTrustedProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil || a.Zone() != "" {
				return nil, fmt.Errorf("config: trusted proxies: %q is not an address or a CIDR prefix; write for example 127.0.0.1/32,10.0.0.0/8", s)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// trusts reports whether a is one of the trusted proxies.
func (e *edge) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range e.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// handler is the outermost handler. It rewrites the request in place, as
// nothing has seen it yet: from a trusted proxy, r.RemoteAddr becomes the
// client the forwarded headers name; from anyone, the forwarded headers go,
// and X-Forwarded-Proto: https is set when the client reached us over
// https (TLS here, the trusted proxy's word, or an https public URL).
func (e *edge) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		https := r.TLS != nil || e.publicHTTPS
		if len(e.trusted) > 0 {
			if peer, err := netip.ParseAddrPort(r.RemoteAddr); err == nil && e.trusts(peer.Addr()) {
				client, viaHTTPS := e.resolve(r.Header, peer)
				r.RemoteAddr = client.String()
				https = https || viaHTTPS
			}
		}
		for _, h := range forwardedHeaders {
			delete(r.Header, h)
		}
		if https {
			r.Header.Set("X-Forwarded-Proto", "https")
		}
		next.ServeHTTP(w, r)
	})
}

// secureRequest reports whether the client reached the gateway over https,
// as the edge decided.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

// hop is one address of a forwarded chain, with the scheme that hop's
// proxy reports for it ("" if none).
type hop struct {
	addr  netip.AddrPort
	ok    bool // addr parsed; "unknown", "_hidden" and garbage do not
	proto string
}

// resolve returns the client a trusted peer forwards for, and whether that
// client used https. The client is the rightmost address of the chain that
// is not itself a trusted proxy: addresses to its left were written by the
// client or by proxies we do not know, and may be anything. If every
// address is trusted, the leftmost is the client; an address that does not
// parse ends the walk at the last one that did (a trusted proxy wrote it).
//
// X-Forwarded-For is read when present, else RFC 7239 Forwarded; the
// scheme is the rightmost X-Forwarded-Proto (what the peer says), else the
// proto of the Forwarded element the client was taken from.
func (e *edge) resolve(h http.Header, peer netip.AddrPort) (client netip.AddrPort, https bool) {
	client = netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port())
	var chain []hop
	if xff := h.Values("X-Forwarded-For"); len(xff) > 0 {
		chain = xffChain(xff)
	} else {
		chain = forwardedChain(h.Values("Forwarded"))
	}
	proto := ""
	for i := len(chain) - 1; i >= 0; i-- {
		if !chain[i].ok {
			break
		}
		client, proto = chain[i].addr, chain[i].proto
		if !e.trusts(client.Addr()) {
			break
		}
	}
	if xfp := h.Values("X-Forwarded-Proto"); len(xfp) > 0 {
		parts := strings.Split(xfp[len(xfp)-1], ",")
		proto = parts[len(parts)-1]
	}
	return client, strings.EqualFold(strings.TrimSpace(proto), "https")
}

// xffChain parses X-Forwarded-For header lines: addresses, oldest first.
func xffChain(lines []string) []hop {
	var out []hop
	for _, line := range lines {
		for item := range strings.SplitSeq(line, ",") {
			a, ok := parseNode(item)
			out = append(out, hop{addr: a, ok: ok})
		}
	}
	return out
}

// forwardedChain parses RFC 7239 Forwarded header lines: one hop per
// element, its for= node and its proto=.
func forwardedChain(lines []string) []hop {
	var out []hop
	for _, line := range lines {
		for elem := range strings.SplitSeq(line, ",") {
			var hp hop
			for pair := range strings.SplitSeq(elem, ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(pair), "=")
				switch strings.ToLower(k) {
				case "for":
					hp.addr, hp.ok = parseNode(v)
				case "proto":
					hp.proto = strings.Trim(v, `"`)
				}
			}
			out = append(out, hp)
		}
	}
	return out
}

// parseNode parses an address as proxies write it: 192.0.2.1,
// 192.0.2.1:4711, 2001:db8::1, [2001:db8::1]:4711, optionally quoted.
// IPv4-mapped IPv6 addresses become IPv4 and zones are dropped.
func parseNode(s string) (netip.AddrPort, bool) {
	s = strings.Trim(strings.TrimSpace(s), `"`)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port()), true
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
		return netip.AddrPortFrom(a.Unmap().WithZone(""), 0), true
	}
	return netip.AddrPort{}, false
}
