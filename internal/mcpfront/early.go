package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/recovery"
	"github.com/spacefix/spacefix/internal/schema"
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
//     ([Front.tracedToolHandler]); its progress lines (if it gave a progress
//     token), its log messages (at the level the client asked for: the
//     request's _meta at 2026-07-28, logging/setLevel in a session) and then
//     its result or error are written as go-sdk writes them (at 2026-07-28
//     the resultType, the server's identity in _meta, the HTTP status of a
//     protocol error). In a 2025 session, the client's
//     notifications/cancelled reaches the call (view.cancelEarly), and a
//     question for the client (confirm, elicitation, sampling, roots), which
//     must travel as a request over the session, makes go-sdk take the call
//     over on the same response (handoff.go).
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
// A cache hit passes the checks of go-sdk's path in its order: the key
// (already verified in dispatch), the access policy, the instance
// argument, validation against the schema of the tool's replicas (all of
// which must have one and the same), then the rate limit. A hit is neither
// logged nor billed, as on go-sdk's path.

// cachedResult is a cached tool result in the forms hits need: decoded,
// for hits go-sdk serves, and encoded as each era's JSON-RPC result, for
// early answers.
type cachedResult struct {
	res    *mcp.CallToolResult
	legacy []byte // 2025-06-18 and 2025-11-25
	modern []byte // 2026-07-28: serverInfo in _meta, resultType "complete"
}

// Size is what the cache counts for the decoded and encoded forms.
func (c *cachedResult) Size() int64 { return int64(2*len(c.legacy) + len(c.modern)) }

// newCachedResult encodes out, a successful result with no input requests,
// for both eras.
func (f *Front) newCachedResult(out *mcp.CallToolResult) *cachedResult {
	legacy, err1 := f.encodeResult(out, false)
	modern, err2 := f.encodeResult(out, true)
	if err1 != nil || err2 != nil {
		return &cachedResult{res: out}
	}
	return &cachedResult{res: out, legacy: legacy, modern: modern}
}

// encodeResult is the JSON go-sdk writes as the result of a tools/call that
// returned r: content never null (unless input is required); at
// 2026-07-28 also the server's identity in _meta (unless r has one) and
// the result type. go-sdk encodes JSON-RPC messages without escaping HTML;
// the result's own MarshalJSON does escape it.
func (f *Front) encodeResult(r *mcp.CallToolResult, modern bool) ([]byte, error) {
	c := new(mcp.CallToolResult)
	inputRequired := modern && r.InputRequests != nil
	if modern {
		// The result type is not exported: copied from a result go-sdk's
		// own decoding set it in.
		if inputRequired {
			*c = resultTypes.inputRequired
		} else {
			*c = resultTypes.complete
		}
	}
	c.Meta, c.Content, c.StructuredContent, c.IsError = r.Meta, r.Content, r.StructuredContent, r.IsError
	c.InputRequests, c.RequestState = r.InputRequests, r.RequestState
	if c.Content == nil && !inputRequired {
		c.Content = []mcp.Content{}
	}
	if modern {
		if _, ok := r.Meta[mcp.MetaKeyServerInfo]; !ok {
			c.Meta = maps.Clone(r.Meta)
			if c.Meta == nil {
				c.Meta = mcp.Meta{}
			}
			c.Meta[mcp.MetaKeyServerInfo] = f.impl
		}
	}
	return marshalPlain(c)
}

// resultTypes are empty results whose (unexported) result type go-sdk's
// decoding set, once: decoding one per call costs a 32 KiB buffer.
var resultTypes = func() (rt struct{ complete, inputRequired mcp.CallToolResult }) {
	if err := json.Unmarshal([]byte(`{"resultType":"complete"}`), &rt.complete); err != nil {
		panic(err)
	}
	if err := json.Unmarshal([]byte(`{"resultType":"input_required"}`), &rt.inputRequired); err != nil {
		panic(err)
	}
	return rt
}()

