package bridging

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/spacefix/spacefix/core"
)

// A bridge's description reaches the registration as the wire has it.
func TestWire(t *testing.T) {
	for _, c := range []struct {
		b    Bridge
		want string
	}{
		{Bridge{Transport: "streamable-http", Target: "https://mcp.example.com/…", Server: "gh", ServerVersion: "1.2",
			PerPerson: &PerPerson{Mode: "connect", URL: "https://mcp.example.com/mcp", Fallback: "shared"}},
			`{"transport":"streamable-http","target":"https://mcp.example.com/…","server":"gh","serverVersion":"1.2","perPerson":{"mode":"connect","url":"https://mcp.example.com/mcp","fallback":"shared"}}`},
		{Bridge{Transport: "stdio", Unprefixed: true}, `{"transport":"stdio","unprefixed":true}`},
	} {
		got, err := json.Marshal(c.b.wire())
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("wire(%+v) = %s, want %s", c.b, got, c.want)
		}
	}
}

// New makes an agent whose names carry the bridge's prefix, and refuses a
// bridge without a name as core.New would.
func TestNew(t *testing.T) {
	h := func(ctx context.Context, args json.RawMessage) (any, error) { return "ok", nil }
	obj := json.RawMessage(`{"type":"object"}`)
	a, err := New(core.Options{APIKey: "k", Name: "fs"}, Bridge{Transport: "stdio"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RawTool("fs__read", "d", obj, h); err != nil {
		t.Errorf("RawTool(fs__read) = %v", err)
	}
	want := `core: add tool "read": Invalid tool name "read": a bridged agent's names start with its name and "__" ("fs__").`
	if err := a.RawTool("read", "d", obj, h); err == nil || err.Error() != want {
		t.Errorf("RawTool(read) = %v, want %q", err, want)
	}
	want = `core: a bridge needs Options.Name without "__" and no Namespace: its names are <name>__<tool>`
	for _, opts := range []core.Options{{APIKey: "k"}, {APIKey: "k", Name: "a__b"}, {APIKey: "k", Name: "fs", Namespace: true}} {
		if _, err := New(opts, Bridge{}); err == nil || err.Error() != want {
			t.Errorf("New(%+v) = %v, want %q", opts, err, want)
		}
	}
	t.Setenv("SPACEFIX_API_KEY", "")
	if _, err := New(core.Options{}, Bridge{}); err == nil {
		t.Errorf("New without an API key: no error")
	}
}
