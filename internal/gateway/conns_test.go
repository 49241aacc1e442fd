package gateway

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestMaxConnsFromFileLimit(t *testing.T) {
	cases := []struct {
		limit uint64
		want  int
	}{
		{0, 20_000},             // unknown (Windows)
		{256, 192},              // ulimit -n 256: 64 kept
		{1024, 922},             // a tenth kept
		{20_000, 18_976},        // at most 1,024 kept
		{1_048_576, 1_047_552},  // the usual hard limit of Linux
		{1 << 63, 1<<20 - 1024}, // "unlimited"
		{100, 50},               // tiny: half
		{1, 1},                  // never zero
		{11_264, 10_240},        // enough for 10,000 agents and clients
	}
	for _, tc := range cases {
		if got := maxConnsFor(tc.limit); got != tc.want {
			t.Errorf("maxConnsFor(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
	if got := DefaultConfig().MaxConns; got != maxConnsFor(fileLimit()) {
		t.Errorf("DefaultConfig().MaxConns = %d, want %d from the file limit %d", got, maxConnsFor(fileLimit()), fileLimit())
	}
}

func TestMaxConnsPerAddrDefault(t *testing.T) {
	for _, tc := range []struct{ maxConns, want int }{{2, 16}, {192, 24}, {18_976, 1000}, {4000, 500}} {
		c := Config{MaxConns: tc.maxConns}
		if got := c.withDefaults().MaxConnsPerAddr; got != tc.want {
			t.Errorf("MaxConnsPerAddr for MaxConns %d = %d, want %d", tc.maxConns, got, tc.want)
		}
	}
	c := Config{MaxConns: 192, MaxConnsPerAddr: 5}
	if got := c.withDefaults().MaxConnsPerAddr; got != 5 {
		t.Errorf("a set MaxConnsPerAddr became %d", got)
	}
}

func TestAddrKey(t *testing.T) {
	for in, want := range map[string]string{
		"203.0.113.7":          "203.0.113.7/32",
		"::ffff:203.0.113.7":   "203.0.113.7/32",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"fe80::1%eth0":         "fe80::/64",
	} {
		if got := addrKey(netip.MustParseAddr(in)).String(); got != want {
			t.Errorf("addrKey(%s) = %s, want %s", in, got, want)
		}
	}
}

// Over its address's cap a connection is answered 429 and closed; a
// hijacked connection (an agent WebSocket) frees its address's slot, and
// an exempt address is not counted.
func TestConnLimitPerAddr(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var exempt atomic.Bool
	l := newConnLimit(10, 2, func(netip.Addr) bool { return exempt.Load() }, slog.New(slog.DiscardHandler))
	ln := l.listen(inner)
	defer ln.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var server []net.Conn
	for range 2 {
		dial()
		server = append(server, <-accepted)
	}
	refused := dial()
	refused.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(refused)
	if !strings.HasPrefix(string(b), "HTTP/1.1 429 Too Many Requests") || !strings.HasSuffix(string(b), "Too many open connections from your address: close some and try again later.\n") {
		t.Errorf("third connection read %q, want the 429 answer", b)
	}
	if s := l.stats(); s.Refused != 1 || s.Open != 2 {
		t.Errorf("stats = %+v, want 1 refused and 2 open", s)
	}
	connState(server[0], http.StateHijacked) // an agent WebSocket now
	dial()
	server = append(server, <-accepted)
	server[0].Close()
	server[0].Close() // twice is safe: nothing is given back twice
	if s := l.stats(); s.Open != 2 {
		t.Errorf("open after a close = %d, want 2", s.Open)
	}
	exempt.Store(true)
	for range 3 {
		dial()
		server = append(server, <-accepted)
	}
	for _, c := range server {
		c.Close()
	}
	if s := l.stats(); s.Open != 0 || s.Refused != 1 {
		t.Errorf("stats after closing all = %+v, want 0 open and 1 refused", s)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.byAddr) != 0 {
		t.Errorf("addresses still counted: %v", l.byAddr)
	}
}
