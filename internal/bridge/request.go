package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
)

// request sends a custom MCP request of the gateway's
// (agentproto.KindRequest: an interceptors/list or interceptor/invoke of
// the project's policy) to the server on the shared session, and returns
// the server's result as it came. The server's JSON-RPC error goes back
// as a [core.ProtocolError] with its code, message and data; a server
// that went away gives the gateway's disconnect message, as a call does.
func (b *Bridge) request(ctx context.Context, up *upstream, method string, params json.RawMessage) (json.RawMessage, error) {
	if method == "" {
		return nil, errors.New("The gateway's request names no method.")
	}
	// go-sdk sends only registered methods, and refuses to register a
	// standard one: those go through the bridge's own relays.
	if err := mcp.AddSendingCustomMethod[*rawParams, *rawResult](up.client, method); err != nil {
		return nil, fmt.Errorf("The bridge does not send %q as a custom request: it is a standard MCP method.", method)
	}
	p, err := newRawParams(params)
	if err != nil {
		return nil, fmt.Errorf("The gateway's params for %q are not a JSON object.", method)
	}
	cctx, stop := up.bind(ctx)
	defer stop()
	res, err := mcp.CallCustomMethod[*rawParams, *rawResult](cctx, up.cs, method, p)
	if err != nil {
		if se := serverError(err); se != nil {
			pe := &core.ProtocolError{Code: int(se.Code), Message: se.Message}
			if len(se.Data) > 0 {
				pe.Data = se.Data
			}
			return nil, pe
		}
		return nil, b.callError(ctx, err)
	}
	if len(res.raw) == 0 {
		return json.RawMessage("{}"), nil
	}
	return res.raw, nil
}

// rawParams are a custom request's params as the gateway sent them: a
// JSON object, its _meta read into the embedded ParamsBase so that
// go-sdk may add to it (a 2026-07-28 server's protocol version and client
// info) and written back.
type rawParams struct {
	mcp.ParamsBase
	fields map[string]json.RawMessage
}

func newRawParams(b json.RawMessage) (*rawParams, error) {
	p := &rawParams{fields: map[string]json.RawMessage{}}
	if len(bytes.TrimSpace(b)) == 0 || string(bytes.TrimSpace(b)) == "null" {
		return p, nil
	}
	if err := json.Unmarshal(b, &p.fields); err != nil || p.fields == nil {
		return nil, errors.New("not a JSON object")
	}
	if m, ok := p.fields["_meta"]; ok {
		if err := json.Unmarshal(m, &p.Meta); err != nil {
			return nil, errors.New("_meta is not a JSON object")
		}
		delete(p.fields, "_meta")
	}
	return p, nil
}

func (p *rawParams) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(p.fields)+1)
	for k, v := range p.fields {
		out[k] = v
	}
	if len(p.Meta) > 0 {
		out["_meta"] = p.Meta
	}
	return json.Marshal(out)
}

// rawResult is a custom request's result as the server sent it.
type rawResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *rawResult) UnmarshalJSON(b []byte) error {
	r.raw = append(json.RawMessage(nil), b...)
	return nil
}
