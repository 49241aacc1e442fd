package gateway

import (
	"testing"
)

func TestHostDefaults(t *testing.T) {
	cases := []struct {
		name    string
		cfg     Config
		addr    string
		allowed []string
		refused []string
	}{
		{"loopback", Config{}, "127.0.0.1:8080", []string{"127.0.0.1", "localhost", "::1"}, []string{"evil.example", "10.0.0.1"}},
		{"one address", Config{}, "192.0.2.7:80", []string{"192.0.2.7"}, []string{"localhost", "127.0.0.1", "evil.example"}},
		{"every address", Config{}, "0.0.0.0:80", []string{"localhost", "127.0.0.1"}, []string{"evil.example"}},
		{"public URL", Config{PublicURL: "https://MCP.example.com:8443/base"}, "192.0.2.7:80", []string{"mcp.example.com", "192.0.2.7"}, []string{"evil.example"}},
		{"configured", Config{AllowedHosts: []string{" GW.example ", "[::1]:8080"}}, "127.0.0.1:8080", []string{"gw.example", "::1"}, []string{"127.0.0.1", "localhost"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := allowedHosts(tc.cfg, tc.addr)
			for _, h := range tc.allowed {
				if !m[h] {
					t.Errorf("%s refused; allowed: %v", h, m)
				}
			}
			for _, h := range tc.refused {
				if m[h] {
					t.Errorf("%s allowed; allowed: %v", h, m)
				}
			}
		})
	}
	if m := allowedHosts(Config{AllowedHosts: []string{"a.example", "*"}}, "127.0.0.1:1"); m != nil {
		t.Errorf(`"*" gives %v, want nil (any host)`, m)
	}
}
