// Package egress is the one address policy for every dial the gateway
// makes to a server someone else names: a per-person bridged remote, the
// metadata and authorization server that remote points at (internal/upstream,
// internal/oauthclient), and any other upstream fetched by URL (an
// identity provider's metadata and keys). A URL such a server supplies may
// point anywhere, so the rule applies to the address actually dialled,
// after name resolution and on every redirect, not to the URL's text:
//
//   - link-local (169.254.0.0/16, fe80::/10: cloud metadata), unspecified,
//     multicast and reserved addresses: never;
//   - loopback (127.0.0.0/8, ::1): only with [Policy.AllowLoopback]
//     (`--upstream-allow-loopback`);
//   - private ranges (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16,
//     100.64.0.0/10, fc00::/7): only when the remote itself is at a
//     private address ([Policy.ForRemote]) or a prefix of
//     [Policy.AllowPrivate] (`--upstream-allow-private`) holds them;
//   - any other (public) address: allowed.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// Policy is which addresses the gateway may dial. The zero Policy allows
// public addresses only. A Policy is a value: copy it freely.
type Policy struct {
	// AllowLoopback lets loopback addresses be dialled
	// (`--upstream-allow-loopback`: tests and single-machine setups).
	AllowLoopback bool
	// AllowPrivate are private prefixes the operator lets be dialled for
	// any remote (`--upstream-allow-private`); nil: none.
	AllowPrivate []netip.Prefix
	// PrivateRemote lets every private range be dialled: the remote
	// itself is at a private address. [Policy.ForRemote] sets it.
	PrivateRemote bool
}

// Kind says why an address is refused.
type Kind string

// The kinds of refused addresses.
const (
	KindLinkLocal   Kind = "link-local"
	KindLoopback    Kind = "loopback"
	KindPrivate     Kind = "private"
	KindUnspecified Kind = "unspecified"
	KindMulticast   Kind = "multicast"
	KindReserved    Kind = "reserved"
)

// Refused is the error of an address the policy refuses. Its text names
// the address and the rule; [Refused.Hint] says what an operator could
// change.
type Refused struct {
	Addr netip.Addr
	Kind Kind
}

func (e *Refused) Error() string {
	switch e.Kind {
	case KindLoopback:
		return fmt.Sprintf("the upstream address %s is loopback; the gateway dials one only with --upstream-allow-loopback", e.Addr)
	case KindPrivate:
		return fmt.Sprintf("the upstream address %s is private; the gateway dials one only for a remote at a private address itself, or in a range --upstream-allow-private lists", e.Addr)
	}
	return fmt.Sprintf("the upstream address %s is %s; the gateway never dials one", e.Addr, e.Kind)
}

// Hint tells the operator what to change for the address to be dialled,
// or why nothing will.
func (e *Refused) Hint() string {
	switch e.Kind {
	case KindLoopback:
		return "to reach a remote or authorization server on this machine (development, tests), start the gateway with --upstream-allow-loopback (env SPACEFIX_UPSTREAM_ALLOW_LOOPBACK=true)"
	case KindPrivate:
		return fmt.Sprintf("to reach %s, start the gateway with --upstream-allow-private %s (env SPACEFIX_UPSTREAM_ALLOW_PRIVATE; a comma-separated list of CIDR ranges)", e.Addr, netip.PrefixFrom(e.Addr, e.Addr.BitLen()))
	case KindLinkLocal:
		return "link-local addresses (cloud metadata) are never dialled: give the bridge the remote's routable address, or fix the remote's metadata that names this one"
	}
	return "the gateway never dials this kind of address: give the bridge the remote's routable address"
}

// HintOf is the operator's hint of the refusal in err ([RefusalIn]), or
// "" when err is not a refused address.
func HintOf(err error) string {
	if r := RefusalIn(err); r != nil {
		return r.Hint()
	}
	return ""
}

// refusedText finds a [Refused]'s words in an error's text.
var refusedText = regexp.MustCompile(`the upstream address (\S+) is ([a-z-]+);`)

// RefusalIn returns the [Refused] in err's chain, or, since some libraries
// flatten the errors of their HTTP client into text (go-sdk's metadata
// fetches do), the one its text names; nil when there is none.
func RefusalIn(err error) *Refused {
	var r *Refused
	if errors.As(err, &r) {
		return r
	}
	if err == nil {
		return nil
	}
	m := refusedText.FindStringSubmatch(err.Error())
	if m == nil {
		return nil
	}
	ip, perr := netip.ParseAddr(m[1])
	if perr != nil {
		return nil
	}
	return &Refused{Addr: ip, Kind: Kind(m[2])}
}

