package agentfront

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/route"
)

// How an agent's connection ended, as the log says it.
func TestAgentFrontCloseReason(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, "closed"},
		{fmt.Errorf("%w (gateway shutting down)", route.ErrGoodbye), "the gateway said goodbye (gateway shutting down)"},
		{context.Canceled, "gateway shutting down"},
		{websocket.CloseError{Code: websocket.StatusNormalClosure}, "the agent closed the connection"},
		{websocket.CloseError{Code: websocket.StatusGoingAway}, "the agent is stopping"},
		{websocket.CloseError{Code: websocket.StatusPolicyViolation}, "closed by the agent with status 1008"},
		{fmt.Errorf("failed to get reader: failed to read frame header: %w", io.EOF), "the connection dropped without a goodbye"},
		{errors.New("read tcp: connection reset by peer"), "connection lost: read tcp: connection reset by peer"},
	} {
		if got := closeReason(c.err); got != c.want {
			t.Errorf("closeReason(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// BenchmarkAgentFrontRecv is one message from an agent read by the
// gateway's transport (under a context that can end, as Serve's) and one
// message back: a call's result and the next call.
func BenchmarkAgentFrontRecv(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := transportServer(func(tr *wsTransport) {
		defer tr.Close("")
		for {
			m, err := tr.Recv(ctx)
			if err != nil {
				return
			}
			if err := tr.Send(ctx, &agentproto.Message{Type: agentproto.TypeCall, ID: m.ID, Kind: "tool", Name: "ping"}); err != nil {
				return
			}
		}
	})
	defer srv.Close()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseNow()
	msg := []byte(`{"type":"result","id":"c-1","result":{"content":[{"type":"text","text":"pong"}]}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
			b.Fatal(err)
		}
		if _, _, err := c.Read(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// Recv returns the context's error once the context ends, and the
// connection is closed.
func TestAgentFrontRecvEndsWithContext(t *testing.T) {
	got := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	srv := transportServer(func(tr *wsTransport) {
		_, err := tr.Recv(ctx)
		got <- err
	})
	defer srv.Close()
	c, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Errorf("Recv: %v, want context.Canceled", err)
	}
	if closeReason(context.Canceled) != "gateway shutting down" {
		t.Error("a cancelled Recv is not read as the gateway shutting down")
	}
	if _, _, err := c.Read(context.Background()); err == nil {
		t.Error("the connection is still open")
	}
}

// transportServer accepts agent WebSocket connections as Connect does
// (small buffers) and runs serve on each one's transport, on its own
// goroutine.
func transportServer(serve func(tr *wsTransport)) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr := newWSTransport(slog.New(slog.DiscardHandler))
		ws, err := websocket.Accept(smallBuffers(w, &tr.nc), r, nil)
		if err != nil {
			return
		}
		tr.accepted(ws)
		go serve(tr)
	}))
}
