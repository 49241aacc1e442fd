package oauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"syscall"
	"time"
)

// Client ID Metadata Documents: limits of a fetch and of the cache.
const (
	docMaxBytes   = 16 << 10
	docTimeout    = 5 * time.Second
	docTTL        = 10 * time.Minute
	docFailTTL    = time.Minute
	docCacheLimit = 1000
	// docMaxFetches bounds the fetches under way at once, from every
	// client together: many slow documents must not make the gateway a
	// crowd of outgoing connections.
	docMaxFetches = 8
	// docQueueWait is how long a request waits for a free fetch before it
	// is refused with [errDocsBusy].
	docQueueWait = 2 * time.Second
)

var (
	// errDocFetch is all a browser or client learns of a metadata document
	// that could not be fetched or is not one: which address a name
	// resolved to, and whether a port refused, reset or timed out, would
	// make the gateway a scanner of other people's networks. The reason
	// goes to the log.
	errDocFetch = oauthError{"invalid_client", "The gateway could not fetch the client's metadata document. Try again later; if it keeps failing, the gateway's operator can see why in its log."}
	// errDocsBusy refuses a request that waited [docQueueWait] for a fetch.
	errDocsBusy = oauthError{"invalid_client", "The gateway is fetching too many client metadata documents at once. Try again in a few seconds."}
)

// docCache fetches Client ID Metadata Documents and remembers them (and
// failures, so a bad URL cannot make the gateway fetch in a loop).
type docCache struct {
	http         *http.Client
	allowPrivate bool
	log          *slog.Logger
	fetches      chan struct{} // a token per fetch under way; docMaxFetches
	queueWait    time.Duration // docQueueWait; tests shorten it

	mu   sync.Mutex
	docs map[string]cachedDoc
}

type cachedDoc struct {
	c       *client
	err     error
	expires time.Time
}

func newDocCache(allowPrivate bool, roots *x509.CertPool, log *slog.Logger) *docCache {
	dialer := &net.Dialer{Timeout: docTimeout, Control: func(_, address string, _ syscall.RawConn) error {
		return checkTarget(address, allowPrivate)
	}}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would hide the address dialled
		DialContext:           dialer.DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   docTimeout,
		ResponseHeaderTimeout: docTimeout,
		MaxIdleConns:          10,
		IdleConnTimeout:       30 * time.Second,
	}
	return &docCache{
		allowPrivate: allowPrivate,
		log:          log,
		fetches:      make(chan struct{}, docMaxFetches),
		queueWait:    docQueueWait,
		docs:         make(map[string]cachedDoc),
		http: &http.Client{Transport: tr, Timeout: docTimeout, CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the metadata document URL redirects; it must answer itself")
		}},
	}
}

// checkTarget refuses to connect to any address that is not global
// unicast unless allowPrivate: the special-purpose ranges of the IANA IPv4
// and IPv6 registries ([blockedV4], [blockedV6]), every IPv6 address
// outside 2000::/3, and the IPv4 address inside an IPv4-mapped IPv6 one.
// It runs in the dialer's Control function, on the address actually
// dialled, after name resolution and for every address tried, so neither a
// DNS answer nor a second A record gets past it. The error is for the log:
// it names the address.
func checkTarget(address string, allowPrivate bool) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("dial %s: not an IP address", address)
	}
	if allowPrivate {
		return nil
	}
	if !isGlobal(ip) {
		return fmt.Errorf("%s is not a global address (%w)", ip, errNotGlobal)
	}
	return nil
}

// errNotGlobal marks a dial refused by [checkTarget].
var errNotGlobal = errors.New("special-purpose range")

// isGlobal reports whether ip is a global unicast address the gateway may
// fetch from.
func isGlobal(ip netip.Addr) bool {
	ip = ip.WithZone("")
	if ip.Is4In6() {
		ip = ip.Unmap() // ::ffff:a.b.c.d reaches a.b.c.d
	}
	blocked := blockedV4
	if ip.Is6() {
		if !globalV6.Contains(ip) {
			return false // ::, ::1, 64:ff9b::/96, 100::/64, fc00::/7, fe80::/10, ff00::/8, …
		}
		blocked = blockedV6
	}
	for _, p := range blocked {
		if p.Contains(ip) {
			return false
		}
	}
	return ip.IsValid()
}

// globalV6 is IPv6 global unicast; everything else in IPv6 is special.
var globalV6 = netip.MustParsePrefix("2000::/3")

