package interceptors

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/egress"
	"github.com/spacefix/spacefix/internal/policy"
)

// urlConn is a server at a URL: one Streamable HTTP session, opened at
// the first request and opened again when the server lost it.
type urlConn struct {
	entry  policy.Interceptor
	opts   Options
	client *mcp.Client

	mu      sync.Mutex
	session *mcp.ClientSession
	closed  bool // by close: no session is opened again
}

// errClosed answers a request on a server whose chain was closed (its
// policy version was replaced a while ago).
var errClosed = errors.New("the interceptor server's connection was closed: the project's policy changed")

func newURLConn(e policy.Interceptor, opts Options) *urlConn {
	cl := mcp.NewClient(&mcp.Implementation{Name: "spacefix-gateway", Version: opts.Version}, nil)
	if err := mcp.AddSendingCustomMethod[*ListParams, *ListResult](cl, MethodList); err != nil {
		panic(err) // only for a standard method's name
	}
	if err := mcp.AddSendingCustomMethod[*InvokeParams, *InvokeResult](cl, MethodInvoke); err != nil {
		panic(err)
	}
	return &urlConn{entry: e, opts: opts, client: cl}
}

func (u *urlConn) state() string { return "" }

func (u *urlConn) list(ctx context.Context) ([]Info, error) {
	res, err := u.do(ctx, func(cs *mcp.ClientSession) (any, error) {
		return mcp.CallCustomMethod[*ListParams, *ListResult](ctx, cs, MethodList, &ListParams{})
	})
	if err != nil {
		return nil, err
	}
	return res.(*ListResult).Interceptors, nil
}

func (u *urlConn) invoke(ctx context.Context, p *InvokeParams) (*InvokeResult, error) {
	res, err := u.do(ctx, func(cs *mcp.ClientSession) (any, error) {
		return mcp.CallCustomMethod[*InvokeParams, *InvokeResult](ctx, cs, MethodInvoke, p)
	})
	if err != nil {
		return nil, err
	}
	return res.(*InvokeResult), nil
}

func (u *urlConn) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	if u.session != nil {
		u.session.Close()
		u.session = nil
	}
}

// do runs f on the session, connecting first if there is none, and once
// more on a new session if the old one broke (the server restarted).
// Calls run side by side on one session.
func (u *urlConn) do(ctx context.Context, f func(*mcp.ClientSession) (any, error)) (any, error) {
	for attempt := 0; ; attempt++ {
		cs, err := u.sessionFor(ctx)
		if err != nil {
			return nil, err
		}
		res, err := f(cs)
		if err == nil || attempt > 0 || ctx.Err() != nil || !brokenSession(err) {
			return res, err
		}
		u.mu.Lock()
		if u.session == cs {
			u.session.Close()
			u.session = nil
		}
		u.mu.Unlock()
	}
}

// sessionFor returns the session, connecting if there is none.
func (u *urlConn) sessionFor(ctx context.Context) (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, errClosed
	}
	if u.session == nil {
		t := &mcp.StreamableClientTransport{Endpoint: u.entry.URL, HTTPClient: withHeaders(ownOrigin(u.opts.HTTPClient), u.entry.Headers, maxAnswerBytes),
			DisableStandaloneSSE: true} // the gateway awaits no notifications from it
		cs, err := u.client.Connect(ctx, t, nil)
		if err != nil {
			return nil, err
		}
		u.session = cs
	}
	return u.session, nil
}

// brokenSession reports whether err says the session is gone (the
// server restarted), as opposed to an error the interceptor answered.
func brokenSession(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "session not found") || strings.Contains(msg, "connection closed") ||
		strings.Contains(msg, "EOF") || strings.Contains(msg, "connection refused")
}

// ownOrigin returns a copy of c that follows a redirect within the
// server's origin only: the entry's headers (its credentials) and the
// calls' payloads never go to another, whatever the server answers.
func ownOrigin(c *http.Client) *http.Client {
	cc := *c
	next := c.CheckRedirect
	cc.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if from := via[0].URL; r.URL.Scheme != from.Scheme || r.URL.Host != from.Host {
			return fmt.Errorf("the interceptor server redirected to another origin (%s://%s), which is not followed", r.URL.Scheme, r.URL.Host)
		}
		if next != nil {
			return next(r, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &cc
}

// maxAnswerBytes bounds one answer of an interceptor server (a response
// body, a JSON one or an event stream): an interceptor's payload wraps a
// call's arguments or result, which are at most a few MiB.
const maxAnswerBytes = 16 << 20

// withHeaders returns a client that adds h to every request and reads at
// most limit bytes of each response body.
func withHeaders(c *http.Client, h map[string]string, limit int64) *http.Client {
	cc := *c
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cc.Transport = headerTransport{base: base, h: h, limit: limit}
	return &cc
}

type headerTransport struct {
	base  http.RoundTripper
	h     map[string]string
	limit int64
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.h {
			r.Header.Set(k, v)
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err == nil {
		resp.Body = egress.CapBody(resp.Body, t.limit, errAnswerTooLarge)
	}
	return resp, err
}

var errAnswerTooLarge = fmt.Errorf("the interceptor server's answer is larger than %d bytes", maxAnswerBytes)
