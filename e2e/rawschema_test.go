package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/core"
)

// paySchema is a raw JSON Schema 2020-12 input schema of the kind a struct
// cannot express: $defs, $ref, $anchor, allOf with if/then/else.
const paySchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",` +
	`"$defs":{"currency":{"$anchor":"cur","type":"string","enum":["EUR","USD"]},"amount":{"type":"number","exclusiveMinimum":0}},` +
	`"properties":{"kind":{"enum":["card","transfer"]},"amount":{"$ref":"#/$defs/amount"},"currency":{"$ref":"#cur"},` +
	`"iban":{"type":"string"},"card":{"type":"string","minLength":12}},"required":["kind","amount"],` +
	`"allOf":[{"if":{"properties":{"kind":{"const":"transfer"}}},"then":{"required":["iban"]},"else":{"required":["card"]}}],` +
	`"additionalProperties":false}`

// tupleSchema has no "$schema": MCP reads it as 2020-12, where prefixItems
// is a tuple and items:false forbids more.
const tupleSchema = `{"type":"object","properties":{"pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}}}`

const payOutput = `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`

// TestRawSchemaTool registers tools with raw JSON Schema through core: the
// client sees the schemas byte for byte, the gateway refuses arguments
// that break them with ajv's messages before the handler runs, and a raw
// CallToolResult with structuredContent passes untouched.
func TestRawSchemaTool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	handled := make(chan json.RawMessage, 10)
	e.startAgent(core.Options{Name: "pay"}, func(a *core.Agent) {
		must(t, a.RawTool("pay", "Pay an amount by card or transfer.", json.RawMessage(paySchema),
			func(ctx context.Context, args json.RawMessage) (any, error) {
				handled <- args
				return json.RawMessage(`{"content":[{"type":"text","text":"{\"id\":\"p1\"}"}],"structuredContent":{"id":"p1"}}`), nil
			}, core.OutputSchema(json.RawMessage(payOutput))))
		must(t, a.RawTool("pair", "Take a pair.", json.RawMessage(tupleSchema),
			func(ctx context.Context, args json.RawMessage) (any, error) { return "ok", nil }))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		res, err := cs.ListTools(context.Background(), nil)
		must(t, err)
		schemas := map[string][2]string{}
		for _, tl := range res.Tools {
			in, _ := json.Marshal(tl.InputSchema)
			out, _ := json.Marshal(tl.OutputSchema)
			schemas[tl.Name] = [2]string{string(in), string(out)}
		}
		want := map[string][2]string{"pay": {compact(t, paySchema), compact(t, payOutput)}, "pair": {compact(t, tupleSchema), "null"}}
		if d := cmp.Diff(want, schemas); d != "" {
			t.Errorf("schemas as listed (-want +got):\n%s", d)
		}

		for _, tc := range []struct {
			tool string
			args map[string]any
			want string
		}{
			{"pay", map[string]any{"kind": "transfer", "amount": 3},
				`Input validation error: Invalid arguments for tool pay: data must have required property 'iban', data must match "then" schema`},
			{"pay", map[string]any{"kind": "card", "amount": 0, "currency": "GBP", "card": "1"},
				`Input validation error: Invalid arguments for tool pay: data/amount must be > 0, data/currency must be equal to one of the allowed values, data/card must NOT have fewer than 12 characters`},
			{"pair", map[string]any{"pair": []any{"a", 1, 2}},
				`Input validation error: Invalid arguments for tool pair: data/pair must NOT have more than 2 items`},
		} {
			r := call(t, cs, tc.tool, tc.args)
			if !r.IsError || text(r) != tc.want {
				t.Errorf("%s(%v): isError=%v %q\nwant %q", tc.tool, tc.args, r.IsError, text(r), tc.want)
			}
		}
		r := call(t, cs, "pay", map[string]any{"kind": "card", "amount": 5, "card": "123456789012"})
		got, _ := json.Marshal(r.StructuredContent)
		if r.IsError || string(got) != `{"id":"p1"}` || text(r) != `{"id":"p1"}` {
			t.Errorf("valid call: isError=%v %q structured %s", r.IsError, text(r), got)
		}
		if args := <-handled; string(args) != `{"amount":5,"card":"123456789012","kind":"card"}` {
			t.Errorf("handler got %s", args)
		}
		if len(handled) != 0 {
			t.Errorf("a refused call reached the handler")
		}
	})
}

func compact(t *testing.T, s string) string {
	t.Helper()
	var v any
	must(t, json.Unmarshal([]byte(s), &v))
	b, _ := json.Marshal(v)
	return string(b)
}