var (
	// cgnat is the shared address space of carrier-grade NAT (RFC 6598),
	// which providers use inside their networks.
	cgnat = netip.MustParsePrefix("100.64.0.0/10")
	// reserved are IPv4 ranges no remote should be at: "this network",
	// IETF protocol assignments, benchmarking, the future-use block and
	// broadcast.
	reserved = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),
		netip.MustParsePrefix("192.0.0.0/24"),
		netip.MustParsePrefix("198.18.0.0/15"),
		netip.MustParsePrefix("240.0.0.0/4"),
	}
	// nat64 is the well-known NAT64 prefix (RFC 6052): its addresses
	// reach the IPv4 address in their last 32 bits, which the rule checks.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
)

// IsPrivate reports whether ip is in a private range: RFC 1918, RFC 6598
// (100.64.0.0/10) or unique local IPv6 (fc00::/7).
func IsPrivate(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsPrivate() || cgnat.Contains(ip)
}

// classify is the kind of ip the policy has a rule for; "" for a public
// address.
func classify(ip netip.Addr) Kind {
	ip = ip.Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	switch {
	case ip.IsUnspecified():
		return KindUnspecified
	case ip.IsLinkLocalUnicast():
		return KindLinkLocal
	case ip.IsMulticast():
		return KindMulticast
	case ip.IsLoopback():
		return KindLoopback
	case IsPrivate(ip):
		return KindPrivate
	}
	for _, p := range reserved {
		if p.Contains(ip) {
			return KindReserved
		}
	}
	return ""
}

// Check says whether the policy lets ip be dialled: nil, or a [*Refused].
func (p Policy) Check(ip netip.Addr) error {
	ip = ip.Unmap()
	k := classify(ip)
	switch {
	case k == "",
		k == KindLoopback && p.AllowLoopback,
		k == KindPrivate && (p.PrivateRemote || p.listed(ip)):
		return nil
	}
	return &Refused{Addr: ip, Kind: k}
}

func (p Policy) listed(ip netip.Addr) bool {
	for _, pr := range p.AllowPrivate {
		if pr.Contains(ip) {
			return true
		}
	}
	return false
}

// CheckAddress is [Policy.Check] of a dial's address, "host:port" with
// host an IP (as net.Dialer's Control gets it).
func (p Policy) CheckAddress(address string) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("the upstream address %q is not an IP address", host)
	}
	return p.Check(ip)
}

// Control is a net.Dialer Control that refuses what the policy refuses:
// it runs after name resolution, for each address tried.
func (p Policy) Control(_, address string, _ syscall.RawConn) error {
	return p.CheckAddress(address)
}

// ForRemote is the policy for the remote at rawURL and every server it
// names: private ranges are allowed when the remote itself is at a private
// address (every address its host resolves to is private), since its
// authorization server then is most likely in the same network. A host
// that does not resolve gets p as it is (its dial fails anyway).
func (p Policy) ForRemote(ctx context.Context, rawURL string) Policy {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return p
	}
	host := u.Hostname()
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if ips, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host); err != nil {
			return p
		}
	}
	for _, ip := range ips {
		if classify(ip) != KindPrivate {
			return p
		}
	}
	p.PrivateRemote = len(ips) > 0
	return p
}

// Dialer is a net.Dialer that dials under the policy (its Control), for
// a transport of one's own.
func (p Policy) Dialer() *net.Dialer {
	return &net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second, Control: p.Control}
}

// Transport is an http.Transport that dials under the policy and uses no
// proxy: a proxy would be dialled instead of the server, and the rule
// would check the wrong address.
func (p Policy) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = p.Dialer().DialContext
	// Calls reach one remote or interceptor server side by side: keep a
	// connection for each of them, rather than Go's 2 per host, past which
	// every request at a time above two dials anew (and shakes hands anew
	// over TLS).
	t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	return t
}

// MaxIdleConnsPerHost is how many idle connections [Policy.Transport]
// keeps to one host.
const MaxIdleConnsPerHost = 64

// Client is an http.Client on [Policy.Transport] with a 30 s limit per
// request.
func (p Policy) Client() *http.Client {
	return &http.Client{Transport: p.Transport(), Timeout: 30 * time.Second}
}

// ParsePrefixes parses `--upstream-allow-private`: CIDR ranges (a bare
// address is one address), separated by commas. A range that reaches into
// link-local, loopback, multicast or unspecified addresses is refused:
// those have rules of their own.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		pr, err := netip.ParsePrefix(f)
		if err != nil {
			ip, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not a CIDR range such as 10.20.0.0/16 or fd00::/8", f)
			}
			pr = netip.PrefixFrom(ip, ip.BitLen())
		}
		pr = pr.Masked()
		for _, never := range []netip.Prefix{
			netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10"),
			netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"),
			netip.MustParsePrefix("224.0.0.0/4"), netip.MustParsePrefix("ff00::/8"),
			netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("::/128"),
		} {
			if pr.Overlaps(never) {
				return nil, fmt.Errorf("%s reaches into %s, which --upstream-allow-private cannot allow (loopback has --upstream-allow-loopback; link-local is never dialled)", pr, never)
			}
		}
		out = append(out, pr)
	}
	return out, nil
}
