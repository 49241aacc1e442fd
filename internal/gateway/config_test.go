package gateway

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
		want string // "" means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"addr without port", func(c *Config) { c.Addr = "localhost" }, `config: addr "localhost": want host:port`},
		{"negative grace", func(c *Config) { c.ShutdownGrace = -time.Second }, "config: shutdown grace -1s must not be negative"},
		{"retention under an hour", func(c *Config) { c.LogRetention = time.Minute }, "config: log retention 1m0s: use at least 1h"},
		{"zero retention means default", func(c *Config) { c.LogRetention = 0 }, ""},
		{"metrics addr", func(c *Config) { c.MetricsAddr = "127.0.0.1:9090" }, ""},
		{"metrics addr without port", func(c *Config) { c.MetricsAddr = "9090" }, `config: metrics addr "9090": want host:port`},
		{"negative session idle", func(c *Config) { c.SessionIdle = -time.Second }, "config: session idle -1s must not be negative (0 means the default)"},
		{"negative session cap", func(c *Config) { c.MaxSessionsPerKey = -1 }, "config: max conns, max sessions per key and max in flight per key must not be negative"},
		{"negative per-address cap", func(c *Config) { c.MaxConnsPerAddr = -1 }, "config: max conns per addr -1 must not be negative (0 means the default)"},
		{"negative header timeout", func(c *Config) { c.HeaderTimeout = -time.Second }, "config: header timeout -1s must not be negative (0 means the default)"},
		{"trusted proxies", func(c *Config) { c.TrustedProxies = []string{"127.0.0.1/32", "10.0.0.0/8", "::1"} }, ""},
		{"bad trusted proxy named", func(c *Config) { c.TrustedProxies = []string{"127.0.0.1/32", "nginx.local"} }, `config: trusted proxies: "nginx.local" is not an address or a CIDR prefix`},
		{"upstream private ranges", func(c *Config) {
			c.UpstreamAllowPrivate = []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd00::/8")}
		}, ""},
		{"upstream link-local range", func(c *Config) { c.UpstreamAllowPrivate = []netip.Prefix{netip.MustParsePrefix("169.254.169.254/32")} },
			"config: upstream allow private: 169.254.169.254/32 reaches into 169.254.0.0/16"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Errorf("Validate() = %v, want %q…", err, tc.want)
			}
		})
	}
	c := Config{Addr: "127.0.0.1:0"}
	if got := c.withDefaults(); got.LogRetention != DefaultLogRetention || got.Heartbeat != 5*time.Second ||
		got.SessionIdle != 30*time.Minute || got.MaxSessionsPerKey != 1000 || got.MaxInFlightPerKey != 64 || got.MaxConns != DefaultMaxConns() ||
		got.HeaderTimeout != 10*time.Second || got.IdleTimeout != DefaultIdleTimeout {
		t.Errorf("withDefaults() = %+v", got)
	}
}

// TestDefaultIdleTimeoutOutlastsClients: a keep-alive connection must be
// closed by the client (or the proxy in front) before the gateway closes
// it, or a POST sent on it at that instant fails with EOF or a reset, and a
// client cannot safely send a POST again (TestSoak lost one call in 76,000
// this way against a 30 s default). Go's default transport keeps idle
// connections 90 s; nginx and cloud load balancers 60 s.
func TestDefaultIdleTimeoutOutlastsClients(t *testing.T) {
	goClient := http.DefaultTransport.(*http.Transport).IdleConnTimeout
	c := Config{Addr: "127.0.0.1:0"}
	got := c.withDefaults().IdleTimeout
	for _, client := range []struct {
		name string
		idle time.Duration
	}{{"Go's default transport", goClient}, {"nginx, cloud load balancers", 60 * time.Second}} {
		if got <= client.idle {
			t.Errorf("default idle timeout %v does not outlast %s (%v)", got, client.name, client.idle)
		}
	}
}
