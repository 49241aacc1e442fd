package egress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// TestCheck runs the rule over each range it names, under the policies an
// operator can set.
func TestCheck(t *testing.T) {
	strict := Policy{}
	loopback := Policy{AllowLoopback: true}
	listed := Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd12::/16")}}
	privateRemote := Policy{PrivateRemote: true}
	const ok = Kind("")
	for _, c := range []struct {
		addr                                 string
		strict, loopback, listed, privRemote Kind
	}{
		{"93.184.216.34", ok, ok, ok, ok},
		{"2606:4700::1111", ok, ok, ok, ok},
		{"169.254.169.254", KindLinkLocal, KindLinkLocal, KindLinkLocal, KindLinkLocal},
		{"fe80::1", KindLinkLocal, KindLinkLocal, KindLinkLocal, KindLinkLocal},
		{"::ffff:169.254.169.254", KindLinkLocal, KindLinkLocal, KindLinkLocal, KindLinkLocal},
		{"64:ff9b::a9fe:a9fe", KindLinkLocal, KindLinkLocal, KindLinkLocal, KindLinkLocal}, // NAT64 of 169.254.169.254
		{"127.0.0.1", KindLoopback, ok, KindLoopback, KindLoopback},
		{"127.8.9.10", KindLoopback, ok, KindLoopback, KindLoopback},
		{"::1", KindLoopback, ok, KindLoopback, KindLoopback},
		{"10.0.0.5", KindPrivate, KindPrivate, KindPrivate, ok},
		{"10.20.3.4", KindPrivate, KindPrivate, ok, ok},
		{"172.16.0.1", KindPrivate, KindPrivate, KindPrivate, ok},
		{"172.31.255.255", KindPrivate, KindPrivate, KindPrivate, ok},
		{"172.32.0.1", ok, ok, ok, ok},
		{"192.168.1.1", KindPrivate, KindPrivate, KindPrivate, ok},
		{"100.64.0.1", KindPrivate, KindPrivate, KindPrivate, ok},
		{"100.127.255.254", KindPrivate, KindPrivate, KindPrivate, ok},
		{"100.128.0.1", ok, ok, ok, ok},
		{"fc00::1", KindPrivate, KindPrivate, KindPrivate, ok},
		{"fd12:3456::1", KindPrivate, KindPrivate, ok, ok},
		{"::ffff:10.0.0.5", KindPrivate, KindPrivate, KindPrivate, ok},
		{"0.0.0.0", KindUnspecified, KindUnspecified, KindUnspecified, KindUnspecified},
		{"::", KindUnspecified, KindUnspecified, KindUnspecified, KindUnspecified},
		{"224.0.0.1", KindMulticast, KindMulticast, KindMulticast, KindMulticast},
		{"ff02::1", KindMulticast, KindMulticast, KindMulticast, KindMulticast},
		{"ff05::1", KindMulticast, KindMulticast, KindMulticast, KindMulticast},
		{"0.1.2.3", KindReserved, KindReserved, KindReserved, KindReserved},
		{"240.0.0.1", KindReserved, KindReserved, KindReserved, KindReserved},
		{"255.255.255.255", KindReserved, KindReserved, KindReserved, KindReserved},
	} {
		ip := netip.MustParseAddr(c.addr)
		for _, pc := range []struct {
			name string
			p    Policy
			want Kind
		}{{"strict", strict, c.strict}, {"loopback", loopback, c.loopback}, {"listed", listed, c.listed}, {"private remote", privateRemote, c.privRemote}} {
			err := pc.p.Check(ip)
			var r *Refused
			switch {
			case pc.want == ok && err != nil:
				t.Errorf("%s under %s: %v; want allowed", c.addr, pc.name, err)
			case pc.want != ok && (!errors.As(err, &r) || r.Kind != pc.want):
				t.Errorf("%s under %s: %v; want refused as %s", c.addr, pc.name, err, pc.want)
			}
		}
	}
}

