package agentproto

import (
	"encoding/json"
	"testing"
)

func TestCheckIdempotencyKey(t *testing.T) {
	const prefix = `Tool "create_order" names "requestId" as its idempotency key, but `
	cases := []struct {
		schema string
		want   string // "" for accepted
	}{
		{`{"type":"object","properties":{"requestId":{"type":"string"}},"required":["requestId"]}`, ""},
		{`{"type":"object","properties":{"item":{"type":"string"}},"required":["item"]}`, prefix + "the input schema has no such argument; make it a required string argument."},
		{`{"type":"object"}`, prefix + "the input schema has no such argument; make it a required string argument."},
		{`{"type":"object","properties":{"requestId":{"type":"string"}}}`, prefix + "it is not required; make it a required string argument."},
		{`{"type":"object","properties":{"requestId":{"type":"integer"}},"required":["requestId"]}`, prefix + "it is not a string; make it a required string argument."},
		{`{"type":"object","properties":{"requestId":{}},"required":["requestId"]}`, prefix + "it is not a string; make it a required string argument."},
	}
	for _, c := range cases {
		tool := &Tool{Name: "create_order", InputSchema: json.RawMessage(c.schema), IdempotencyKey: "requestId"}
		err := CheckIdempotencyKey(tool)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("schema %s:\n got  %q\n want %q", c.schema, got, c.want)
		}
	}
	if err := CheckIdempotencyKey(&Tool{Name: "t", InputSchema: json.RawMessage(`{}`)}); err != nil {
		t.Errorf("no key: %v", err)
	}
}

func TestRetryFieldsOnTheWire(t *testing.T) {
	b, err := json.Marshal(Message{Type: TypeCall, ID: "c2", RetryOf: "c1", RetryReason: RetryTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"call","id":"c2","retryOf":"c1","retryReason":"timeout"}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	b, _ = json.Marshal(Tool{Name: "t", InputSchema: json.RawMessage(`{}`), IdempotencyKey: "requestId"})
	if want := `{"name":"t","description":"","inputSchema":{},"idempotencyKey":"requestId"}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}
