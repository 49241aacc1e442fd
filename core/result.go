package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

// ToolResult is a tool result in MCP's shape. A handler that returns one
// (or a pointer to one) has it sent untouched: 1 to 16 content parts, with
// IsError if set. Build one with [TextResult], [ErrorResult],
// [ImageResult] or [AudioResult], or from [Content] parts.
type ToolResult struct {
	// Content is what the model reads: 1 to 16 parts.
	Content []Content
	// IsError marks the result as a failure the model should react to.
	IsError bool
}

// Content is one part of a [ToolResult] or the body of a [PromptMessage].
// Build one with [Text], [Image], [Audio] or [EmbeddedText].
type Content struct {
	// Type is "text", "image", "audio" or "resource".
	Type string
	// Text is the text of a text part or of an embedded text resource.
	Text string
	// Data is the bytes of an image or audio part; they travel as base64.
	Data []byte
	// MimeType is the type of an image, audio or embedded resource.
	MimeType string
	// URI names an embedded resource.
	URI string
}

// Text returns a text part.
func Text(text string) Content { return Content{Type: "text", Text: text} }

// Image returns an image part of the given MIME type ("image/png").
func Image(data []byte, mimeType string) Content {
	return Content{Type: "image", Data: data, MimeType: mimeType}
}

// Audio returns an audio part of the given MIME type ("audio/wav").
func Audio(data []byte, mimeType string) Content {
	return Content{Type: "audio", Data: data, MimeType: mimeType}
}

// EmbeddedText returns a part that embeds the text of the resource at uri.
func EmbeddedText(uri, mimeType, text string) Content {
	return Content{Type: "resource", URI: uri, MimeType: mimeType, Text: text}
}

// TextResult returns a result of one text part.
func TextResult(text string) ToolResult { return ToolResult{Content: []Content{Text(text)}} }

// ErrorResult returns a failed result whose text the model reads. Write it
// for the model: what went wrong and what to try next.
func ErrorResult(msg string) ToolResult {
	return ToolResult{Content: []Content{Text(msg)}, IsError: true}
}

// ImageResult returns a result of one image part, followed by the caption
// as a text part when it is not empty.
func ImageResult(data []byte, mimeType, caption string) ToolResult {
	return withCaption(Image(data, mimeType), caption)
}

// AudioResult returns a result of one audio part, followed by the caption
// as a text part when it is not empty.
func AudioResult(data []byte, mimeType, caption string) ToolResult {
	return withCaption(Audio(data, mimeType), caption)
}

func withCaption(c Content, caption string) ToolResult {
	r := ToolResult{Content: []Content{c}}
	if caption != "" {
		r.Content = append(r.Content, Text(caption))
	}
	return r
}

// MarshalJSON writes c as an MCP content block.
func (c Content) MarshalJSON() ([]byte, error) {
	type media struct {
		Type     string `json:"type"`
		Data     []byte `json:"data"`
		MimeType string `json:"mimeType"`
	}
	type resource struct {
		URI      string `json:"uri"`
		MimeType string `json:"mimeType,omitempty"`
		Text     string `json:"text"`
	}
	type blob struct {
		URI      string `json:"uri"`
		MimeType string `json:"mimeType,omitempty"`
		Blob     []byte `json:"blob"`
	}
	switch c.Type {
	case "text":
		return marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{c.Type, c.Text})
	case "image", "audio":
		if c.Data == nil {
			c.Data = []byte{}
		}
		return marshal(media{c.Type, c.Data, c.MimeType})
	case "resource":
		var res any = resource{c.URI, c.MimeType, c.Text}
		if c.Data != nil {
			res = blob{c.URI, c.MimeType, c.Data}
		}
		return marshal(struct {
			Type     string `json:"type"`
			Resource any    `json:"resource"`
		}{c.Type, res})
	}
	return nil, fmt.Errorf("content type %q is not text, image, audio or resource", c.Type)
}