// blockedV4 is every range of the IANA IPv4 Special-Purpose Address
// Registry that is not globally reachable, and multicast.
var blockedV4 = prefixes(
	"0.0.0.0/8",          // "this network"
	"10.0.0.0/8",         // private
	"100.64.0.0/10",      // shared address space (CGNAT)
	"127.0.0.0/8",        // loopback
	"169.254.0.0/16",     // link-local, cloud metadata
	"172.16.0.0/12",      // private
	"192.0.0.0/24",       // IETF protocol assignments
	"192.0.2.0/24",       // documentation
	"192.88.99.0/24",     // 6to4 relay anycast (deprecated)
	"192.168.0.0/16",     // private
	"198.18.0.0/15",      // benchmarking
	"198.51.100.0/24",    // documentation
	"203.0.113.0/24",     // documentation
	"224.0.0.0/4",        // multicast
	"240.0.0.0/4",        // reserved
	"255.255.255.255/32", // limited broadcast
)

// blockedV6 is what of 2000::/3 the IANA IPv6 Special-Purpose Address
// Registry reserves. 64:ff9b::/96 (NAT64) is outside 2000::/3, so refused
// whichever IPv4 address it embeds.
var blockedV6 = prefixes(
	"2001::/23",     // IETF protocol assignments, Teredo among them
	"2001:db8::/32", // documentation
	"2002::/16",     // 6to4: reaches any IPv4 address
	"3fff::/20",     // documentation
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// get returns the client a metadata document URL names: from the cache,
// or fetched, with at most [docMaxFetches] fetches under way at once.
func (d *docCache) get(ctx context.Context, id string) (*client, error) {
	if e, ok := d.cached(id); ok {
		return e.c, e.err
	}
	wait := time.NewTimer(d.queueWait)
	defer wait.Stop()
	select {
	case d.fetches <- struct{}{}:
	case <-wait.C:
		d.log.Info("OAuth client metadata document not fetched: too many fetches under way", "client_id", id, "max", docMaxFetches)
		return nil, errDocsBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-d.fetches }()
	if e, ok := d.cached(id); ok { // fetched while this request waited
		return e.c, e.err
	}
	now := time.Now()
	c, err := d.fetch(ctx, id)
	ttl := docTTL
	if err != nil {
		ttl = docFailTTL
		var oe oauthError
		if !errors.As(err, &oe) {
			d.log.Info("OAuth client metadata document not fetched", "client_id", id, "err", err)
			err = errDocFetch
		}
	}
	d.mu.Lock()
	if len(d.docs) >= docCacheLimit {
		clear(d.docs) // bounded: many client ids must not grow it forever
	}
	d.docs[id] = cachedDoc{c: c, err: err, expires: now.Add(ttl)}
	d.mu.Unlock()
	return c, err
}

// cached returns the cache's live entry for id.
func (d *docCache) cached(id string) (cachedDoc, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.docs[id]
	return e, ok && time.Now().Before(e.expires)
}

// docInvalid is the error of a document that names itself but is not
// usable.
func docInvalid(why string) error {
	return oauthError{"invalid_client", "The client's metadata document is not usable: " + why}
}

// fetch gets and checks a metadata document. An error other than an
// [oauthError] is for the log only.
func (d *docCache) fetch(ctx context.Context, id string) (*client, error) {
	u, err := url.Parse(id)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return nil, oauthError{"invalid_client", fmt.Sprintf("client_id %q is not a usable metadata document URL.", id)}
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && d.allowPrivate && isLoopbackHost(u.Hostname()):
	default:
		return nil, oauthError{"invalid_client", fmt.Sprintf("client_id %q must be an https URL.", id)}
	}
	if u.Path == "" || u.Path == "/" {
		return nil, oauthError{"invalid_client", fmt.Sprintf("client_id %q must have a path (a metadata document URL is never the bare host).", id)}
	}
	ctx, cancel := context.WithTimeout(ctx, docTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := d.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("it answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, docMaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > docMaxBytes {
		return nil, fmt.Errorf("it is larger than %d bytes", docMaxBytes)
	}
	var raw map[string]json.RawMessage
	var c client
	if json.Unmarshal(body, &raw) != nil || json.Unmarshal(body, &c) != nil {
		return nil, errors.New("it is not a JSON object of client metadata")
	}
	if c.ID != id {
		return nil, fmt.Errorf("its client_id %q is not its own URL", c.ID)
	}
	// The document names itself: from here on, what is wrong with it is
	// the app developer's to fix, and saying so reveals nothing a fetch of
	// the URL by anyone would not.
	if _, ok := raw["client_secret"]; ok {
		return nil, docInvalid("it carries a client_secret, which a public document must not.")
	}
	if c.AuthMethod != "" && c.AuthMethod != "none" {
		return nil, docInvalid(fmt.Sprintf("token_endpoint_auth_method %q is not supported for metadata documents; use none.", c.AuthMethod))
	}
	if err := c.validate(); err != nil {
		var oe oauthError
		errors.As(err, &oe)
		return nil, docInvalid(oe.Description)
	}
	c.AuthMethod, c.document = "none", true
	return &c, nil
}