// marshalPlain is json.Marshal without escaping HTML, as go-sdk encodes
// JSON-RPC messages.
func marshalPlain(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// earlyCall is a tools/call the early path may answer.
type earlyCall struct {
	id   []byte // the request's id as sent: an integer or a plain string
	name string
	args json.RawMessage
	meta json.RawMessage // the params' _meta, if any
	// logLevel is the level of log messages _meta asks for, "" for none
	// (or a level that is not a string, which go-sdk takes as none).
	logLevel string
}

// answerEarly answers a tools/call before go-sdk, if it can (see above),
// and reports whether it did. sessionID is the 2025 session the request
// names, "" at 2026-07-28.
func (f *Front) answerEarly(w http.ResponseWriter, r *http.Request, v *view, sessionID string) bool {
	if f.tracer != nil || !f.hostsChecked {
		// Every call gets its span, which go-sdk's path makes; without the
		// gateway's host check, go-sdk's own (DNS rebinding) must run.
		return false
	}
	modern := sessionID == ""
	if !earlyHeaders(r, modern) {
		return false
	}
	body, err := readBody(r)
	if err != nil {
		return false
	}
	call, ok := parseEarly(body, modern)
	if !ok {
		return false
	}
	if modern && (r.Header.Get("Mcp-Method") != "tools/call" || r.Header.Get("Mcp-Name") != call.name) {
		return false // go-sdk says which header is wrong
	}
	var ss *mcp.ServerSession
	if !modern {
		if ss = v.sessionOf(sessionID); ss == nil {
			return false // go-sdk answers 404
		}
		if p := ss.InitializeParams(); p == nil || p.ProtocolVersion >= modernVersion {
			return false
		}
	}

	c := f.controls.Get(r.Context(), v.key.ProjectID)
	t := f.reg.Snapshot(v.key.ProjectID).Tools[call.name]
	if t == nil || !access.For(v.key, c).Permits(t) || !v.advertisedPlain(t.Name) {
		return false // go-sdk's path says "not found"
	}
	var result []byte
	if c.CacheFor(t) > 0 {
		result = f.cachedEarly(v, t, call, modern)
	}
	ctx := r.Context()
	if result == nil && !modern {
		// A session's call: a notifications/cancelled for its id must
		// find it, as go-sdk's would.
		rid, err := jsonrpc.MakeID(idValue(call.id))
		if err != nil {
			return false
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		forget, ok := v.trackEarly(sessionID, rid, cancel)
		if !ok {
			return false
		}
		defer forget()
	}
	out := &sseStream{w: w}
	if n := c.Settings.RateLimitPerMinute; n > 0 {
		if ok, retry := f.limiter.Allow(v.key.ID, n); !ok {
			f.earlyCalls.Add(1)
			f.writeEarly(out, call.id, errorResult(ratelimit.Message(n, retry)), nil, modern)
			return true
		}
	}
	if result != nil {
		f.hits.Add(1)
		f.earlyHits.Add(1)
		out.event(resultMessage(call.id, result))
		return true
	}
	f.earlyCalls.Add(1)
	sink := earlySink{notify: out.notify, logLevel: call.logLevel}
	var hand *handoff
	if modern {
		f.earlyNow.Add(1) // a stateless request being served (SessionCounts)
		defer f.earlyNow.Add(-1)
	} else {
		// A session's log level is the one its client set (go-sdk ignores
		// the request's own there), and a question for the client goes
		// through go-sdk: handOff.
		sink.logLevel = v.logLevel(sessionID)
		hand = &handoff{t: t}
	}
	res, err := f.callEarly(ctx, r, t, c, call, ss, sink, hand)
	if errors.Is(err, errHandedOff) {
		f.handOff(out, r, hand)
		return true
	}
	f.writeEarly(out, call.id, res, err, modern)
	return true
}

// cachedEarly returns the cached result of call in the era's encoding, or
// nil when there is none or the call must go through go-sdk's path to
// find it.
func (f *Front) cachedEarly(v *view, t *agents.Tool, call earlyCall, modern bool) []byte {
	args, instance, err := prepareArgs(t, call.args)
	if err != nil {
		return nil
	}
	s := commonSchema(t, instance)
	if s == nil || s.Validate(args) != nil {
		return nil
	}
	_, decoded, ok := f.cache.GetDecoded(v.key.ProjectID, t.Name, args)
	cr, _ := decoded.(*cachedResult)
	if !ok || cr == nil {
		return nil
	}
	if modern {
		return cr.modern
	}
	return cr.legacy
}

// callEarly runs a call through the tool handler, as go-sdk's path would
// after its parsing: [view.resolve]'s context, the request's _meta, the
// session ss of a 2025 request (nil at 2026-07-28, where go-sdk makes a
// throwaway one), its notifications going to sink, and a panic turned into
// an isError result ([Front.recoverPanics]). hand, set for a session's
// call, takes the call over when the agent asks the client something:
// callEarly then returns errHandedOff.
func (f *Front) callEarly(ctx context.Context, r *http.Request, t *agents.Tool, c *access.Controls,
	call earlyCall, ss *mcp.ServerSession, sink earlySink, hand *handoff) (res *mcp.CallToolResult, err error) {
	var meta mcp.Meta
	if call.meta != nil {
		if err := json.Unmarshal(call.meta, &meta); err != nil {
			return nil, err // parseEarly read it: not reached
		}
	}
	req := &mcp.CallToolRequest{
		Session: ss,
		Params:  &mcp.CallToolParamsRaw{Name: call.name, Arguments: call.args, Meta: meta},
		Extra:   &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header},
	}
	ctx = context.WithValue(context.WithValue(ctx, toolCtxKey{}, t), controlsCtxKey{}, c)
	// Progress lines and log messages go out on the answer's stream before
	// the result, as go-sdk sends a request's notifications.
	ctx = context.WithValue(ctx, earlySinkKey{}, sink)
	if hand != nil {
		ctx = context.WithValue(ctx, handoffKey{}, hand)
	}
	defer f.recovered("tools/call", func(r mcp.Result, e error) {
		res, _ = r.(*mcp.CallToolResult)
		err = e
	})
	recovery.Hook("mcp tools/call")
	return f.tracedToolHandler(ctx, req) // no tracer: the client's trace context still goes on
}

// earlySink is, in the context of a call answered before go-sdk, where
// the request's notifications go (progressSender, logSender): its answer's
// stream, and log messages from the level the client asked for ("": none).
type earlySink struct {
	notify   func(method string, params any)
	logLevel string
}

type earlySinkKey struct{}

// writeEarly writes a tool handler's answer as go-sdk would: a result (its
// result type set, content never null) as an SSE event, a JSON-RPC error as
// an SSE event too, or, at 2026-07-28, as a plain JSON body with the HTTP
// status the protocol gives its code.
func (f *Front) writeEarly(out *sseStream, id []byte, res *mcp.CallToolResult, err error, modern bool) {
	if err == nil && res != nil && res.InputRequests != nil && (len(res.Content) > 0 || res.StructuredContent != nil) {
		err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server bug: result has both content and inputRequests"}
	}
	if err == nil {
		b, encErr := f.encodeResult(res, modern)
		if encErr == nil {
			out.event(resultMessage(id, b))
			return
		}
		err = encErr
	}
	jid, _ := jsonrpc.MakeID(idValue(id))
	data, encErr := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: jid, Error: err})
	if encErr != nil {
		f.log.Error("encode a tools/call error", "err", encErr)
		return
	}
	status := 0
	var jerr *jsonrpc.Error
	if modern && errors.As(err, &jerr) {
		switch jerr.Code {
		case jsonrpc.CodeMethodNotFound:
			status = http.StatusNotFound
		case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
			status = http.StatusBadRequest
		}
	}
	if status == 0 {
		out.event(data)
		return
	}
	out.plain(status, data)
}

