package mcpfront

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/store"
)

// A 2025 session's tools/call answered before go-sdk (early.go) runs in
// the HTTP request's goroutine, its progress and log messages written to
// its own answer's stream. When the agent asks the client something
// (core.Confirm, core.Elicit, core.Sample, core.Roots), that must go as a
// server-to-client request over the session, which go-sdk routes by
// request and keeps to itself. So the call is handed over: the request is
// served again by go-sdk, on the same response, and its tool handler picks
// up the running call at the question (the handoffHeader names it) instead
// of starting one. The client sees one answer: the early events, then
// go-sdk's request for input, then the rest of the call and its result.

// handoffHeader carries, from handOff to the tool handler, the token of a
// handed-over call. Only the gateway sets it: dispatch removes it from
// clients' requests.
const handoffHeader = "Spacefix-Handoff"

// handoff is an early session call the agent asked a question in: the
// question (in res), and what the tool handler needs to go on with it.
type handoff struct {
	t     *agents.Tool
	key   store.Key
	call  *route.Call
	res   route.Result
	start time.Time
}

// taken reports whether the call was handed over (handingOff): then its
// tool handler returned no answer, and handOff serves it through go-sdk.
func (h *handoff) taken() bool { return h != nil && h.call != nil }

// handingOff reports whether ctx is an early session call's, which go-sdk
// must take over at a question, and notes where the call stands for it:
// the shape stage then answers nothing, and the early path sees the
// handoff taken.
func handingOff(ctx context.Context, call *route.Call, res route.Result, key store.Key, start time.Time) bool {
	c := toolCallFrom(ctx)
	if c == nil || c.hand == nil || call == nil {
		return false
	}
	h := c.hand
	h.call, h.res, h.key, h.start = call, res, key, start
	return true
}

// handOff serves the request of an early session call again through
// go-sdk, on the same response, so that go-sdk puts the agent's question to
// the client (see above).
func (f *Front) handOff(out *sseStream, r *http.Request, h *handoff) {
	body, _ := readBody(r) // read before: from the buffer
	tok := rand.Text()
	f.handoffs.Store(tok, h)
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.Header.Set(handoffHeader, tok)
	f.serveInSession(handedWriter{out, new(bool)}, r2)
	if _, left := f.handoffs.LoadAndDelete(tok); left {
		// go-sdk did not reach the tool handler (the session closed, the
		// tool went away): the call stops, and is logged.
		f.toolResult(h.t, h.key, h.call.Abandon(agentproto.ReasonCancelled), h.start, nil)
	}
}

// resumeHandoff returns the handed-over call a request of go-sdk's names,
// or nil.
func (f *Front) resumeHandoff(req *mcp.CallToolRequest) *handoff {
	if req.Extra == nil || req.Extra.Header == nil {
		return nil
	}
	tok := req.Extra.Header.Get(handoffHeader)
	if tok == "" {
		return nil
	}
	h, ok := f.handoffs.LoadAndDelete(tok)
	if !ok {
		return nil
	}
	return h.(*handoff)
}

// handedWriter is the response of an early call as go-sdk writes the rest
// of it: once the early path has written the status (events went out),
// go-sdk's status goes nowhere and its events follow. Should go-sdk answer
// with an error status then (the session was deleted meanwhile), its
// plain-text body is dropped too: written into the event stream, the
// client could not read it.
type handedWriter struct {
	s       *sseStream
	dropped *bool
}

func (h handedWriter) Header() http.Header { return h.s.w.Header() }

func (h handedWriter) WriteHeader(code int) {
	if h.s.started {
		if code != http.StatusOK {
			*h.dropped = true
		}
		return
	}
	h.s.started = true
	h.s.w.WriteHeader(code)
}

func (h handedWriter) Write(b []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	if *h.dropped {
		return len(b), nil
	}
	return h.s.w.Write(b)
}

func (h handedWriter) Flush() {
	if fl, ok := h.s.w.(http.Flusher); ok {
		fl.Flush()
	}
}

func (h handedWriter) Unwrap() http.ResponseWriter { return h.s.w }
