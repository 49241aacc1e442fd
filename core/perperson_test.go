package core

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// A bridge's per-person mode goes into its registration as the wire has it.
func TestRegistrationPerPerson(t *testing.T) {
	a, err := New(Options{APIKey: "k", Name: "gh", Bridge: &Bridge{Transport: "streamable-http", Target: "https://mcp.example.com/…",
		PerPerson: &PerPerson{Mode: "connect", URL: "https://mcp.example.com/mcp", Fallback: "shared"}}})
	must(t, err)
	reg, _ := a.registration()
	got, err := json.Marshal(reg.Bridge)
	must(t, err)
	want := `{"transport":"streamable-http","target":"https://mcp.example.com/…","perPerson":{"mode":"connect","url":"https://mcp.example.com/mcp","fallback":"shared"}}`
	if string(got) != want {
		t.Errorf("registration's bridge = %s, want %s", got, want)
	}
	b, err := New(Options{APIKey: "k", Name: "gh", Bridge: &Bridge{Transport: "stdio"}})
	must(t, err)
	reg, _ = b.registration()
	if got, _ := json.Marshal(reg.Bridge); string(got) != `{"transport":"stdio"}` {
		t.Errorf("a shared bridge's registration = %s, want no perPerson", got)
	}
}

// The SDK never logs a call's upstream token, not even when the handler
// panics with the call in hand.
func TestUpstreamTokenNotLogged(t *testing.T) {
	p := newPlayer(t)
	a, rec := newTestAgent(t, p)
	must(t, AddTool(a, "boom", "d", func(ctx context.Context, _ emptyIn) (string, error) {
		c, _ := CallFrom(ctx)
		if c.UpstreamToken != "up-secret-7" {
			return "wrong token " + c.UpstreamToken, nil
		}
		panic("boom")
	}))
	p.play(a, script(t, connected+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"boom","args":{},"caller":{"keyId":"key_1","person":{"id":"usr_1"},"upstreamToken":"up-secret-7"}}
-- agent --
{"type":"error","id":"c-1","message":"panic: boom"}
`), nil)
	rec.waitLine(t, "handler panicked")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, line := range rec.lines {
		if strings.Contains(line, "up-secret-7") {
			t.Errorf("a log line carries the upstream token: %s", line)
		}
	}
}
