package access

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/policy"
)

// TestShapeResultLeavesTheCachedResult: a redaction makes a copy; the result
// it read (the cache's, shared by every hit) is left as it was.
func TestShapeResultLeavesTheCachedResult(t *testing.T) {
	doc, err := policy.Parse([]byte(`{"rules":[{"name":"pii","on":"result","effect":"redact","redact":["\\w+@\\w+\\.com"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Compile(doc, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cached := &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: "mail ann@example.com"}},
		StructuredContent: json.RawMessage(`{"email":"ann@example.com","n":3}`),
	}
	d := p.Decide(policy.OnResult, &policy.Input{Tool: policy.Tool{Name: "profile"}, Result: PolicyResult(cached)})
	if d.Effect != policy.Redact {
		t.Fatalf("decision %+v, want redact", d)
	}
	out := ShapeResult(cached, &d)
	if got := firstText(out); got != "mail [redacted]" {
		t.Errorf("redacted text = %q", got)
	}
	if d := cmp.Diff(map[string]any{"email": "[redacted]", "n": json.Number("3")}, out.StructuredContent); d != "" {
		t.Errorf("redacted structured content (-want +got):\n%s", d)
	}
	if got := firstText(cached); got != "mail ann@example.com" {
		t.Errorf("the cached result was changed: %q", got)
	}
	if got := string(cached.StructuredContent.(json.RawMessage)); got != `{"email":"ann@example.com","n":3}` {
		t.Errorf("the cached structured content was changed: %s", got)
	}
}

// A deny answers the tool error carrying the rule's message; no decision
// leaves the result as it is.
func TestShapeResultDeny(t *testing.T) {
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the secret is 42"}}}
	got := ShapeResult(out, &policy.Decision{Effect: policy.Deny, Rule: "no-secrets", Message: "No secrets."})
	if !got.IsError || firstText(got) != "No secrets." || len(got.Content) != 1 {
		t.Errorf("deny = %+v, want a tool error with the message", got)
	}
	if got := ShapeResult(out, &policy.Decision{}); got != out {
		t.Errorf("no decision = %+v, want the result itself", got)
	}
}

func firstText(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}

// TestShapeResultRedactsEveryText: a redaction reaches the text of an
// embedded resource as it does a text content's, and leaves what is not a
// string as the agent sent it (a large integer keeps every digit).
func TestShapeResultRedactsEveryText(t *testing.T) {
	p, err := policy.Compile(policy.Document{Rules: []policy.Rule{{Name: "pii", On: "result", Effect: "redact", Redact: []string{`\w+@\w+\.com`}}}}, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///ann.txt", MIMEType: "text/plain", Text: "ann@example.com"}}},
		StructuredContent: json.RawMessage(`{"id":9007199254740993,"list":[{"to":["ann@example.com"]}]}`),
	}
	d := p.Decide(policy.OnResult, &policy.Input{Tool: policy.Tool{Name: "t"}, Result: PolicyResult(in)})
	out := ShapeResult(in, &d)
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"content":[{"type":"resource","resource":{"uri":"file:///ann.txt","mimeType":"text/plain","text":"[redacted]"}}],"structuredContent":{"id":9007199254740993,"list":[{"to":["[redacted]"]}]}}`
	if string(b) != want {
		t.Errorf("shaped result\n%s\nwant\n%s", b, want)
	}
	if in.Content[0].(*mcp.EmbeddedResource).Resource.Text != "ann@example.com" {
		t.Error("the result read was changed")
	}
}