// marshal is json.Marshal without HTML escaping: models read this JSON.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// resultError is the message a result sends instead when it cannot be
// serialised.
func resultError(err error) error {
	return fmt.Errorf("Result could not be serialised: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// tooLarge is the message a result over the limit sends instead; the
// wording is the protocol's.
func tooLarge(n int) error {
	return fmt.Errorf("Result is too large: %s bytes; the limit is 4 MiB (%s bytes). Return less, or page through it.",
		agentproto.Thousands(n), agentproto.Thousands(agentproto.MaxResultBytes))
}

// toolResult converts a tool handler's value into the JSON of an MCP
// CallToolResult (docs/agent-protocol.md, "result"). structured says
// whether the JSON of v also goes as structuredContent (typed struct
// outputs); otherwise a value whose JSON is already a tool result (see
// [shaped]) passes through untouched.
func toolResult(v any, structured bool) (json.RawMessage, error) {
	switch r := v.(type) {
	case ToolResult:
		return passThrough(r)
	case *ToolResult:
		if r != nil {
			return passThrough(*r)
		}
	}
	var res agentproto.ToolResult
	if text, ok := plainText(v); ok {
		res.Content = []json.RawMessage{textPart(text)}
	} else {
		data, err := marshal(v)
		if err != nil {
			return nil, resultError(err)
		}
		if !structured {
			if n, ok := shaped(data); ok {
				if n < 1 || n > agentproto.MaxContentParts {
					return nil, fmt.Errorf("Result has %d content parts; a tool result carries 1 to %d.", n, agentproto.MaxContentParts)
				}
				return sized(json.RawMessage(data))
			}
		}
		res.Content = []json.RawMessage{textPart(string(data))}
		if structured && len(data) > 0 && data[0] == '{' {
			res.StructuredContent = data
		}
	}
	return sized(&res)
}

// shaped reports whether data, the JSON of a plain value (a map, an any),
// is already a tool result: an object whose "content" is an array of valid
// MCP content parts. Such a value is sent untouched, as the Node SDK does;
// n is the number of parts.
func shaped(data []byte) (n int, ok bool) {
	if len(data) == 0 || data[0] != '{' {
		return 0, false
	}
	var r struct {
		Content *[]json.RawMessage `json:"content"`
	}
	if json.Unmarshal(data, &r) != nil || r.Content == nil {
		return 0, false
	}
	for _, part := range *r.Content {
		if !validPart(part) {
			return 0, false
		}
	}
	return len(*r.Content), true
}

// validPart reports whether part is a text, image, audio or embedded
// resource content part.
func validPart(part json.RawMessage) bool {
	var p struct {
		Type     string          `json:"type"`
		Text     *string         `json:"text"`
		Data     *string         `json:"data"`
		MimeType *string         `json:"mimeType"`
		Resource json.RawMessage `json:"resource"`
	}
	if json.Unmarshal(part, &p) != nil {
		return false
	}
	switch p.Type {
	case "text":
		return p.Text != nil
	case "image", "audio":
		return p.Data != nil && p.MimeType != nil
	case "resource":
		var res struct {
			URI string `json:"uri"`
		}
		return len(p.Resource) > 0 && p.Resource[0] == '{' && json.Unmarshal(p.Resource, &res) == nil && res.URI != ""
	}
	return false
}

// plainText returns the text of a value sent as is: a string, or "null"
// for nil.
func plainText(v any) (string, bool) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return "null", true
	}
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		if rv.IsNil() {
			return "null", true
		}
	case reflect.String:
		if _, ok := v.(json.Marshaler); !ok {
			return rv.String(), true
		}
	}
	return "", false
}

func textPart(text string) json.RawMessage {
	b, _ := marshal(Text(text)) // a text part always marshals
	return b
}

// passThrough checks and encodes a result the handler shaped itself.
func passThrough(r ToolResult) (json.RawMessage, error) {
	if n := len(r.Content); n < 1 || n > agentproto.MaxContentParts {
		return nil, fmt.Errorf("Result has %d content parts; a tool result carries 1 to %d.", n, agentproto.MaxContentParts)
	}
	res := agentproto.ToolResult{IsError: r.IsError, Content: make([]json.RawMessage, len(r.Content))}
	for i, c := range r.Content {
		b, err := marshal(c)
		if err != nil {
			return nil, resultError(err)
		}
		res.Content[i] = b
	}
	return sized(&res)
}

// sized encodes v and refuses it when it is over the result limit.
func sized(v any) (json.RawMessage, error) {
	b, err := marshal(v)
	if err != nil {
		return nil, resultError(err)
	}
	if len(b) > agentproto.MaxResultBytes {
		return nil, tooLarge(len(b))
	}
	return b, nil
}
