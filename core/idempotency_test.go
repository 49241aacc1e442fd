package core

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type createOrderIn struct {
	RequestID string `json:"requestId" desc:"A unique id for this attempt"`
	Customer  string `json:"customer"`
	Note      string `json:"note,omitempty"`
	Total     int    `json:"total"`
}

func TestIdempotencyKeyRule(t *testing.T) {
	const prefix = `Tool "create_order" names `
	create := func(context.Context, createOrderIn) (string, error) { return "", nil }
	raw := func(context.Context, json.RawMessage) (any, error) { return "", nil }
	tests := []struct {
		name string
		add  func(a *Agent) error
		want string // "" when the tool registers
	}{
		{"AddTool, a required string", func(a *Agent) error {
			return AddTool(a, "create_order", "d", create, IdempotencyKey("requestId"))
		}, ""},
		{"AddTool, no such argument", func(a *Agent) error {
			return AddTool(a, "create_order", "d", create, IdempotencyKey("request_id"))
		}, prefix + `"request_id" as its idempotency key, but the input schema has no such argument; make it a required string argument.`},
		{"AddTool, not required", func(a *Agent) error {
			return AddTool(a, "create_order", "d", create, IdempotencyKey("note"))
		}, prefix + `"note" as its idempotency key, but it is not required; make it a required string argument.`},
		{"AddTool, not a string", func(a *Agent) error {
			return AddTool(a, "create_order", "d", create, IdempotencyKey("total"))
		}, prefix + `"total" as its idempotency key, but it is not a string; make it a required string argument.`},
		{"AddTool, empty", func(a *Agent) error {
			return AddTool(a, "create_order", "d", create, IdempotencyKey(""))
		}, `core: add tool "create_order": IdempotencyKey(""): name the tool's request id argument, for example "requestId"`},
		{"RawTool, a required string", func(a *Agent) error {
			return a.RawTool("create_order", "d", json.RawMessage(`{"type":"object","properties":{"requestId":{"type":"string"}},"required":["requestId"]}`), raw, IdempotencyKey("requestId"))
		}, ""},
		{"RawTool, not required", func(a *Agent) error {
			return a.RawTool("create_order", "d", json.RawMessage(`{"type":"object","properties":{"requestId":{"type":"string"}}}`), raw, IdempotencyKey("requestId"))
		}, prefix + `"requestId" as its idempotency key, but it is not required; make it a required string argument.`},
		{"RawTool, not a string", func(a *Agent) error {
			return a.RawTool("create_order", "d", json.RawMessage(`{"type":"object","properties":{"requestId":{"type":"integer"}},"required":["requestId"]}`), raw, IdempotencyKey("requestId"))
		}, prefix + `"requestId" as its idempotency key, but it is not a string; make it a required string argument.`},
		{"RawTool, no such argument", func(a *Agent) error {
			return a.RawTool("create_order", "d", json.RawMessage(`{"type":"object","required":["requestId"]}`), raw, IdempotencyKey("requestId"))
		}, prefix + `"requestId" as its idempotency key, but the input schema has no such argument; make it a required string argument.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(Options{APIKey: "k", Logger: discard()})
			must(t, err)
			err = tt.add(a)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("error = %q\nwant    %q", got, tt.want)
			}
			if n := len(a.tools); (tt.want == "") != (n == 1) {
				t.Errorf("%d tools registered after error %q", n, got)
			}
		})
	}
}

// TestIdempotencyKeyRegistered checks that the key goes to the gateway in
// the tool's registration, and only for the tool that names one.
func TestIdempotencyKeyRegistered(t *testing.T) {
	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
	must(t, AddTool(a, "create_order", "Create an order.",
		func(context.Context, createOrderIn) (string, error) { return "", nil }, IdempotencyKey("requestId")))
	must(t, AddTool(a, "get_order", "Look up an order.",
		func(context.Context, getOrderInput) (string, error) { return "", nil }))
	p.play(a, script(t, connected), nil)

	var reg struct {
		Tools []map[string]any `json:"tools"`
	}
	must(t, json.Unmarshal(p.registrations()[0], &reg))
	keys := map[string]any{}
	for _, tool := range reg.Tools {
		keys[tool["name"].(string)] = tool["idempotencyKey"]
	}
	if diff := cmp.Diff(map[string]any{"create_order": "requestId", "get_order": nil}, keys); diff != "" {
		t.Errorf("idempotencyKey per tool (-want +got):\n%s", diff)
	}
}

// TestCallFromRetry checks that a handler sees a re-delivery after an
// unknown outcome as a retry of the earlier call, and a first delivery as
// none.
func TestCallFromRetry(t *testing.T) {
	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
	seen := make(chan Call, 2)
	must(t, AddTool(a, "create_order", "d", func(ctx context.Context, in createOrderIn) (string, error) {
		c, _ := CallFrom(ctx)
		seen <- c
		return "order 1045", nil
	}, IdempotencyKey("requestId")))
	next := func(id string) Call {
		select {
		case c := <-seen:
			return c
		case <-time.After(waitFor):
			t.Fatalf("the handler did not run for %s", id)
			return Call{}
		}
	}
	p.play(a, script(t, connected+`
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"create_order","args":{"requestId":"r-81","customer":"ada","total":1999}}
-- agent --
{"type":"result","id":"c-1"}
-- do --
first c-1
-- gateway --
{"type":"call","id":"c-2","kind":"tool","name":"create_order","args":{"requestId":"r-81","customer":"ada","total":1999},"retryOf":"c-1","retryReason":"timeout"}
-- agent --
{"type":"result","id":"c-2"}
-- do --
retry c-2
`), actions{
		"first": func(id string) {
			c := next(id)
			if c.RetryOf != "" || c.RetryReason != "" {
				t.Errorf("a first delivery has RetryOf %q, RetryReason %q; want both empty", c.RetryOf, c.RetryReason)
			}
		},
		"retry": func(id string) {
			c := next(id)
			if c.ID != "c-2" || c.RetryOf != "c-1" || c.RetryReason != "timeout" {
				t.Errorf("CallFrom = ID %q, RetryOf %q, RetryReason %q; want c-2, c-1, timeout", c.ID, c.RetryOf, c.RetryReason)
			}
		},
	})
}
