package core

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/core/internal/agentproto"
	"github.com/spacefix/spacefix/core/internal/bridgehook"
)

// A bridge's description goes into its registration as it was given, and
// OnConnect hears the gateway's welcome.
func TestRegistrationBridge(t *testing.T) {
	p := newPlayer(t)
	welcomed := make(chan struct{}, 1)
	bridge := &agentproto.Bridge{Transport: "streamable-http", Target: "https://mcp.example.com/…",
		PerPerson: &agentproto.PerPerson{Mode: "connect", URL: "https://mcp.example.com/mcp", Fallback: "shared"}}
	a, err := newAgent(Options{APIKey: testKey, URL: p.url(), Name: "gh", Logger: discard(), OnConnect: func() { welcomed <- struct{}{} }},
		bridgehook.Config{Bridge: bridge})
	must(t, err)
	reg, _ := a.registration()
	got, err := json.Marshal(reg.Bridge)
	must(t, err)
	want := `{"transport":"streamable-http","target":"https://mcp.example.com/…","perPerson":{"mode":"connect","url":"https://mcp.example.com/mcp","fallback":"shared"}}`
	if string(got) != want {
		t.Errorf("registration's bridge = %s, want %s", got, want)
	}
	p.play(a, script(t, connected), nil)
	receive(t, welcomed, "OnConnect")

	plain, err := New(Options{APIKey: "k", Name: "gh"})
	must(t, err)
	if reg, _ := plain.registration(); reg.Bridge != nil {
		t.Errorf("an ordinary agent's registration has a bridge: %+v", reg.Bridge)
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
