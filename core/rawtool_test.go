package core

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/spacefix/spacefix/core/internal/agentproto"
	"github.com/spacefix/spacefix/core/internal/bridgehook"
)

// RawTool refuses what the gateway would refuse, with the reason, before
// Run; a bridge's names must carry its prefix.
func TestRawToolRefuses(t *testing.T) {
	h := func(ctx context.Context, args json.RawMessage) (any, error) { return "ok", nil }
	obj := json.RawMessage(`{"type":"object"}`)
	plain, err := New(Options{APIKey: "k", Name: "fs"})
	if err != nil {
		t.Fatal(err)
	}
	bridge, err := newAgent(Options{APIKey: "k", Name: "fs"}, bridgehook.Config{Bridge: &agentproto.Bridge{Transport: "stdio"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		a      *Agent
		name   string
		schema json.RawMessage
		opts   []ToolOption
		want   string
	}{
		{plain, "x", json.RawMessage(`[]`), nil, `core: add tool "x": input schema: it must be a JSON object`},
		{plain, "x", json.RawMessage(`{"type":"array"}`), nil, `core: add tool "x": input schema: it must have "type": "object"`},
		{plain, "x", obj, []ToolOption{StrictInput()}, `core: add tool "x": StrictInput applies to struct inputs; write "additionalProperties": false into the raw schema`},
		{plain, "x", obj, []ToolOption{OutputSchema(json.RawMessage(`{}`))}, `core: add tool "x": OutputSchema: it must have "type": "object"`},
		{plain, "fs__x", obj, nil, `core: add tool "fs__x": Invalid tool name "fs__x": names containing "__" are reserved for bridged MCP servers.`},
		{bridge, "x", obj, nil, `core: add tool "x": Invalid tool name "x": a bridged agent's names start with its name and "__" ("fs__").`},
		{bridge, "fs__x", obj, nil, ""},
	} {
		err := c.a.RawTool(c.name, "d", c.schema, h, c.opts...)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("RawTool(%q, %s) = %q, want %q", c.name, c.schema, got, c.want)
		}
	}
	if _, err := newAgent(Options{APIKey: "k"}, bridgehook.Config{Bridge: &agentproto.Bridge{}}); err == nil {
		t.Errorf("New accepted a bridge without a name")
	}
}

// A raw handler's json.RawMessage goes out as the whole CallToolResult.
func TestRawToolResult(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"content":[{"type":"resource_link","uri":"file:///a","name":"a"}],"structuredContent":{"n":1},"_meta":{"x":1}}`, ""},
		{`{"content":[]}`, ""},
		{`{"structuredContent":{}}`, `The tool's result is not an MCP CallToolResult: it needs a "content" array.`},
	} {
		out, err := rawToolResult(json.RawMessage(c.in))
		switch {
		case c.want == "" && (err != nil || string(out) != c.in):
			t.Errorf("rawToolResult(%s) = %s, %v", c.in, out, err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("rawToolResult(%s) error = %v, want %q", c.in, err, c.want)
		}
	}
}
