package cluster

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/secrets"
)

func testBox(t *testing.T, keys ...string) *secrets.Box {
	t.Helper()
	var raw [][]byte
	for _, k := range keys {
		b, err := base64.StdEncoding.DecodeString(k)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, b)
	}
	box, err := secrets.New(raw...)
	if err != nil {
		t.Fatal(err)
	}
	return box
}

// forwardReq is a session's tools/call as the receiving gateway sees it.
func forwardReq(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://mcp.example/mcp?x=1", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer sfk_client")
	r.Header.Set("Mcp-Session-Id", "gw-a.s1")
	return r
}

// A forward verifies where the key file is the same, within 30 seconds
// either way, and only as signed: another body, path, session,
// credential or key file, a stale or missing signature, are refused with
// the reason the log gives; the body reaches the handler whole.
func TestForwardAuth(t *testing.T) {
	k1, k2 := secrets.NewKey(), secrets.NewKey()
	now := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) func() time.Time { return func() time.Time { return now.Add(d) } }
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	large := `{"x":"` + strings.Repeat("a", forwardBodyBound) + `"}`
	for _, c := range []struct {
		name    string
		signer  *ForwardAuth
		body    string
		change  func(r *http.Request)
		checker *ForwardAuth
		want    error
	}{
		{"same key file", NewForwardAuth(testBox(t, k1), at(0)), body, nil, NewForwardAuth(testBox(t, k1), at(0)), nil},
		{"29s late", NewForwardAuth(testBox(t, k1), at(0)), body, nil, NewForwardAuth(testBox(t, k1), at(29*time.Second)), nil},
		{"large body", NewForwardAuth(testBox(t, k1), at(0)), large, nil, NewForwardAuth(testBox(t, k1), at(0)), nil},
		{"signed with the new key, checked by a gateway that has both", NewForwardAuth(testBox(t, k2, k1), at(0)), body, nil, NewForwardAuth(testBox(t, k1, k2), at(0)), nil},
		{"replayed 31s later", NewForwardAuth(testBox(t, k1), at(0)), body, nil, NewForwardAuth(testBox(t, k1), at(31*time.Second)), ErrForwardStale},
		{"from 31s ahead", NewForwardAuth(testBox(t, k1), at(31*time.Second)), body, nil, NewForwardAuth(testBox(t, k1), at(0)), ErrForwardStale},
		{"another key file", NewForwardAuth(testBox(t, k2), at(0)), body, nil, NewForwardAuth(testBox(t, k1), at(0)), ErrForwardBadMAC},
		{"another body", NewForwardAuth(testBox(t, k1), at(0)), body, func(r *http.Request) {
			r.Body = io.NopCloser(strings.NewReader(strings.Replace(body, "echo", "drop", 1)))
		}, NewForwardAuth(testBox(t, k1), at(0)), ErrForwardBadMAC},
		{"another path", NewForwardAuth(testBox(t, k1), at(0)), body, func(r *http.Request) { r.URL.RawQuery = "x=2" }, NewForwardAuth(testBox(t, k1), at(0)), ErrForwardBadMAC},
		{"another session", NewForwardAuth(testBox(t, k1), at(0)), body, func(r *http.Request) { r.Header.Set("Mcp-Session-Id", "gw-a.s2") }, NewForwardAuth(testBox(t, k1), at(0)), ErrForwardBadMAC},
		{"another credential", NewForwardAuth(testBox(t, k1), at(0)), body, func(r *http.Request) { r.Header.Set("Authorization", "Bearer sfk_other") }, NewForwardAuth(testBox(t, k1), at(0)), ErrForwardBadMAC},
		{"another sender", NewForwardAuth(testBox(t, k1), at(0)), body, func(r *http.Request) { r.Header.Set(ForwardedByHeader, "gw-c") }, NewForwardAuth(testBox(t, k1), at(0)), ErrForwardBadMAC},
		{"no signature", NewForwardAuth(testBox(t, k1), at(0)), body, func(r *http.Request) { r.Header.Del(ForwardAuthHeader) }, NewForwardAuth(testBox(t, k1), at(0)), ErrForwardUnsigned},
		{"garbage signature", NewForwardAuth(testBox(t, k1), at(0)), body, func(r *http.Request) { r.Header.Set(ForwardAuthHeader, "v1.1800000000.!!") }, NewForwardAuth(testBox(t, k1), at(0)), ErrForwardBadMAC},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := forwardReq(c.body)
			c.signer.Sign(r, "gw-b")
			if c.change != nil {
				c.change(r)
			}
			err := c.checker.Verify(r)
			if !errors.Is(err, c.want) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
			if IsForwarded(r.Header) {
				t.Errorf("the forwarding headers are left for the handler: %v", r.Header)
			}
			if err != nil {
				return
			}
			got, err := io.ReadAll(r.Body)
			if err != nil || string(got) != c.body {
				t.Errorf("the handler reads %d bytes (err %v), want the %d sent", len(got), err, len(c.body))
			}
		})
	}
}

// BenchmarkForwardAuth is the cost a forward pays: signing on one gateway
// and verifying on the other, for a small tools/call.
func BenchmarkForwardAuth(b *testing.B) {
	box, err := secrets.New(make([]byte, secrets.KeySize))
	if err != nil {
		b.Fatal(err)
	}
	a := NewForwardAuth(box, nil)
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`
	for b.Loop() {
		r := forwardReq(body)
		a.Sign(r, "gw-b")
		if err := a.Verify(r); err != nil {
			b.Fatal(err)
		}
	}
}