// TestRefusedWords: what a refusal says, and the hint for the operator.
func TestRefusedWords(t *testing.T) {
	for _, c := range []struct{ addr, msg, hint string }{
		{"127.0.0.1", "the upstream address 127.0.0.1 is loopback; the gateway dials one only with --upstream-allow-loopback",
			"to reach a remote or authorization server on this machine (development, tests), start the gateway with --upstream-allow-loopback (env SPACEFIX_UPSTREAM_ALLOW_LOOPBACK=true)"},
		{"10.1.2.3", "the upstream address 10.1.2.3 is private; the gateway dials one only for a remote at a private address itself, or in a range --upstream-allow-private lists",
			"to reach 10.1.2.3, start the gateway with --upstream-allow-private 10.1.2.3/32 (env SPACEFIX_UPSTREAM_ALLOW_PRIVATE; a comma-separated list of CIDR ranges)"},
		{"169.254.169.254", "the upstream address 169.254.169.254 is link-local; the gateway never dials one",
			"link-local addresses (cloud metadata) are never dialled: give the bridge the remote's routable address, or fix the remote's metadata that names this one"},
	} {
		err := Policy{}.CheckAddress(c.addr + ":443")
		if err == nil || err.Error() != c.msg || HintOf(err) != c.hint {
			t.Errorf("%s: %v / %q;\nwant %s / %s", c.addr, err, HintOf(err), c.msg, c.hint)
		}
	}
	flat := fmt.Errorf("metadata: %v", Policy{}.CheckAddress("10.1.2.3:443")) // an error type flattened to text
	if r := RefusalIn(flat); r == nil || r.Kind != KindPrivate || r.Addr.String() != "10.1.2.3" {
		t.Errorf("RefusalIn(%v) = %+v; want 10.1.2.3, private", flat, r)
	}
	if HintOf(errors.New("no route to host")) != "" {
		t.Errorf("a hint for an error that is not a refusal")
	}
}

// TestForRemote: a remote at a private address may have its servers in
// private ranges; a public one, or one on loopback, may not.
func TestForRemote(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		url  string
		want bool
	}{
		{"https://10.0.0.5/mcp", true},
		{"http://[fd00::5]:8080/mcp", true},
		{"https://100.64.1.1/mcp", true},
		{"https://93.184.216.34/mcp", false},
		{"http://127.0.0.1:8080/mcp", false},
		{"http://localhost:8080/mcp", false},
		{"not a url", false},
	} {
		p := Policy{AllowLoopback: true}.ForRemote(ctx, c.url)
		if p.PrivateRemote != c.want {
			t.Errorf("ForRemote(%s).PrivateRemote = %v; want %v", c.url, p.PrivateRemote, c.want)
		}
		if err := p.Check(netip.MustParseAddr("192.168.7.7")); (err == nil) != c.want {
			t.Errorf("ForRemote(%s) on a private authorization server: %v", c.url, err)
		}
		if err := p.Check(netip.MustParseAddr("169.254.169.254")); err == nil {
			t.Errorf("ForRemote(%s) lets link-local be dialled", c.url)
		}
	}
}

// TestClientDials: the client refuses a refused address before it
// connects, with the refusal in the error's chain; it dials an allowed one.
func TestClientDials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	c := Policy{}.Client()
	defer c.CloseIdleConnections()
	_, err := c.Get(srv.URL)
	var r *Refused
	if !errors.As(err, &r) || r.Kind != KindLoopback {
		t.Errorf("GET on loopback under the strict policy = %v; want refused as loopback", err)
	}
	ok := Policy{AllowLoopback: true}.Client()
	defer ok.CloseIdleConnections()
	resp, err := ok.Get(srv.URL)
	if err != nil {
		t.Fatalf("GET on loopback with AllowLoopback = %v", err)
	}
	resp.Body.Close()
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes(" 10.20.0.0/16, fd00::/8 ,192.168.1.7,")
	if err != nil || len(got) != 3 || got[0].String() != "10.20.0.0/16" || got[1].String() != "fd00::/8" || got[2].String() != "192.168.1.7/32" {
		t.Errorf("ParsePrefixes = %v, %v", got, err)
	}
	for in, want := range map[string]string{
		"10.0.0.0/33":    `"10.0.0.0/33" is not a CIDR range such as 10.20.0.0/16 or fd00::/8`,
		"intranet":       `"intranet" is not a CIDR range such as 10.20.0.0/16 or fd00::/8`,
		"169.254.0.0/16": "169.254.0.0/16 reaches into 169.254.0.0/16, which --upstream-allow-private cannot allow",
		"0.0.0.0/0":      "0.0.0.0/0 reaches into 169.254.0.0/16, which --upstream-allow-private cannot allow",
		"127.0.0.1":      "127.0.0.1/32 reaches into 127.0.0.0/8, which --upstream-allow-private cannot allow",
	} {
		if _, err := ParsePrefixes(in); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("ParsePrefixes(%q) = %v; want %s…", in, err, want)
		}
	}
}
