package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connect starts or dials the server and completes the MCP handshake. It
// returns the session, the transport that worked ("stdio",
// "streamable-http" or "sse") and, for stdio, the child's process id.
func (b *Bridge) connect(ctx context.Context) (_ *mcp.ClientSession, transport string, pid int, _ error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "spacefix-bridge", Version: Version}, b.clientOptions())
	client.AddReceivingMiddleware(b.relayRequests)
	b.client = client
	b.kill = func() {}
	if b.srv.Command != "" {
		ch, err := b.startChild()
		if err != nil {
			return nil, "", 0, fmt.Errorf("start %s: %w", b.srv.shownCommand(), err)
		}
		cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(b.tasks.tapReader(ch)), Writer: ch}, b.sessionOptions())
		if err != nil {
			ch.Close()
			return nil, "", 0, fmt.Errorf("start %s: %w", b.srv.shownCommand(), err)
		}
		b.kill = ch.kill
		return cs, "stdio", ch.pid(), nil
	}
	hc := &http.Client{Transport: listTap{tasks: &b.tasks, base: capBodies{headers{h: b.srv.Headers, base: b.opts.httpTransport()}}}}
	oh, err := b.newOAuthHandler()
	if err != nil {
		return nil, "", 0, err
	}
	var handler auth.OAuthHandler = oh
	if src, _ := oh.TokenSource(ctx); src == nil && b.srv.TokenExchange != nil {
		// Exchange mode without a sign-in lists the tools with a
		// client_credentials token of the exchange's client.
		handler = newClientCredentials(b)
	}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.srv.URL, HTTPClient: hc, MaxRetries: -1, OAuthHandler: handler, MaxEventSize: maxResponse}, b.sessionOptions())
	if err == nil {
		return cs, "streamable-http", 0, nil
	}
	if ctx.Err() != nil || errors.Is(err, ErrSignIn) || handler != auth.OAuthHandler(oh) || !fallbackToSSE(err) {
		return nil, "", 0, redactErr(fmt.Errorf("connect to %s: %w", redactURL(b.srv.URL), err))
	}
	// The legacy transport has no OAuth handler: the saved token goes in
	// every request's Authorization header, refreshed as needed.
	sseClient := &http.Client{Transport: bearerFrom{h: oh, base: hc.Transport}}
	cs, sseErr := client.Connect(ctx, &mcp.SSEClientTransport{Endpoint: b.srv.URL, HTTPClient: sseClient, MaxEventSize: maxResponse}, legacyOptions)
	if sseErr != nil && strings.Contains(sseErr.Error(), "401") {
		return nil, "", 0, b.signInError()
	}
	if sseErr != nil {
		return nil, "", 0, redactErr(fmt.Errorf("connect to %s: Streamable HTTP: %v; legacy SSE: %w", redactURL(b.srv.URL), err, sseErr))
	}
	return cs, "sse", 0, nil
}

// fallbackToSSE reports whether a Streamable HTTP failure looks like a
// server that speaks only the legacy SSE transport (the spec's backwards
// compatibility rule: a 4xx to the initialize POST), not like a server
// that is down.
func fallbackToSSE(err error) bool {
	// go-sdk words an HTTP failure by its status text.
	msg := err.Error()
	for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed} {
		if strings.HasSuffix(msg, http.StatusText(status)) {
			return true
		}
	}
	return false
}

// headers adds the configured headers to every request. Their values never
// reach a log: errors from net/http name the URL, not the headers.
type headers struct {
	h    map[string]string
	base http.RoundTripper
}

func (t headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.h {
			r.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(r)
}

// errGone says the server's session ended.
var errGone = errors.New("the MCP server went away")

// sessionOptions offer the server the version of [Server.Protocol]. With
// 2026-07-28 go-sdk tries server/discover, and a server that does not
// answer it gets initialize with 2025-11-25. A 2026 server asks for input
// with input_required results, which the bridge answers under the
// server's own ids (inputs.go); a 2025 server sends its requests
// (elicitation, sampling, roots) and log messages on the session, where
// the bridge relays them to the client of the call they belong to
// (relay.go).
func (b *Bridge) sessionOptions() *mcp.ClientSessionOptions {
	return &mcp.ClientSessionOptions{ProtocolVersion: b.srv.offered()}
}

// legacyOptions speak 2025-11-25 over the legacy SSE transport, which no
// 2026-07-28 server serves.
var legacyOptions = &mcp.ClientSessionOptions{ProtocolVersion: legacyVersion}

// speaksModern reports whether the session negotiated 2026-07-28 or later.
func speaksModern(cs *mcp.ClientSession) bool {
	r := cs.InitializeResult()
	return r != nil && r.ProtocolVersion >= modernVersion
}

// bearerFrom adds the OAuth handler's current token, if it has one, to
// each request: the legacy SSE transport's sign-in.
type bearerFrom struct {
	h    *oauthHandler
	base http.RoundTripper
}

func (t bearerFrom) RoundTrip(r *http.Request) (*http.Response, error) {
	src, _ := t.h.TokenSource(r.Context())
	if src == nil {
		return t.base.RoundTrip(r)
	}
	tok, err := src.Token()
	if err != nil {
		return nil, t.h.b.signInError()
	}
	r = r.Clone(r.Context())
	tok.SetAuthHeader(r)
	return t.base.RoundTrip(r)
}
