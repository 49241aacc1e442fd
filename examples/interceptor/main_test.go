package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/spacefix/spacefix/internal/interceptors"
	"github.com/spacefix/spacefix/internal/policy"
)

// The example server, driven by the gateway's own interceptor chain:
// a result's e-mail addresses and card numbers are redacted, other
// numbers are left alone, and a request passes untouched.
func TestRedactPII(t *testing.T) {
	hs := httptest.NewServer(Handler())
	defer hs.Close()
	c := interceptors.New([]policy.Interceptor{{Name: "pii", URL: hs.URL + "/mcp"}}, interceptors.Options{})
	defer c.Close()
	if errs := c.Discover(context.Background()); len(errs) > 0 {
		t.Fatal(errs)
	}
	result := `{"content":[{"type":"text","text":"Order 1234567890123 for bob@example.com, paid with 4111 1111 1111 1111."}],` +
		`"structuredContent":{"email":"ann@shop.example.org","card":"5500-0000-0000-0004","total":12.5}}`
	got, out := c.Run(context.Background(), "tools/call", interceptors.PhaseResponse, json.RawMessage(result), nil)
	if out.Blocked {
		t.Fatalf("blocked: %+v", out)
	}
	var v struct {
		Content    []struct{ Text string }
		Structured map[string]any `json:"structuredContent"`
	}
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatal(err)
	}
	if want := "Order 1234567890123 for [redacted], paid with [redacted]."; v.Content[0].Text != want {
		t.Errorf("text = %q, want %q", v.Content[0].Text, want)
	}
	if v.Structured["email"] != "[redacted]" || v.Structured["card"] != "[redacted]" || v.Structured["total"] != 12.5 {
		t.Errorf("structured = %v", v.Structured)
	}
	req := json.RawMessage(`{"name":"x","arguments":{"email":"bob@example.com","order":"1234567890123"}}`)
	if got, out := c.Run(context.Background(), "tools/call", interceptors.PhaseRequest, req, nil); out.Blocked || string(got) != string(req) || len(out.Ran) != 1 {
		t.Errorf("a request = %s %+v, want it untouched, checked by the validator only", got, out)
	}
	req = json.RawMessage(`{"name":"pay","arguments":{"amount":5,"card":{"number":"4111-1111-1111-1111"}}}`)
	_, out = c.Run(context.Background(), "tools/call", interceptors.PhaseRequest, req, nil)
	if want := `This call was refused by interceptor "no-card-numbers": the arguments carry a card number; send its last four digits instead`; !out.Blocked || out.Message != want {
		t.Errorf("a request with a card number: %+v, want blocked with %q", out, want)
	}
}
