package wire

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A POST is read and decoded once, in dispatch ([readRequest]), into one
// [Request] value: its body, the JSON-RPC envelope's members and the few
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

// Request is one POST's JSON-RPC message, as dispatch read it.
type Request struct {
	// Ctx is the HTTP request's context: it ends when the client hangs up.
	Ctx  context.Context
	Body []byte // as sent
	Err  error  // reading the body failed; body holds what arrived

	// The envelope's members, each as sent; nil when absent.
	RPC, ID, Params []byte
	Method          string // "" when absent or not a string
	MethodRaw       []byte

	// Plain: body is one JSON object whose keys (in the envelope, params
	// and params._meta) are spelled without escapes, and no member this
	// reading knows comes twice (go-sdk would read the last one). Only a
	// Plain request is answered before go-sdk.
	Plain bool
	// ExtraTop: the envelope has a member besides jsonrpc, id, method and
	// params; ExtraParams: params has one besides name, arguments, _meta
	// and task (requestState, inputResponses, ...).
	ExtraTop, ExtraParams bool

	// Members of params, as sent; nil when absent.
	Name, Args, Meta, Task, RequestID, Capabilities []byte
	// Members of params._meta, as sent; nil when absent.
	Version, Caps, Info, Level []byte

	// Result and RPCErr are a response's members (the client answering a
	// request of the gateway's), as sent; nil when absent.
	Result, RPCErr []byte
}

// ModernVersion is the first stateless protocol revision.
const ModernVersion = "2026-07-28"

// metaProtocolVersion is the _meta key of a 2026-07-28 request's protocol
// version.
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// requestKey is where dispatch puts the request in the token info's Extra.
const requestKey = "spacefix.request"

// Read reads r's body once (bounded by dispatch's MaxBytesReader),
// decodes it once, and hands the value on in r's token info. The body is
// put back for go-sdk to read.
func Read(r *http.Request) *Request {
	body, err := ReadBody(r)
	req := Decode(body)
	req.Ctx, req.Err = r.Context(), err
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil && ti.Extra != nil {
		ti.Extra[requestKey] = req
	}
	return req
}

// Of returns the request a handler's token info carries, or nil
// (a GET, or a request of a test that did not go through dispatch).
func Of(ti *auth.TokenInfo) *Request {
	if ti == nil {
		return nil
	}
	req, _ := ti.Extra[requestKey].(*Request)
	return req
}

// Decode reads body in place: json.Valid once, then the members of
// the envelope, of params and of params._meta that routing needs. A key
// spelled with escapes (rare, and legal) makes it fall back to
// encoding/json for those members, and the request is not plain.
func Decode(body []byte) *Request {
	req := &Request{Body: body}
	if len(body) == 0 || body[0] != '{' || !json.Valid(body) {
		return req
	}
	req.Plain = true
	take := func(p *[]byte, val []byte) {
		if *p != nil {
			req.Plain = false
		}
		*p = val
	}
	envelope := Members(body, func(key, val []byte) bool {
		switch string(key) {
		case "jsonrpc":
			take(&req.RPC, val)
		case "id":
			take(&req.ID, val)
		case "method":
			take(&req.MethodRaw, val)
		case "params":
			take(&req.Params, val)
		case "result":
			take(&req.Result, val)
			req.ExtraTop = true
		case "error":
			take(&req.RPCErr, val)
			req.ExtraTop = true
		default:
			req.ExtraTop = true
		}
		return true
	})
	if !envelope {
		req.decodeEscaped()
		return req
	}
	req.Method, _ = JSONString(req.MethodRaw)
	if len(req.Params) == 0 || req.Params[0] != '{' {
		return req
	}
	if !Members(req.Params, func(key, val []byte) bool {
		switch string(key) {
		case "name":
			take(&req.Name, val)
		case "arguments":
			take(&req.Args, val)
		case "_meta":
			take(&req.Meta, val)
		case "task":
			take(&req.Task, val)
		default:
			req.ExtraParams = true
			switch string(key) {
			case "requestId":
				take(&req.RequestID, val)
			case "capabilities":
				take(&req.Capabilities, val)
			}
		}
		return true
	}) {
		req.decodeEscaped()
		return req
	}
	if len(req.Meta) > 0 && req.Meta[0] == '{' && !Members(req.Meta, func(key, val []byte) bool {
		switch string(key) {
		case metaProtocolVersion:
			take(&req.Version, val)
		case mcp.MetaKeyClientCapabilities:
			take(&req.Caps, val)
		case mcp.MetaKeyClientInfo:
			take(&req.Info, val)
		case metaLogLevel:
			take(&req.Level, val)
		}
		return true
	}) {
		req.decodeEscaped()
	}
	return req
}

// decodeEscaped reads the members routing needs with encoding/json, for
// a body whose keys use escapes; such a request is never plain.
func (req *Request) decodeEscaped() {
	req.Plain = false
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
	if json.Unmarshal(req.Body, &env) != nil {
		return
	}
	p := env.Params
	req.RPC, req.ID, req.MethodRaw = env.RPC, env.ID, env.Method
	req.Method, _ = JSONString(req.MethodRaw)
	req.Name, req.Args, req.Task, req.RequestID, req.Capabilities = p.Name, p.Arguments, p.Task, p.RequestID, p.Capabilities
	req.Version, req.Caps, req.Info, req.Level = p.Meta[metaProtocolVersion], p.Meta[mcp.MetaKeyClientCapabilities], p.Meta[mcp.MetaKeyClientInfo], p.Meta[metaLogLevel]
}

// ToolName returns params.name of a tools/call, "" for anything else.
func (req *Request) ToolName() string {
	if req == nil || req.Method != "tools/call" {
		return ""
	}
	name, _ := JSONString(req.Name)
	return name
}

// CallID returns the request's id as sent, or null (a notification, or a
// body that is not JSON), for an error answer's id.
func (req *Request) CallID() json.RawMessage {
	if req == nil || len(req.ID) == 0 {
		return json.RawMessage("null")
	}
	return req.ID
}

// DeclaresTasks reports whether an initialize request's client declares
// the tasks capability (capabilities.tasks, 2025-11-25).
func (req *Request) DeclaresTasks() bool {
	var tasks []byte
	if req == nil || req.Method != "initialize" || len(req.Capabilities) == 0 || req.Capabilities[0] != '{' {
		return false
	}
	Members(req.Capabilities, func(key, val []byte) bool {
		if string(key) == "tasks" {
			tasks = val
		}
		return true
	})
	return len(tasks) > 0 && string(tasks) != "null"
}
