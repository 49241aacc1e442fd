// Package gateway wires Spacefix together: the HTTP server with the MCP
// endpoint, the agent endpoint and health checks, the store, the live
// registry, and the order in which they start and stop.
package gateway

import (
	"cmp"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/spacefix/spacefix/internal/egress"
)

// Config is everything `spacefix serve` can be told. Flags and environment
// variables map onto it in cmd/spacefix, and nowhere else.
type Config struct {
	// Addr is the host:port to listen on. Default 127.0.0.1:8080; port 0
	// picks a free port (tests).
	Addr string
	// DataPath is the SQLite file or the postgres:// URL. Default
	// ./spacefix.db. Used by
	// cmd/spacefix to open the store; the gateway itself gets a store.Store.
	DataPath string
	// UpstreamAllowLoopback lets the gateway reach per-person remotes and
	// their authorization servers at loopback addresses
	// (`--upstream-allow-loopback`: tests and single-machine setups).
	// Link-local, unspecified and multicast addresses are refused always.
	UpstreamAllowLoopback bool
	// UpstreamAllowPrivate are private address ranges the gateway may
	// reach for any per-person remote (`--upstream-allow-private`). Nil:
	// a remote's servers may be at private addresses only when the
	// remote itself is. Link-local and loopback ranges are refused.
	UpstreamAllowPrivate []netip.Prefix
	// SecretKeyFile is the key file that encrypts what the gateway keeps
	// of people's upstream accounts and its identity signing keys, seals
	// requestState, and keys the signatures of requests forwarded between
	// gateways (internal/secrets; docs/deployment.md). Empty means, on
	// SQLite, secret.key beside the database file, created at the first
	// start; a PostgreSQL store needs one, the same file on every gateway,
	// and the gateway does not start without it; nor does one on a bus
	// with no file to place it by (no DataPath).
	SecretKeyFile string
	// PublicURL is the base URL clients and agents use to reach the gateway,
	// as printed in set-up instructions. Empty means http://<listen address>.
	PublicURL string
	// ShutdownGrace is how long in-flight calls may take to finish once
	// shutdown starts; after it they fail with a message saying the gateway
	// is shutting down. Default 10s.
	ShutdownGrace time.Duration
	// Heartbeat is how often the gateway pings agents and how long it waits
	// for the pong. Default 5s.
	Heartbeat time.Duration
	// Grace is how long a tool stays listed after its last replica left.
	// Default 10s.
	Grace time.Duration
	// LogRetention is how long call log records are kept; older ones are
	// pruned in the background every hour. Usage counts are kept. Default
	// 7 days.
	LogRetention time.Duration
	// AuditRetention is how long audit log entries are kept; older ones
	// are pruned with the call log. Default 1 year (8760h).
	AuditRetention time.Duration
	// SessionIdle closes an MCP session (protocol 2025) that received no
	// request for this long. A session is never idle while a request of it
	// is in flight. Default 30m.
	SessionIdle time.Duration
	// Bus is the NATS server list (nats://host:port[,…]) that joins the
	// gateways sharing the store; "" means this gateway is alone.
	Bus string
	// AdvertiseAddr is the host:port the other gateways reach this one at
	// (to forward an MCP session's requests to it); "" means the listen
	// address, with an unspecified IP replaced by this host's first
	// non-loopback one.
	AdvertiseAddr string
	// BusHeartbeat is how often the gateway says on the bus that it is
	// alive; three missed ones drop it. 0 means 1s.
	BusHeartbeat time.Duration
	// KeepAlive is how often the gateway pings sessions that hold a GET
	// stream; three misses in a row close the session. Sessions without a
	// stream are never pinged. Default 30s.
	KeepAlive time.Duration
	// ViewIdle drops what the gateway keeps for a client key (its MCP
	// view) once the key has had no session and no request for this long;
	// the key's next request builds it again. 0 means 5m.
	ViewIdle time.Duration
	// MaxConns caps the open client connections (HTTP and agent
	// WebSockets); more wait to be accepted, and the first time that
	// happens it is logged at WARN. 0 means [DefaultMaxConns]: the
	// process's file limit less a tenth (at least 64, at most 1,024
	// descriptors) kept for the store, the bus and outgoing fetches;
	// 20,000 where there is no limit to read (Windows).
	MaxConns int
	// MaxConnsPerAddr caps the open HTTP connections from one client
	// address (an IPv4 address, or an IPv6 /64); more are answered 429
	// and closed at once. Agent WebSockets leave their address's count
	// once accepted, and TrustedProxies are not counted. 0 means an
	// eighth of MaxConns, at least 16 and at most 1,000.
	MaxConnsPerAddr int
	// TrustedProxies are the peers (CIDR prefixes such as 10.0.0.0/8, or
	// single addresses) whose X-Forwarded-For, X-Forwarded-Proto and
	// RFC 7239 Forwarded headers are believed: the client address they
	// give (the rightmost one that is not itself a trusted proxy) is used
	// for every per-address limit, the logs and the audit log, and their
	// https makes the session cookie Secure and OAuth's URLs https. From
	// any other peer those headers are deleted. Empty means no proxy is
	// trusted.
	TrustedProxies []string
	// MaxSessionsPerKey caps the MCP sessions of one client key; a new one
	// over the cap closes the key's session that has been idle longest.
	// Default 1,000.
	MaxSessionsPerKey int
	// MaxInFlightPerKey caps the MCP requests one client key has in flight;
	// more are refused with 429 until some finish. Default 64.
	MaxInFlightPerKey int
	// BodyTimeout is how long a client may take to send a request body.
	// Default 30s.
	BodyTimeout time.Duration
	// WriteTimeout is how long one write of a response may take, so a
	// client that stops reading is cut off; long streams live on while
	// their client reads. Default 30s.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request for this
	// long. It never cuts a request in progress (an SSE stream). Default
	// 2m: longer than the idle timeouts of the clients and proxies in
	// front (Go's default transport 90s, nginx 60s, cloud load balancers
	// 60s), so they close an idle connection first. The other way round, a
	// client may send a POST on a connection the gateway closes at that
	// instant, and cannot safely send it again: the call fails.
	IdleTimeout time.Duration
	// HeaderTimeout closes a connection whose request headers have not all
	// arrived this long after it opened (or after its next request began).
	// Default 10s.
	HeaderTimeout time.Duration
	// AllowedHosts are the host names requests may carry in Host; others
	// are refused with 421 on every path. Empty means the listen address
	// host, localhost, 127.0.0.1 and ::1 when it is a loopback or
	// unspecified address (or every local interface address when it is
	// unspecified), and the PublicURL host. "*" allows any host.
	AllowedHosts []string
	// NoOAuth turns the gateway's OAuth authorization server off: MCP
	// clients then need a client key (docs/oauth.md).
	NoOAuth bool
	// OAuthPrivateClientIDs lets OAuth Client ID Metadata Documents live
	// on loopback and private addresses (and plain http on loopback): for
	// development only.
	OAuthPrivateClientIDs bool
	// OAuthDPoPNonce makes DPoP proofs carry a nonce the gateway handed
	// out (RFC 9449 section 8), at the token endpoint and at /mcp; false
	// (the default) asks for none. Nonces are sealed with the secret key
	// file, so every gateway sharing it checks them.
	OAuthDPoPNonce bool
	// OAuthClientIDRoots verifies the certificates of the hosts of Client
	// ID Metadata Documents; nil means the system's roots.
	OAuthClientIDRoots *x509.CertPool
	// Logger receives operator logs. Nil means slog.Default().
	Logger *slog.Logger
	// Version is reported to clients and agents.
	Version string

	// Observability (docs/operations.md).

	// MetricsAddr, if set, is a host:port where GET /metrics is served
	// without authentication, for a Prometheus on a private network. Empty
	// means metrics are served only on Addr, to an admin API token.
	MetricsAddr string
	// Pprof serves /debug/pprof/ on Addr to an admin API token. False
	// means those paths answer 404.
	Pprof bool
	// TracerProvider traces tools/call requests, with their trace context
	// passed on to agents; nil means no traces. Its owner shuts it down
	// after the gateway (cmd/spacefix builds it from OTEL_EXPORTER_OTLP_*
	// with internal/tracing).
	TracerProvider trace.TracerProvider
}

