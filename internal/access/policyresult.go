package access

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/policy"
)

// PolicyResult is out as a project's rules on result read it (`result` in
// CEL), the same for the call path and for the dashboard's try-it: the
// text content joined by newlines, the structured content decoded, and
// isError.
func PolicyResult(out *mcp.CallToolResult) *policy.Result {
	r := &policy.Result{IsError: out.IsError}
	var text []string
	for _, c := range out.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text = append(text, t.Text)
		}
	}
	r.Text = strings.Join(text, "\n")
	r.Structured, r.Size = structured(out.StructuredContent)
	return r
}

// ShapeResult is out as the caller gets it after the rules on result
// decided d: a tool error carrying the message for deny, a copy with the
// patterns' matches replaced in its text content, the text of its
// embedded resources and every string of its structured content for
// redact, else out itself.
func ShapeResult(out *mcp.CallToolResult, d *policy.Decision) *mcp.CallToolResult {
	switch d.Effect {
	case policy.Deny:
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: d.Message}}}
	case policy.Redact:
	default:
		return out
	}
	r := *out
	r.Meta = maps.Clone(out.Meta)
	r.Content = make([]mcp.Content, len(out.Content))
	for i, c := range out.Content {
		switch t := c.(type) {
		case *mcp.TextContent:
			c = &mcp.TextContent{Text: d.RedactText(t.Text), Annotations: t.Annotations, Meta: t.Meta}
		case *mcp.EmbeddedResource:
			if t.Resource != nil && t.Resource.Text != "" {
				res := *t.Resource
				res.Text = d.RedactText(res.Text)
				c = &mcp.EmbeddedResource{Resource: &res, Annotations: t.Annotations, Meta: t.Meta}
			}
		}
		r.Content[i] = c
	}
	if out.StructuredContent != nil {
		r.StructuredContent = d.RedactValue(exact(out.StructuredContent))
	}
	return &r
}

// exact is a result's structuredContent as decoded JSON whose numbers are
// json.Number: a redaction changes strings only, and an integer past
// 2^53 keeps every digit. Nil when it is not JSON.
func exact(v any) any {
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return nil
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if dec.Decode(&out) != nil {
		return nil
	}
	return out
}

// structured is a result's structuredContent as decoded JSON, and the
// length of its JSON.
func structured(v any) (any, int) {
	if v == nil {
		return nil, 0
	}
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return nil, 0
		}
	}
	var out any
	if json.Unmarshal(raw, &out) != nil {
		return nil, 0
	}
	return out, len(raw)
}
