package pipeline

import (
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/yosida95/uritemplate/v3"
)

// ResourceHandler reads a resource through its agent. A read is a call:
// logged, counted and bounded by the project's call wait. A failure reaches
// the client as JSON-RPC error -32603 with the handler's message.
func (f *Pipeline) ResourceHandler(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	key, _ := KeyFrom(req.Extra.TokenInfo)
	uri := req.Params.URI
	r := f.reg.Snapshot(key.ProjectID).Resources[uri]
	if r == nil || r.Def.Template {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	target := func(s *agents.Snapshot) ([]*agents.Replica, time.Time, bool) {
		r := s.Resources[uri]
		if r == nil {
			return nil, time.Time{}, false
		}
		return r.Replicas, r.GraceUntil, true
	}
	raw, err := f.deliverRead(ctx, key, agentproto.KindResource, uri, uri, r.AgentKey, nil, target, callerCaps(req.Session, req.Params.Meta))
	if err != nil {
		return nil, err
	}
	return resourceContents(uri, r, raw)
}

// TemplateHandler reads a resource through the template it matches: the
// agent's template handler gets the URI and the template's variables.
func (f *Pipeline) TemplateHandler(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	key, _ := KeyFrom(req.Extra.TokenInfo)
	uri := req.Params.URI
	r, params := matchTemplate(f.reg.Snapshot(key.ProjectID), uri)
	if r == nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	tmpl := r.Def.URI
	target := func(s *agents.Snapshot) ([]*agents.Replica, time.Time, bool) {
		r := s.Resources[tmpl]
		if r == nil || !r.Def.Template {
			return nil, time.Time{}, false
		}
		return r.Replicas, r.GraceUntil, true
	}
	args, _ := json.Marshal(map[string]any{"uri": uri, "params": params})
	raw, err := f.deliverRead(ctx, key, agentproto.KindResource, uri, tmpl, r.AgentKey, args, target, callerCaps(req.Session, req.Params.Meta))
	if err != nil {
		return nil, err
	}
	return resourceContents(uri, r, raw)
}

// matchTemplate finds the project's resource template that uri matches,
// first by template order, and the values of its variables.
func matchTemplate(s *agents.Snapshot, uri string) (*agents.Resource, map[string]string) {
	for _, r := range s.ResourceList {
		if !r.Def.Template {
			continue
		}
		t, err := uritemplate.New(r.Def.URI)
		if err != nil {
			continue // checked at registration
		}
		vals := t.Match(uri)
		if vals == nil {
			continue
		}
		params := make(map[string]string, len(t.Varnames()))
		for _, name := range t.Varnames() {
			params[name] = vals.Get(name).String()
		}
		return r, params
	}
	return nil, nil
}

// resourceContents turns an agent's read of r at uri into the client's
// result.
func resourceContents(uri string, r *agents.Resource, raw json.RawMessage) (*mcp.ReadResourceResult, error) {
	var rr agentproto.ResourceResult
	if err := json.Unmarshal(raw, &rr); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "The agent sent a resource the gateway could not read: " + err.Error()}
	}
	mime := rr.MimeType
	if mime == "" {
		mime = ResourceMime(r.Def.MimeType)
	}
	if rr.Blob != nil {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Blob: rr.Blob}}}, nil
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: rr.Text}}}, nil
}

func ResourceMime(m string) string {
	if m == "" {
		return "application/json"
	}
	return m
}