// Default retentions of the call log and the audit log.
const (
	DefaultLogRetention   = 7 * 24 * time.Hour
	DefaultAuditRetention = 365 * 24 * time.Hour
)

// DefaultConfig returns the defaults documented on each field.
func DefaultConfig() Config {
	return Config{
		Addr:           "127.0.0.1:8080",
		DataPath:       "spacefix.db",
		ShutdownGrace:  10 * time.Second,
		Heartbeat:      5 * time.Second,
		Grace:          10 * time.Second,
		LogRetention:   DefaultLogRetention,
		AuditRetention: DefaultAuditRetention,
		Version:        "dev",

		SessionIdle:       30 * time.Minute,
		KeepAlive:         30 * time.Second,
		MaxConns:          DefaultMaxConns(),
		MaxSessionsPerKey: 1_000,
		MaxInFlightPerKey: 64,
		BodyTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       DefaultIdleTimeout,
		HeaderTimeout:     10 * time.Second,
	}
}

// DefaultIdleTimeout is the default of Config.IdleTimeout.
const DefaultIdleTimeout = 2 * time.Minute

// Validate names the first field that is wrong.
func (c *Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("config: addr %q: want host:port, for example 127.0.0.1:8080", c.Addr)
	}
	if c.ShutdownGrace < 0 {
		return fmt.Errorf("config: shutdown grace %v must not be negative", c.ShutdownGrace)
	}
	if c.Heartbeat < 0 || c.Grace < 0 {
		return fmt.Errorf("config: heartbeat and grace must not be negative")
	}
	if c.LogRetention < 0 || (c.LogRetention > 0 && c.LogRetention < time.Hour) {
		return fmt.Errorf("config: log retention %v: use at least 1h, for example 168h for 7 days", c.LogRetention)
	}
	if c.AuditRetention < 0 || (c.AuditRetention > 0 && c.AuditRetention < 24*time.Hour) {
		return fmt.Errorf("config: audit retention %v: use at least 24h, for example 8760h for a year", c.AuditRetention)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"session idle", c.SessionIdle}, {"keepalive", c.KeepAlive}, {"body timeout", c.BodyTimeout}, {"write timeout", c.WriteTimeout}, {"idle timeout", c.IdleTimeout}, {"header timeout", c.HeaderTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("config: %s %v must not be negative (0 means the default)", d.name, d.v)
		}
	}
	if c.MaxConns < 0 || c.MaxSessionsPerKey < 0 || c.MaxInFlightPerKey < 0 {
		return fmt.Errorf("config: max conns, max sessions per key and max in flight per key must not be negative (0 means the default)")
	}
	if c.MaxConnsPerAddr < 0 {
		return fmt.Errorf("config: max conns per addr %d must not be negative (0 means the default)", c.MaxConnsPerAddr)
	}
	if _, err := parseTrustedProxies(c.TrustedProxies); err != nil {
		return err
	}
	for _, p := range c.UpstreamAllowPrivate {
		if _, err := egress.ParsePrefixes(p.String()); err != nil || !p.IsValid() {
			return fmt.Errorf("config: upstream allow private: %v", cmp.Or(err, fmt.Errorf("%v is not a CIDR range", p)))
		}
	}
	return c.validateObs()
}

