package cluster

import (
	"net/netip"
	"testing"
)

// A peer counts by the IP it advertises; a host name is not resolved (no
// lookup on the accept path), and an IPv4-mapped address is its IPv4.
func TestHostIP(t *testing.T) {
	for _, c := range []struct {
		addr string
		want string // "" means none
	}{
		{"10.0.0.5:8080", "10.0.0.5"},
		{"[fd00::5]:8080", "fd00::5"},
		{"[::ffff:10.0.0.5]:8080", "10.0.0.5"},
		{"gw-2.internal:8080", ""},
		{"10.0.0.5", ""},
		{"", ""},
	} {
		got := hostIP(c.addr)
		if (c.want == "" && got.IsValid()) || (c.want != "" && got != netip.MustParseAddr(c.want)) {
			t.Errorf("hostIP(%q) = %v, want %q", c.addr, got, c.want)
		}
	}
}
