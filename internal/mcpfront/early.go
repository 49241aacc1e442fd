package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/mcpfront/session"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/recovery"
)

// A tools/call is answered here, before go-sdk parses the request, when
// the early path can answer it exactly as go-sdk would, byte for byte:
// go-sdk's per-request work (decoding the body several times over with a
// fresh 32 KiB buffer each, a throwaway session per stateless request, the
// middleware chain) costs more than the rest of a cache hit together, and
// about as much as the agent's round trip. Two kinds are taken:
//
//   - a cache hit: the stored result, encoded for the era when it was
//     cached, goes out without running the tool handler;
//   - any other call: it runs the same tool handler go-sdk would run
//     ([Front.tracedCall]); its progress lines (if it gave a progress
//     token), its log messages (at the level the client asked for: the
//     request's _meta at 2026-07-28, logging/setLevel in a session) and then
//     its result or error are written as go-sdk writes them (at 2026-07-28
//     the resultType, the server's identity in _meta, the HTTP status of a
//     protocol error). In a 2025 session, the client's
//     notifications/cancelled reaches the call (view.cancelEarly), and a
//     question for the client (confirm, elicitation, sampling, roots) goes
//     out as a request on the same response, its answer POSTed to the
//     session handed to the call by dispatch (session/ask_stream.go).
//
// Only plain, well-formed requests qualify; anything else — another method,
// a batch, a header or field go-sdk would refuse or act on, a retry with
// requestState, a tool that takes parameters in headers, traces switched
// on, an endpoint whose caller does not check hosts — goes to go-sdk
// untouched, the body read once and given back.
// TestEarlyHitsAnswerAsGoSDK, TestEarlyCallsAnswerAsGoSDK and
// TestEarlySessionCallsAnswerAsGoSDK hold the answers to go-sdk's, and the
// conformance suite runs through this path.
//
// The request, read and decoded once in dispatch (wire/request.go), is checked
// by parseEarly (wire/earlyparse.go, fuzzed); a
// cached result is kept in both eras' encodings (pipeline/cached.go); the answer
// goes out through sseStream (wire/sse.go) in go-sdk's wire format, written in
// one place (wire/gosdkwire.go) that TestGoSDKWire holds to go-sdk's own output.
//
// A cache hit passes the checks of go-sdk's path in its order: the key
// (already verified in dispatch), the access policy, the instance
// argument, validation against the schema of the tool's replicas (all of
// which must have one and the same), then the rate limit. A hit is neither
// logged nor billed, as on go-sdk's path.

