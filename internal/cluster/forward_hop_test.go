package cluster

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/secrets"
)

// A session's request forwarded to the gateway that owns it, over real
// HTTP, as a transcript: the client posts to gateway B; B's proxy (as
// internal/gateway's proxyTo builds it: the owner's address, the client's
// Host kept, the request signed) sends it to A; A verifies it and serves
// it. The test writes down what A's handler saw and what the client read,
// for the request shapes a client sends: a small body, one above the bound
// the MAC covers byte for byte, a body of unknown length (chunked), a
// request without a body; and a client that poses as a peer.

// hopSeen is what the owner's handler saw of one request.
type hopSeen struct {
	Method, Path, Query, Host, Session, Authorization string
	Forwarded                                         bool // a forwarding header reached the handler
	BodyLen                                           int
	BodySum                                           string
}

// hopOwner is gateway A: it verifies forwards as internal/gateway does,
// and answers a verified one with two SSE events, the second once release
// says the client read the first.
func hopOwner(t *testing.T, auth *ForwardAuth, release <-chan struct{}) (*httptest.Server, func() []hopSeen) {
	var mu sync.Mutex
	var seen []hopSeen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsForwarded(r.Header) {
			if err := auth.Verify(r); err != nil {
				http.Error(w, "refused: "+err.Error(), http.StatusForbidden)
				return
			}
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen = append(seen, hopSeen{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Host: r.Host,
			Session: r.Header.Get("Mcp-Session-Id"), Authorization: r.Header.Get("Authorization"),
			Forwarded: IsForwarded(r.Header), BodyLen: len(b), BodySum: fmt.Sprintf("%x", sha256.Sum256(b))[:12]})
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fl := http.NewResponseController(w)
		for i := 1; i <= 2; i++ {
			if i == 2 {
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
			}
			fmt.Fprintf(w, "event: message\ndata: {\"n\":%d}\n\n", i)
			if err := fl.Flush(); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []hopSeen {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
}

// hopForwarder is gateway B: every request goes to owner, signed.
func hopForwarder(t *testing.T, auth *ForwardAuth, owner string) *httptest.Server {
	target, err := url.Parse(owner)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			auth.Sign(pr.Out, "gw-b")
		},
		FlushInterval: -1,
	})
	t.Cleanup(srv.Close)
	return srv
}

func TestForwardOverHTTP(t *testing.T) {
	box := testBox(t, secrets.NewKey())
	release := make(chan struct{}, 1)
	owner, seen := hopOwner(t, NewForwardAuth(box, nil), release)
	client := &http.Client{Timeout: 10 * time.Second}
	forwarder := hopForwarder(t, NewForwardAuth(box, nil), owner.URL)
	small := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	large := `{"x":"` + strings.Repeat("a", forwardBodyBound) + `"}`
	sum := func(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s)))[:12] }
	const events = "event: message\ndata: {\"n\":1}\n\nevent: message\ndata: {\"n\":2}\n\n"

	for _, tc := range []struct {
		name    string
		to      string // the server the client posts to
		method  string
		body    io.Reader
		headers map[string]string
		want    []hopSeen // what A's handler saw
		status  int
		answer  string // what the client read
	}{
		{
			name: "a small body", to: forwarder.URL, method: http.MethodPost, body: strings.NewReader(small),
			want:   []hopSeen{{Method: "POST", Path: "/mcp", Query: "k=1", Host: "mcp.example.com", Session: "gw-a.s1", Authorization: "Bearer sfk_client", BodyLen: len(small), BodySum: sum(small)}},
			status: http.StatusOK, answer: events,
		},
		{
			name: "a body above the bound", to: forwarder.URL, method: http.MethodPost, body: strings.NewReader(large),
			want:   []hopSeen{{Method: "POST", Path: "/mcp", Query: "k=1", Host: "mcp.example.com", Session: "gw-a.s1", Authorization: "Bearer sfk_client", BodyLen: len(large), BodySum: sum(large)}},
			status: http.StatusOK, answer: events,
		},
		{
			name: "a body of unknown length", to: forwarder.URL, method: http.MethodPost, body: io.MultiReader(strings.NewReader(small)),
			want:   []hopSeen{{Method: "POST", Path: "/mcp", Query: "k=1", Host: "mcp.example.com", Session: "gw-a.s1", Authorization: "Bearer sfk_client", BodyLen: len(small), BodySum: sum(small)}},
			status: http.StatusOK, answer: events,
		},
		{
			name: "a GET stream", to: forwarder.URL, method: http.MethodGet,
			want:   []hopSeen{{Method: "GET", Path: "/mcp", Query: "k=1", Host: "mcp.example.com", Session: "gw-a.s1", Authorization: "Bearer sfk_client", BodySum: sum("")}},
			status: http.StatusOK, answer: events,
		},
		{
			name: "a client posing as a peer", to: owner.URL, method: http.MethodPost, body: strings.NewReader(small),
			headers: map[string]string{ForwardedByHeader: "gw-b", ForwardAuthHeader: "v1.0.AAAA"},
			status:  http.StatusForbidden, answer: "refused: " + ErrForwardStale.Error() + "\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, tc.to+"/mcp?k=1", tc.body)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = "mcp.example.com"
			req.Header.Set("Authorization", "Bearer sfk_client")
			req.Header.Set("Mcp-Session-Id", "gw-a.s1")
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			// The owner sends the second event only once the client read
			// the first: the proxy must pass a stream on as it comes.
			r := bufio.NewReader(resp.Body)
			var got strings.Builder
			if resp.StatusCode == http.StatusOK {
				for range 3 {
					line, err := r.ReadString('\n')
					if err != nil {
						t.Fatalf("the first event: %v", err)
					}
					got.WriteString(line)
				}
				release <- struct{}{}
			}
			rest, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			got.Write(rest)
			if resp.StatusCode != tc.status || got.String() != tc.answer {
				t.Errorf("the client read %d %q, want %d %q", resp.StatusCode, got.String(), tc.status, tc.answer)
			}
			if d := cmp.Diff(tc.want, seen()); d != "" {
				t.Errorf("what the owner's handler saw (-want +got):\n%s", d)
			}
		})
	}
}
