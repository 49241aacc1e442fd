package pipeline

import (
	"encoding/json"
	"testing"

	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/schema"
)

// ajv reports additionalProperties, patternProperties and the like in the
// order the caller wrote the properties; taking the gateway's instance
// argument out must not reorder them (it used to, through a map).
func TestInstanceKeyOrder(t *testing.T) {
	s, err := schema.Compile(json.RawMessage(`{"type":"object","additionalProperties":{"type":"string"}}`))
	if err != nil {
		t.Fatal(err)
	}
	tool := &agents.Tool{Name: "lookup"}
	for _, tc := range []struct{ args, rest, want string }{
		{`{"zeta":1,"instance":"v1","alpha":2}`, `{"zeta":1,"alpha":2}`,
			"Input validation error: Invalid arguments for tool lookup: data/zeta must be string, data/alpha must be string"},
		{`{"instance":"v1", "zeta":1 ,"alpha":2}`, `{"zeta":1,"alpha":2}`,
			"Input validation error: Invalid arguments for tool lookup: data/zeta must be string, data/alpha must be string"},
		{` { "zeta" : 1 , "alpha" : 2 , "instance" : "v1" } `, `{"zeta" : 1,"alpha" : 2}`,
			"Input validation error: Invalid arguments for tool lookup: data/zeta must be string, data/alpha must be string"},
		{`{"instance":"v1"}`, `{}`, ""},
	} {
		rest, instance, err := prepareArgs(tool, json.RawMessage(tc.args))
		if err != nil || instance != "v1" {
			t.Fatalf("prepareArgs(%s) = instance %q, %v; want v1 and no error", tc.args, instance, err)
		}
		if string(rest) != tc.rest {
			t.Errorf("prepareArgs(%s) left %s, want %s", tc.args, rest, tc.rest)
		}
		got := ""
		if err := validate(s, rest); err != nil {
			got = invalidArgs(tool, err)
		}
		if got != tc.want {
			t.Errorf("call with %s answered %q, want %q", tc.args, got, tc.want)
		}
	}
}