// answerEarly answers a tools/call before go-sdk, if it can (see above),
// and reports whether it did. sessionID is the 2025 session the request
// names, "" at 2026-07-28.
func (f *Front) answerEarly(w http.ResponseWriter, r *http.Request, req *wire.Request, v *view, sessionID string) bool {
	if f.tracer != nil || !f.hostsChecked {
		// Every call gets its span, which go-sdk's path makes; without the
		// gateway's host check, go-sdk's own (DNS rebinding) must run.
		return false
	}
	modern := sessionID == ""
	if !wire.PlainHeaders(r, modern) {
		return false
	}
	call, ok := wire.ParseCall(req, modern)
	if !ok {
		return false
	}
	if modern && (r.Header.Get("Mcp-Method") != "tools/call" || r.Header.Get("Mcp-Name") != call.Name) {
		return false // go-sdk says which header is wrong
	}
	var ss *mcp.ServerSession
	if !modern {
		if ss = v.sess.SessionOf(sessionID); ss == nil {
			return false // go-sdk answers 404
		}
		if p := ss.InitializeParams(); p == nil || p.ProtocolVersion >= wire.ModernVersion {
			return false
		}
	}

	c := f.controls.Get(r.Context(), v.key.ProjectID)
	t := f.reg.Snapshot(v.key.ProjectID).Tools[call.Name]
	if t == nil || !f.pipe.Permits(r.Context(), v.key, c, t) || !v.advertisedPlain(t.Name) {
		return false // go-sdk's path says "not found"
	}
	if !modern && pipeline.MayConfirm(c.Policy, t.Name) {
		return false // go-sdk asks the policy's question over the session
	}
	// Under a policy, a hit or a replay is shaped for its caller: the
	// pipeline's policy point answers it (pipeline/stage_policy.go).
	shaped := pipeline.PolicyOnCalls(c)
	var result []byte
	if f.pipe.CacheFor(c, t) > 0 && !shaped {
		result = f.pipe.CachedEarly(v.key.ProjectID, t, call, modern)
	}
	var replayed func() // logs a replay answered here
	if result == nil && t.Def.IdempotencyKey != "" {
		if shaped {
			return false
		}
		// A repeat of a finished request id is answered here like a cache
		// hit; anything else about request ids is go-sdk's path (pipeline/repeat.go).
		if result, replayed = f.pipe.ReplayEarly(r.Context(), v.key, t, call, modern); result == nil {
			return false
		}
	}
	ctx := r.Context()
	if result == nil && !modern {
		// A session's call: a notifications/cancelled for its id must
		// find it, as go-sdk's would.
		rid, err := jsonrpc.MakeID(wire.IDValue(call.ID))
		if err != nil {
			return false
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		forget, ok := v.sess.TrackEarly(sessionID, rid, cancel)
		if !ok {
			return false
		}
		defer forget()
	}
	out := &wire.SSEStream{W: w}
	if n := c.Settings.RateLimitPerMinute; n > 0 {
		if ok, retry := f.limiter.Allow(v.key.ID, n); !ok {
			f.earlyCalls.Add(1)
			wire.WriteCallAnswer(out, call.ID, pipeline.ErrorResult(ratelimit.Message(n, retry)), nil, modern, f.impl, f.log)
			return true
		}
	}
	if result != nil {
		if replayed != nil {
			replayed()
		} else {
			f.pipe.CountHit()
			f.earlyHits.Add(1)
		}
		out.Event(wire.ResultMessage(call.ID, result))
		return true
	}
	f.earlyCalls.Add(1)
	sink := &pipeline.Stream{Notify: out.Notify, LogLevel: call.LogLevel}
	var ask *session.StreamAsker
	if modern {
		f.earlyNow.Add(1) // a stateless request being served (SessionCounts)
		defer f.earlyNow.Add(-1)
	} else {
		// A session's log level is the one its client set (go-sdk ignores
		// the request's own there), and a question for the client goes
		// out on this answer's stream (session/ask_stream.go).
		sink.LogLevel = v.sess.LogLevel(sessionID)
		ask = v.sess.Asker(sessionID, ss, out)
		sink.Notify = ask.Notify
	}
	res, err := f.callEarly(ctx, r, t, c, call, ss, sink, ask)
	if ask != nil {
		defer ask.Hold()()
	}
	wire.WriteCallAnswer(out, call.ID, res, err, modern, f.impl, f.log)
	return true
}

// callEarly runs a call through the tool handler, as go-sdk's path would
// after its parsing: the [pipeline.Call] [view.resolve] would make, the
// request's _meta, the session ss of a 2025 request (nil at 2026-07-28,
// where go-sdk makes a throwaway one), its notifications going to sink,
// and a panic turned into an isError result ([Front.recoverPanics]). ask,
// set for a session's call, puts the agent's questions to the client on
// the answer's stream.
func (f *Front) callEarly(ctx context.Context, r *http.Request, t *agents.Tool, c *access.Controls,
	call wire.Call, ss *mcp.ServerSession, sink *pipeline.Stream, ask *session.StreamAsker) (res *mcp.CallToolResult, err error) {
	var meta mcp.Meta
	if call.Meta != nil {
		if err := json.Unmarshal(call.Meta, &meta); err != nil {
			return nil, err // parseEarly read it: not reached
		}
	}
	req := &pipeline.Request{Name: call.Name, Args: call.Args, Meta: meta, Session: ss, Token: auth.TokenInfoFromContext(r.Context())}
	// Progress lines and log messages go out on the answer's stream before
	// the result, as go-sdk sends a request's notifications.
	var asker pipeline.Asker // a nil *session.StreamAsker would be a non-nil Asker
	if ask != nil {
		asker = ask
	}
	ctx = pipeline.WithCall(ctx, pipeline.NewCall(t, c).OnStream(sink, asker))
	defer pipeline.Recovered(f.log, "tools/call", func(r mcp.Result, e error) {
		res, _ = r.(*mcp.CallToolResult)
		err = e
	})
	recovery.Hook("mcp tools/call")
	return f.pipe.Serve(ctx, req) // no tracer: the client's trace context still goes on
}

// advertisedPlain reports whether the view advertises tool name and its
// input schema asks for no parameters in headers (go-sdk checks those).
func (v *view) advertisedPlain(name string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	b, ok := v.tools[name]
	return ok && !bytes.Contains(b, []byte("x-mcp-header"))
}
