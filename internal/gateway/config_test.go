package gateway

import (
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
		got.HeaderTimeout != 10*time.Second || got.IdleTimeout != 30*time.Second {
		t.Errorf("withDefaults() = %+v", got)
	}
}
