package core

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

// ResourceOptions describe a resource registered with [Agent.Resource].
type ResourceOptions struct {
	// Name is the resource's display name; it is required.
	Name string
	// Description tells the model what the resource holds. Empty means none.
	Description string
	// MimeType is the type of the resource's text. Empty means
	// application/json.
	MimeType string
	// Complete, for a [Agent.ResourceTemplate], suggests values as the user
	// types one of its variables in a client (MCP completion/complete):
	// param names the variable, value is what they typed so far, args the
	// other variables already filled in. The first 100 suggestions are
	// passed on. Without it the client gets none.
	Complete func(ctx context.Context, param, value string, args map[string]string) ([]string, error)
}

// resource is one registered resource.
type resource struct {
	def      agentproto.Resource
	h        *handler
	complete *handler // a template's variable suggestions; nil: none
}

// Resource registers a resource: a current view of something, read by its
// URI with no arguments (use a tool for anything with arguments or side
// effects). The handler's string result is sent as is, a []byte as the
// resource's bytes (a blob: base64 on the wire, for images, PDFs and other
// binary data; set MimeType), anything else as its JSON. A failing read reaches the client as a JSON-RPC error with the
// handler's message. The URI must be absolute (orders://open) and the name
// non-empty; registering after [Agent.Run] has started is an error.
func (a *Agent) Resource(uri string, opts ResourceOptions, h func(ctx context.Context) (any, error)) error {
	if u, err := url.Parse(uri); err != nil || u.Scheme == "" {
		return fmt.Errorf("core: add resource %q: use an absolute URI such as orders://open", uri)
	}
	mime, err := opts.check(fmt.Sprintf("add resource %q", uri), h == nil)
	if err != nil {
		return err
	}
	r := &resource{
		def: agentproto.Resource{URI: uri, Name: opts.Name, Description: opts.Description, MimeType: mime},
		h: &handler{run: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			v, err := h(ctx)
			if err != nil {
				return nil, handlerError(err)
			}
			return resourceResult(v, mime)
		}},
	}
	return a.addResource(r)
}

// ResourceTemplate registers a resource template: resources named by an
// RFC 6570 URI template such as orders://orders/{id} (simple {var}
// expansions match one path segment, {+var} any text). Clients list it
// with resources/templates/list and read any URI it matches; the handler
// gets the URI read and the template's variables by name. Its result is
// sent as [Agent.Resource]'s is.
func (a *Agent) ResourceTemplate(uriTemplate string, opts ResourceOptions, h func(ctx context.Context, uri string, params map[string]string) (any, error)) error {
	i := strings.Index(uriTemplate, "{")
	if u, err := url.Parse(uriTemplate[:max(i, 0)]); i < 0 || err != nil || u.Scheme == "" || !strings.Contains(uriTemplate[i:], "}") {
		return fmt.Errorf("core: add resource template %q: use an absolute URI template with a variable, such as orders://orders/{id}", uriTemplate)
	}
	mime, err := opts.check(fmt.Sprintf("add resource template %q", uriTemplate), h == nil)
	if err != nil {
		return err
	}
	r := &resource{
		def: agentproto.Resource{URI: uriTemplate, Name: opts.Name, Description: opts.Description, MimeType: mime, Template: true,
			Completable: opts.Complete != nil},
		h: &handler{run: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct {
				URI    string            `json:"uri"`
				Params map[string]string `json:"params"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, fmt.Errorf("the gateway sent a template read this agent cannot read: %v", err)
			}
			v, err := h(ctx, in.URI, in.Params)
			if err != nil {
				return nil, handlerError(err)
			}
			return resourceResult(v, mime)
		}},
	}
	if opts.Complete != nil {
		r.complete = completion(opts.Complete)
	}
	return a.addResource(r)
}

// check says what is wrong with the options of a resource or template
// (what names it), or returns its MIME type, application/json by default.
func (o ResourceOptions) check(what string, nilHandler bool) (mime string, err error) {
	if o.Name == "" {
		return "", fmt.Errorf("core: %s: ResourceOptions.Name is required", what)
	}
	if nilHandler {
		return "", fmt.Errorf("core: %s: the handler is nil", what)
	}
	if o.MimeType == "" {
		return "application/json", nil
	}
	return o.MimeType, nil
}

// resourceResult encodes a resource handler's value: a string as is, bytes
// as a blob, anything else as its JSON.
func resourceResult(v any, mime string) (json.RawMessage, error) {
	if b, ok := v.([]byte); ok {
		if b == nil {
			b = []byte{}
		}
		return sized(agentproto.ResourceResult{Blob: b, MimeType: mime})
	}
	text, ok := plainText(v)
	if !ok {
		data, err := marshal(v)
		if err != nil {
			return nil, resultError(err)
		}
		text = string(data)
	}
	return sized(agentproto.ResourceResult{Text: text, MimeType: mime})
}

// addResource registers r unless its URI is taken.
func (a *Agent) addResource(r *resource) error {
	uri := r.def.URI
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.checkOpen(fmt.Sprintf("add resource %q", uri)); err != nil {
		return err
	}
	for _, other := range a.resources {
		if other.def.URI == uri {
			return fmt.Errorf("core: add resource %q: a resource with that URI is already registered", uri)
		}
	}
	a.resources = append(a.resources, r)
	return nil
}

// ResourceChanged tells the gateway that the resource at uri (registered,
// or matched by a registered template) has changed: MCP clients subscribed
// to it get notifications/resources/updated and read it again. It returns
// an error when uri is not one of the agent's, or when the agent is not
// connected (nobody can be subscribed then). The gateway passes on at most
// 600 a minute per replica.
func (a *Agent) ResourceChanged(uri string) error {
	a.mu.Lock()
	known := false
	for _, r := range a.resources {
		if r.def.URI == uri || (r.def.Template && strings.HasPrefix(uri, r.def.URI[:strings.Index(r.def.URI, "{")])) {
			known = true
		}
	}
	s := a.sess
	a.mu.Unlock()
	if !known {
		return fmt.Errorf("core: resource changed %q: no resource or template of this agent has that URI", uri)
	}
	if s == nil {
		return fmt.Errorf("core: resource changed %q: the agent is not connected", uri)
	}
	return s.send(agentproto.Message{Type: agentproto.TypeUpdated, Name: uri})
}