func (c *Config) validateObs() error {
	if c.MetricsAddr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
		return fmt.Errorf("config: metrics addr %q: want host:port, for example 127.0.0.1:9090", c.MetricsAddr)
	}
	return nil
}

func (c *Config) withDefaults() Config {
	d := DefaultConfig()
	out := *c
	if out.Addr == "" {
		out.Addr = d.Addr
	}
	if out.ShutdownGrace == 0 {
		out.ShutdownGrace = d.ShutdownGrace
	}
	if out.Heartbeat == 0 {
		out.Heartbeat = d.Heartbeat
	}
	if out.Grace == 0 {
		out.Grace = d.Grace
	}
	if out.LogRetention == 0 {
		out.LogRetention = d.LogRetention
	}
	if out.AuditRetention == 0 {
		out.AuditRetention = d.AuditRetention
	}
	if out.SessionIdle == 0 {
		out.SessionIdle = d.SessionIdle
	}
	if out.KeepAlive == 0 {
		out.KeepAlive = d.KeepAlive
	}
	if out.MaxConns == 0 {
		out.MaxConns = d.MaxConns
	}
	if out.MaxConnsPerAddr == 0 {
		out.MaxConnsPerAddr = defaultPerAddr(out.MaxConns)
	}
	if out.MaxSessionsPerKey == 0 {
		out.MaxSessionsPerKey = d.MaxSessionsPerKey
	}
	if out.MaxInFlightPerKey == 0 {
		out.MaxInFlightPerKey = d.MaxInFlightPerKey
	}
	if out.BodyTimeout == 0 {
		out.BodyTimeout = d.BodyTimeout
	}
	if out.WriteTimeout == 0 {
		out.WriteTimeout = d.WriteTimeout
	}
	if out.IdleTimeout == 0 {
		out.IdleTimeout = d.IdleTimeout
	}
	if out.HeaderTimeout == 0 {
		out.HeaderTimeout = d.HeaderTimeout
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.Version == "" {
		out.Version = d.Version
	}
	return out
}
