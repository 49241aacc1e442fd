package upstream

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// HTTPClient is the client the gateway reaches remotes and their
// authorization servers with: it never dials a link-local (169.254.0.0/16,
// fe80::/10: cloud metadata), unspecified or multicast address, nor a
// loopback one unless allowLoopback (`--upstream-allow-loopback`, for tests
// and single-machine setups). The rule applies to the address actually
// dialled, after name resolution and on every redirect. It uses no proxy:
// a proxy would be dialled instead of the remote and the rule would check
// the wrong address.
func HTTPClient(allowLoopback bool) *http.Client {
	d := &net.Dialer{
		Timeout:   15 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			return checkDial(address, allowLoopback)
		},
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = d.DialContext
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}

// checkDial is the dial rule of [HTTPClient] for one address (host:port,
// host an IP).
func checkDial(address string, allowLoopback bool) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("the upstream address %q is not an IP address", host)
	}
	ip = ip.Unmap()
	switch {
	case ip.IsMulticast():
		return fmt.Errorf("the upstream address %s is multicast; the gateway never dials one", ip)
	case ip.IsLinkLocalUnicast():
		return fmt.Errorf("the upstream address %s is link-local; the gateway never dials one", ip)
	case ip.IsUnspecified():
		return fmt.Errorf("the upstream address %s is unspecified; the gateway never dials one", ip)
	case ip.IsLoopback() && !allowLoopback:
		return fmt.Errorf("the upstream address %s is loopback; the gateway dials one only with --upstream-allow-loopback", ip)
	}
	return nil
}
