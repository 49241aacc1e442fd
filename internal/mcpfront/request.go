package mcpfront

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A POST is read and decoded once, in dispatch ([readRequest]), into one
// [request] value: its body, the JSON-RPC envelope's members and the few
// members of params and params._meta that decide where the request goes.
// Every later step reads that value — the protocol era, the limits, the
// read-only scope check, the task entries of both eras, the early path, a
// session's notifications/cancelled, the tool handler — and none reads or
// decodes the body again; params are decoded, once, by the step that
// serves the method (a task's params, a tool's arguments). Requests the
// gateway leaves to go-sdk (initialize, the list methods, anything it
// does not take) are parsed by go-sdk, its own way.
//
// The value travels with the request in the key's token info: dispatch
// puts it in [auth.TokenInfo.Extra] (a fresh one per request), which
// go-sdk hands to every handler as req.Extra.TokenInfo, the way go-sdk
// passes what the HTTP layer knows to a handler. So a tool handler that
// go-sdk runs in a session's context, not the HTTP request's, still finds
// the request it came in ([requestOf]) and ends when its client hangs up.

// request is one POST's JSON-RPC message, as dispatch read it.
type request struct {
	// ctx is the HTTP request's context: it ends when the client hangs up.
	ctx  context.Context
	body []byte // as sent
	err  error  // reading the body failed; body holds what arrived

	// The envelope's members, each as sent; nil when absent.
	rpc, id, params []byte
	method          string // "" when absent or not a string
	methodRaw       []byte

	// plain: body is one JSON object whose keys (in the envelope, params
	// and params._meta) are spelled without escapes, and no member this
	// reading knows comes twice (go-sdk would read the last one). Only a
	// plain request is answered before go-sdk.
	plain bool
	// extraTop: the envelope has a member besides jsonrpc, id, method and
	// params; extraParams: params has one besides name, arguments, _meta
	// and task (requestState, inputResponses, ...).
	extraTop, extraParams bool

	// Members of params, as sent; nil when absent.
	name, args, meta, task, requestID, capabilities []byte
	// Members of params._meta, as sent; nil when absent.
	version, caps, info, level []byte

	// hand, on a request the early path hands over to go-sdk, is the
	// call go-sdk's tool handler takes up, once (handoff.go).
	hand atomic.Pointer[handoff]
}

// requestKey is where dispatch puts the request in the token info's Extra.
const requestKey = "spacefix.request"

// readRequest reads r's body once (bounded by dispatch's MaxBytesReader),
// decodes it once, and hands the value on in r's token info. The body is
// put back for go-sdk to read.
func readRequest(r *http.Request) *request {
	body, err := readBody(r)
	req := decodeRequest(body)
	req.ctx, req.err = r.Context(), err
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil && ti.Extra != nil {
		ti.Extra[requestKey] = req
	}
	return req
}

// requestOf returns the request a handler's token info carries, or nil
// (a GET, or a request of a test that did not go through dispatch).
func requestOf(ti *auth.TokenInfo) *request {
	if ti == nil {
		return nil
	}
	req, _ := ti.Extra[requestKey].(*request)
	return req
}

// decodeRequest reads body in place: json.Valid once, then the members of
// the envelope, of params and of params._meta that routing needs. A key
// spelled with escapes (rare, and legal) makes it fall back to
// encoding/json for those members, and the request is not plain.
func decodeRequest(body []byte) *request {
	req := &request{body: body}
	if len(body) == 0 || body[0] != '{' || !json.Valid(body) {
		return req
	}
	req.plain = true
	take := func(p *[]byte, val []byte) {
		if *p != nil {
			req.plain = false
		}
		*p = val
	}
	envelope := jsonMembers(body, func(key, val []byte) bool {
		switch string(key) {
		case "jsonrpc":
			take(&req.rpc, val)
		case "id":
			take(&req.id, val)
		case "method":
			take(&req.methodRaw, val)
		case "params":
			take(&req.params, val)
		default:
			req.extraTop = true
		}
		return true
	})
	if !envelope {
		req.decodeEscaped()
		return req
	}
	req.method, _ = jsonString(req.methodRaw)
	if len(req.params) == 0 || req.params[0] != '{' {
		return req
	}
	if !jsonMembers(req.params, func(key, val []byte) bool {
		switch string(key) {
		case "name":
			take(&req.name, val)
		case "arguments":
			take(&req.args, val)
		case "_meta":
			take(&req.meta, val)
		case "task":
			take(&req.task, val)
		default:
			req.extraParams = true
			switch string(key) {
			case "requestId":
				take(&req.requestID, val)
			case "capabilities":
				take(&req.capabilities, val)
			}
		}
		return true
	}) {
		req.decodeEscaped()
		return req
	}
	if len(req.meta) > 0 && req.meta[0] == '{' && !jsonMembers(req.meta, func(key, val []byte) bool {
		switch string(key) {
		case metaProtocolVersion:
			take(&req.version, val)
		case mcp.MetaKeyClientCapabilities:
			take(&req.caps, val)
		case mcp.MetaKeyClientInfo:
			take(&req.info, val)
		case metaLogLevel:
			take(&req.level, val)
		}
		return true
	}) {
		req.decodeEscaped()
	}
	return req
}

// decodeEscaped reads the members routing needs with encoding/json, for
// a body whose keys use escapes; such a request is never plain.
func (req *request) decodeEscaped() {
	req.plain = false
	var env struct {
		RPC    json.RawMessage `json:"jsonrpc"`
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
		Params struct {
			Name         json.RawMessage            `json:"name"`
			Arguments    json.RawMessage            `json:"arguments"`
			Meta         map[string]json.RawMessage `json:"_meta"`
			Task         json.RawMessage            `json:"task"`
			RequestID    json.RawMessage            `json:"requestId"`
			Capabilities json.RawMessage            `json:"capabilities"`
		} `json:"params"`
	}
	if json.Unmarshal(req.body, &env) != nil {
		return
	}
	p := env.Params
	req.rpc, req.id, req.methodRaw = env.RPC, env.ID, env.Method
	req.method, _ = jsonString(req.methodRaw)
	req.name, req.args, req.task, req.requestID, req.capabilities = p.Name, p.Arguments, p.Task, p.RequestID, p.Capabilities
	req.version, req.caps, req.info, req.level = p.Meta[metaProtocolVersion], p.Meta[mcp.MetaKeyClientCapabilities], p.Meta[mcp.MetaKeyClientInfo], p.Meta[metaLogLevel]
}

// toolName returns params.name of a tools/call, "" for anything else.
func (req *request) toolName() string {
	if req == nil || req.method != "tools/call" {
		return ""
	}
	name, _ := jsonString(req.name)
	return name
}

// callID returns the request's id as sent, or null (a notification, or a
// body that is not JSON), for an error answer's id.
func (req *request) callID() json.RawMessage {
	if req == nil || len(req.id) == 0 {
		return json.RawMessage("null")
	}
	return req.id
}
