package core

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/spacefix/spacefix/internal/agentproto"
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
}

// resource is one registered resource.
type resource struct {
	def agentproto.Resource
	h   *handler
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
	if opts.Name == "" {
		return fmt.Errorf("core: add resource %q: ResourceOptions.Name is required", uri)
	}
	if h == nil {
		return fmt.Errorf("core: add resource %q: the handler is nil", uri)
	}
	mime := opts.MimeType
	if mime == "" {
		mime = "application/json"
	}
	r := &resource{
		def: agentproto.Resource{URI: uri, Name: opts.Name, Description: opts.Description, MimeType: mime},
		h: &handler{run: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			v, err := h(ctx)
			if err != nil {
				return nil, handlerError(err)
			}
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
		}},
	}
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
