package gateway

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestEdgeResolvesForwardedClient(t *testing.T) {
	trusted, err := parseTrustedProxies([]string{"127.0.0.1/32", "10.0.0.0/8", "2001:db8:1::/48"})
	if err != nil {
		t.Fatal(err)
	}
	e := &edge{trusted: trusted}
	cases := []struct {
		name       string
		peer       string
		header     http.Header
		wantAddr   string // r.RemoteAddr as handlers see it
		wantSecure bool
	}{
		{"untrusted peer: headers ignored", "198.51.100.9:5000",
			http.Header{"X-Forwarded-For": {"203.0.113.7"}, "X-Forwarded-Proto": {"https"}}, "198.51.100.9:5000", false},
		{"untrusted peer: Forwarded ignored", "198.51.100.9:5000",
			http.Header{"Forwarded": {"for=203.0.113.7;proto=https"}}, "198.51.100.9:5000", false},
		{"trusted peer, one hop", "127.0.0.1:4000",
			http.Header{"X-Forwarded-For": {"203.0.113.7"}, "X-Forwarded-Proto": {"https"}}, "203.0.113.7:0", true},
		{"client-sent prefix is skipped", "127.0.0.1:4000",
			http.Header{"X-Forwarded-For": {"1.2.3.4, 203.0.113.7"}, "X-Forwarded-Proto": {"http"}}, "203.0.113.7:0", false},
		{"trusted hops are walked", "127.0.0.1:4000",
			http.Header{"X-Forwarded-For": {"1.2.3.4, 203.0.113.7, 10.1.2.3"}}, "203.0.113.7:0", false},
		{"several header lines", "127.0.0.1:4000",
			http.Header{"X-Forwarded-For": {"1.2.3.4", "203.0.113.7:5555, 10.1.2.3"}}, "203.0.113.7:5555", false},
		{"all trusted: the leftmost", "127.0.0.1:4000",
			http.Header{"X-Forwarded-For": {"10.9.9.9, 10.1.2.3"}}, "10.9.9.9:0", false},
		{"garbage stops at the last trusted hop", "127.0.0.1:4000",
			http.Header{"X-Forwarded-For": {"203.0.113.7, nonsense, 10.1.2.3"}}, "10.1.2.3:0", false},
		{"no forwarded header: the peer", "127.0.0.1:4000", http.Header{}, "127.0.0.1:4000", false},
		{"rightmost proto is the peer's word", "127.0.0.1:4000",
			http.Header{"X-Forwarded-For": {"203.0.113.7"}, "X-Forwarded-Proto": {"http, https"}}, "203.0.113.7:0", true},
		{"IPv6 in X-Forwarded-For", "127.0.0.1:4000",
			http.Header{"X-Forwarded-For": {"2001:db8:2::7"}}, "[2001:db8:2::7]:0", false},
		{"Forwarded, quoted IPv6 with port", "127.0.0.1:4000",
			http.Header{"Forwarded": {`for="[2001:db8:2::7]:4711";proto=https, for=10.1.2.3;proto=http`}}, "[2001:db8:2::7]:4711", true},
		{"Forwarded unknown node stops", "127.0.0.1:4000",
			http.Header{"Forwarded": {"for=203.0.113.7, for=unknown;proto=https"}}, "127.0.0.1:4000", false},
		{"X-Forwarded-For wins over Forwarded", "127.0.0.1:4000",
			http.Header{"X-Forwarded-For": {"203.0.113.7"}, "Forwarded": {"for=192.0.2.66"}}, "203.0.113.7:0", false},
		{"IPv4-mapped peer is trusted", "[::ffff:127.0.0.1]:4000",
			http.Header{"X-Forwarded-For": {"::ffff:203.0.113.7"}}, "203.0.113.7:0", false},
		{"trusted IPv6 peer", "[2001:db8:1::5]:4000",
			http.Header{"X-Forwarded-For": {"203.0.113.7"}}, "203.0.113.7:0", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got *http.Request
			h := e.handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r }))
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.peer
			r.Header = tc.header.Clone()
			r.Header.Set("X-Real-IP", "192.0.2.99")
			h.ServeHTTP(httptest.NewRecorder(), r)
			if got.RemoteAddr != tc.wantAddr {
				t.Errorf("RemoteAddr = %q, want %q", got.RemoteAddr, tc.wantAddr)
			}
			if s := secureRequest(got); s != tc.wantSecure {
				t.Errorf("secure = %v, want %v", s, tc.wantSecure)
			}
			for _, name := range []string{"Forwarded", "X-Forwarded-For", "X-Real-Ip"} {
				if v := got.Header.Values(name); len(v) > 0 {
					t.Errorf("%s reached the handler: %q", name, v)
				}
			}
		})
	}
}

// An https public URL makes every request secure: the browser reached the
// gateway over TLS, through whatever terminates it.
func TestEdgePublicHTTPS(t *testing.T) {
	e := &edge{publicHTTPS: true}
	var got *http.Request
	h := e.handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r }))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Forwarded-Proto", "http")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if !secureRequest(got) {
		t.Error("secureRequest = false with an https public URL")
	}
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := parseTrustedProxies([]string{" 127.0.0.1/32", "10.1.2.3", "::1", "", "::ffff:192.168.0.0/112", "10.9.9.9/8"})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.1.2.3/32"), netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("10.0.0.0/8"),
	}
	if len(got) != len(want) {
		t.Fatalf("parseTrustedProxies = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %v, want %v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"localhost", "10.0.0.0/33", "fe80::1%eth0", "127.0.0.1:80"} {
		_, err := parseTrustedProxies([]string{"127.0.0.1/32", bad})
		want := `config: trusted proxies: "` + bad + `" is not an address or a CIDR prefix; write for example 127.0.0.1/32,10.0.0.0/8`
		if err == nil || err.Error() != want {
			t.Errorf("parseTrustedProxies(%q) = %v, want %q", bad, err, want)
		}
	}
}