// notification is the JSON-RPC notification of method with params, as
// go-sdk encodes it (no HTML escaping).
func notification(method string, params any) ([]byte, error) {
	raw, err := marshalPlain(params)
	if err != nil {
		return nil, err
	}
	return jsonrpc.EncodeMessage(&jsonrpc.Request{Method: method, Params: raw})
}

// idValue is a plain id (see plainID) as JSON-RPC decodes it.
func idValue(id []byte) any {
	if id[0] == '"' {
		return string(id[1 : len(id)-1])
	}
	n, _ := strconv.ParseFloat(string(id), 64)
	return n
}

// resultMessage is the JSON-RPC response of request id with result.
func resultMessage(id, result []byte) []byte {
	b := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"result":}`)+len(id)+len(result))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// earlyHeaders reports whether a POST's headers are those of a request go-sdk
// would serve as they are: JSON in, both answer types accepted, no stream
// to resume, and the protocol version the path speaks.
func earlyHeaders(r *http.Request, modern bool) bool {
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		return false
	}
	if !acceptsBoth(r.Header.Values("Accept")) || len(r.Header.Values("Last-Event-Id")) > 0 {
		return false
	}
	pv := r.Header.Get("Mcp-Protocol-Version")
	if modern {
		return pv == modernVersion
	}
	return pv == "" || (pv < modernVersion && slices.Contains(mcp.SupportedProtocolVersions(), pv))
}

// acceptsBoth reports whether Accept takes both application/json and
// text/event-stream, as go-sdk requires (wildcards count).
func acceptsBoth(values []string) bool {
	var jsonOK, streamOK bool
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

// parseEarly reads a tools/call body the early path can answer: one JSON-RPC
// request with exactly the members it needs, each once, spelled as the
// protocol spells them, an id echoed as sent, object arguments (or none),
// and at 2026-07-28 the request _meta go-sdk requires. Anything it does not
// know means no. The body is checked to be JSON once, then read in place:
// only the client's capabilities and info are decoded, to check their
// shape as go-sdk will.
func parseEarly(body []byte, modern bool) (earlyCall, bool) {
	if len(body) == 0 || body[0] != '{' || !json.Valid(body) {
		return earlyCall{}, false
	}
	var (
		call                                                       earlyCall
		rpc, method, params, name, args, meta, version, caps, info []byte
	)
	if !takeMembers(body, map[string]*[]byte{"jsonrpc": &rpc, "id": &call.id, "method": &method, "params": &params}, nil) ||
		string(rpc) != `"2.0"` || string(method) != `"tools/call"` || !plainID(call.id) {
		return earlyCall{}, false
	}
	// Any other member of params (requestState, inputResponses, task, ...)
	// means no.
	if !takeMembers(params, map[string]*[]byte{"name": &name, "arguments": &args, "_meta": &meta}, nil) {
		return earlyCall{}, false
	}
	call.args = args
	// Arguments left out or null are {}, as on go-sdk's path.
	if len(call.args) > 0 && call.args[0] != '{' && string(call.args) != "null" {
		return earlyCall{}, false
	}
	var ok bool
	if call.name, ok = jsonString(name); !ok || call.name == "" {
		return earlyCall{}, false
	}
	if meta != nil {
		known := map[string]*[]byte{metaProtocolVersion: &version, mcp.MetaKeyClientCapabilities: &caps, mcp.MetaKeyClientInfo: &info}
		var level []byte
		known[metaLogLevel] = &level
		if !takeMembers(meta, known, func([]byte) bool { return true }) {
			return earlyCall{}, false
		}
		if l, ok := jsonString(level); ok {
			call.logLevel = l
		}
	}
	call.meta = meta
	if !modern {
		// A 2025 session's request must not claim the stateless protocol.
		return call, version == nil
	}
	return call, meta != nil && modernMeta(version, caps, info)
}

// takeMembers puts the value of each member of obj (valid JSON) named in
// into into it. It fails when obj is not an object, a member comes twice
// (go-sdk would read the last one: leave that to go-sdk), or a member not
// in into is not taken by rest (nil: none is).
func takeMembers(obj []byte, into map[string]*[]byte, rest func(key []byte) bool) bool {
	return jsonMembers(obj, func(key, val []byte) bool {
		p, ok := into[string(key)]
		if !ok {
			return rest != nil && rest(key)
		}
		if *p != nil {
			return false
		}
		*p = val
		return true
	})
}

// metaLogLevel is the _meta key of the level of log messages a 2026-07-28
// request wants (mcp.MetaKeyLogLevel, deprecated with logging itself).
const metaLogLevel = "io.modelcontextprotocol/logLevel"

// modernMeta reports whether a 2026-07-28 request's _meta is what go-sdk
// accepts as it is: that version, client capabilities, and client info if
// any, each of the right shape.
func modernMeta(version, caps, info []byte) bool {
	if string(version) != `"`+modernVersion+`"` || len(caps) == 0 || caps[0] != '{' {
		return false
	}
	if string(caps) != "{}" {
		var c struct {
			mcp.ClientCapabilities
			Roots *struct {
				ListChanged bool `json:"listChanged,omitempty"`
			} `json:"roots,omitempty"`
		}
		if json.Unmarshal(caps, &c) != nil {
			return false
		}
	}
	if info != nil {
		var impl mcp.Implementation
		if info[0] != '{' || json.Unmarshal(info, &impl) != nil {
			return false
		}
	}
	return true
}

// jsonMembers calls f with the key and the value's bytes of each member of
// obj, a JSON object already checked to be valid JSON, in order, until f
// returns false. It returns false if obj is not an object, a key is
// spelled with escapes, or f returned false.
func jsonMembers(obj []byte, f func(key, val []byte) bool) bool {
	if len(obj) < 2 || obj[0] != '{' {
		return false
	}
	i := skipSpace(obj, 1)
	if obj[i] == '}' {
		return true
	}
	for {
		end := i + 1 // obj[i] is the key's opening quote
		for obj[end] != '"' {
			if obj[end] == '\\' {
				return false
			}
			end++
		}
		key := obj[i+1 : end]
		i = skipSpace(obj, skipSpace(obj, end+1)+1) // past the colon
		vend := skipValue(obj, i)
		if !f(key, obj[i:vend]) {
			return false
		}
		i = skipSpace(obj, vend)
		if obj[i] == '}' {
			return true
		}
		i = skipSpace(obj, i+1) // past the comma
	}
}

// skipValue returns the index just past the JSON value at b[i] (valid JSON).
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[i])) {
		i++ // a number, true, false or null
	}
	return i
}

// skipString returns the index just past the JSON string at b[i].
func skipString(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// jsonString returns the JSON string raw decoded; ok is false if raw is not
// a string. Plain ASCII without escapes, the usual name, is not decoded.
func jsonString(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	for _, b := range raw[1 : len(raw)-1] {
		if b == '\\' || b >= 0x80 {
			return s, json.Unmarshal(raw, &s) == nil
		}
	}
	return string(raw[1 : len(raw)-1]), true
}

// plainID reports whether id is one go-sdk writes back exactly as sent: an
// integer of up to 15 digits, or a string of printable ASCII with no
// escapes.
func plainID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	if id[0] == '"' {
		if len(id) < 2 || id[len(id)-1] != '"' || len(id) > 258 {
			return false
		}
		for _, b := range id[1 : len(id)-1] {
			if b < 0x20 || b > 0x7e || b == '"' || b == '\\' {
				return false
			}
		}
		return true
	}
	digits := id
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(digits) > 1) {
		return false
	}
	for _, b := range digits {
		if b < '0' || b > '9' {
			return false
		}
	}
	return true
}

// advertisedPlain reports whether the view advertises tool name and its
// input schema asks for no parameters in headers (go-sdk checks those).
func (v *view) advertisedPlain(name string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	b, ok := v.tools[name]
	return ok && !bytes.Contains(b, []byte("x-mcp-header"))
}

// commonSchema returns the input schema every replica a call of t could go
// to validates it with (those of the instance, if one is named), or nil if
// there is no replica or they differ: then go-sdk's path picks one.
func commonSchema(t *agents.Tool, instance string) *schema.Schema {
	var s *schema.Schema
	for _, rep := range t.Replicas {
		if instance != "" && rep.Instance != instance {
			continue
		}
		rs := t.SchemaOn(rep)
		if rs == nil || (s != nil && rs != s) {
			return nil
		}
		s = rs
	}
	return s
}

// sseStream is an early answer as go-sdk writes one: SSE events, the
// headers going out with the first.
type sseStream struct {
	w       http.ResponseWriter
	started bool
}

// event writes one SSE event carrying msg.
func (s *sseStream) event(msg []byte) {
	if !s.started {
		h := s.w.Header()
		h.Set("Cache-Control", "no-cache, no-transform")
		h.Set("Content-Type", "text/event-stream")
		h.Set("Connection", "keep-alive")
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	b := make([]byte, 0, len("event: message\ndata: \n\n")+len(msg))
	b = append(b, "event: message\ndata: "...)
	b = append(b, msg...)
	s.w.Write(append(b, "\n\n"...))
}

// notify sends a notification of the request as an event, at once: the
// client sees it while the call goes on.
func (s *sseStream) notify(method string, params any) {
	msg, err := notification(method, params)
	if err != nil {
		return
	}
	s.event(msg)
	if fl, ok := s.w.(http.Flusher); ok {
		fl.Flush()
	}
}

// plain writes msg as a plain JSON body with status, as go-sdk writes a
// 2026-07-28 protocol error. Once events went out, the status can no
// longer change: msg goes as one more event. (go-sdk v1.8.0 writes it
// unframed there, which no client can read; this is the one place the
// early path answers differently, on purpose.)
func (s *sseStream) plain(status int, msg []byte) {
	if s.started {
		s.event(msg)
		return
	}
	h := s.w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "application/json")
	h.Set("Connection", "keep-alive")
	s.w.WriteHeader(status)
	s.started = true
	s.w.Write(msg)
}

// sessionOf returns the view's live session id, or nil. It walks the
// view's sessions, as go-sdk keeps them: a few per key as clients use them.
func (v *view) sessionOf(id string) *mcp.ServerSession {
	for s := range v.server.Sessions() {
		if s.ID() == id {
			return s
		}
	}
	return nil
}
