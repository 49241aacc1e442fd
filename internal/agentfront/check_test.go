package agentfront

import (
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/schema"
	"github.com/spacefix/spacefix/internal/store"
)

// Check refuses a registration with the message its developer reads, for
// the rules that need more than the registration's own fields: the exposed
// (namespaced) name and the schema compiler.
func TestAgentFrontCheck(t *testing.T) {
	obj := json.RawMessage(`{"type":"object"}`)
	long := strings.Repeat("t", 60)
	br := &agentproto.Bridge{Transport: "stdio", Target: "npx server"}
	for _, c := range []struct {
		name       string
		reg        agentproto.Registration
		kind, what string // the RegistrationError's Kind and Name
		want       string
	}{
		{"accepted", agentproto.Registration{Protocol: 1, Name: "crm", Namespace: true,
			Tools: []agentproto.Tool{{Name: "find", InputSchema: obj}}}, "", "", ""},
		{"namespace makes the name too long", agentproto.Registration{Protocol: 1, Name: "my-crm", Namespace: true,
			Tools: []agentproto.Tool{{Name: long, InputSchema: obj}}}, "tool", long,
			`Tool name "` + long + `" becomes "my_crm_` + long + `" with the namespace, longer than 64 characters. Shorten the agent or tool name.`},
		{"namespace makes the name reserved", agentproto.Registration{Protocol: 1, Name: "spacefix", Namespace: true,
			Tools: []agentproto.Tool{{Name: "x", InputSchema: obj}}}, "tool", "x",
			`Invalid tool name "spacefix_x": names starting with "spacefix_" are reserved for the gateway's own tools.`},
		{"the gateway's job tool", agentproto.Registration{Protocol: 1,
			Tools: []agentproto.Tool{{Name: "Spacefix_Job", InputSchema: obj}}}, "tool", "Spacefix_Job",
			`Invalid tool name "Spacefix_Job": names starting with "spacefix_" are reserved for the gateway's own tools.`},
		{"schema does not compile", agentproto.Registration{Protocol: 1,
			Tools: []agentproto.Tool{{Name: "x", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"strung"}}}`)}}}, "tool", "x",
			`Input schema of tool "x" does not compile: `},
		{"bridged names", agentproto.Registration{Protocol: 1, Name: "fs", Bridge: br,
			Tools:   []agentproto.Tool{{Name: "fs__read_file", InputSchema: obj}},
			Prompts: []agentproto.Prompt{{Name: "fs__summarise"}}}, "", "", ""},
		{"__ without bridge", agentproto.Registration{Protocol: 1, Name: "fs",
			Tools: []agentproto.Tool{{Name: "fs__read_file", InputSchema: obj}}}, "tool", "fs__read_file",
			`Invalid tool name "fs__read_file": names containing "__" are reserved for bridged MCP servers.`},
		{"bridged name without prefix", agentproto.Registration{Protocol: 1, Name: "fs", Bridge: br,
			Tools: []agentproto.Tool{{Name: "read_file", InputSchema: obj}}}, "tool", "read_file",
			`Invalid tool name "read_file": a bridged agent's names start with its name and "__" ("fs__").`},
		{"bridged prompt with __ inside", agentproto.Registration{Protocol: 1, Name: "fs", Bridge: br,
			Prompts: []agentproto.Prompt{{Name: "fs__a__b"}}}, "prompt", "fs__a__b",
			`Invalid prompt name "fs__a__b": the server's part "a__b" contains "__", which separates the bridge's name.`},
		{"unprefixed bridge keeps the ordinary rules", agentproto.Registration{Protocol: 1, Name: "fs",
			Bridge: &agentproto.Bridge{Transport: "stdio", Unprefixed: true},
			Tools:  []agentproto.Tool{{Name: "read_file", InputSchema: obj}, {Name: "fs__x", InputSchema: obj}}}, "tool", "fs__x",
			`Invalid tool name "fs__x": names containing "__" are reserved for bridged MCP servers.`},
		{"bridge without name", agentproto.Registration{Protocol: 1, Bridge: br}, "agent", "",
			`A bridged agent needs a name without "__" (got ""): pass --name to spacefix bridge.`},
		{"protocol", agentproto.Registration{Protocol: 2}, "agent", "",
			"Unsupported agent protocol 2: this gateway speaks 1. Upgrade the SDK or the gateway."},
		{"task support", agentproto.Registration{Protocol: 1,
			Tools: []agentproto.Tool{{Name: "a", InputSchema: obj, Execution: &agentproto.Execution{TaskSupport: "optional"}},
				{Name: "b", InputSchema: obj, Execution: &agentproto.Execution{TaskSupport: "required"}},
				{Name: "c", InputSchema: obj, Execution: &agentproto.Execution{}}}}, "", "", ""},
		{"unknown task support", agentproto.Registration{Protocol: 1,
			Tools: []agentproto.Tool{{Name: "report", InputSchema: obj, Execution: &agentproto.Execution{TaskSupport: "sometimes"}}}}, "tool", "report",
			`Task support of tool "report" is "sometimes"; use "forbidden", "optional" or "required".`},
		{"idempotency key", agentproto.Registration{Protocol: 1,
			Tools: []agentproto.Tool{{Name: "create_order", IdempotencyKey: "requestId",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"requestId":{"type":"string"}},"required":["requestId"]}`)}}}, "", "", ""},
		{"idempotency key not required", agentproto.Registration{Protocol: 1,
			Tools: []agentproto.Tool{{Name: "create_order", IdempotencyKey: "requestId",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"requestId":{"type":"string"}}}`)}}}, "tool", "create_order",
			`Tool "create_order" names "requestId" as its idempotency key, but it is not required; make it a required string argument.`},
		{"idempotency key missing", agentproto.Registration{Protocol: 1,
			Tools: []agentproto.Tool{{Name: "create_order", IdempotencyKey: "requestId", InputSchema: obj}}}, "tool", "create_order",
			`Tool "create_order" names "requestId" as its idempotency key, but the input schema has no such argument; make it a required string argument.`},
		{"duplicate prompt", agentproto.Registration{Protocol: 1,
			Prompts: []agentproto.Prompt{{Name: "p"}, {Name: "p"}}}, "prompt", "p", `Duplicate prompt name "p".`},
		{"resource without a scheme", agentproto.Registration{Protocol: 1,
			Resources: []agentproto.Resource{{URI: "open", Name: "Open"}}}, "resource", "open",
			`Invalid resource URI "open": use an absolute URI such as orders://open.`},
		{"template without a variable", agentproto.Registration{Protocol: 1,
			Resources: []agentproto.Resource{{URI: "orders://all", Name: "All", Template: true}}}, "resource", "orders://all",
			`Invalid resource template "orders://all": use an RFC 6570 URI template with at least one variable, such as orders://orders/{id}.`},
		{"template that does not parse", agentproto.Registration{Protocol: 1,
			Resources: []agentproto.Resource{{URI: "orders://orders/{id", Name: "Order", Template: true}}}, "resource", "orders://orders/{id",
			`Invalid resource template "orders://orders/{id": use an RFC 6570 URI template with at least one variable, such as orders://orders/{id}.`},
		{"template", agentproto.Registration{Protocol: 1,
			Resources: []agentproto.Resource{{URI: "orders://orders/{id}", Name: "Order", Template: true}}}, "", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			schemas, err := Check(&c.reg, DefaultLimits())
			if c.want == "" {
				if err != nil || len(schemas) != len(c.reg.Tools) {
					t.Errorf("Check = %d schemas, %v; want one schema a tool and no error", len(schemas), err)
				}
				return
			}
			var re *RegistrationError
			switch {
			case !errors.As(err, &re):
				t.Fatalf("Check = %v, want a *RegistrationError", err)
			case !strings.HasPrefix(err.Error(), c.want):
				t.Errorf("Check = %q, want %q", err, c.want)
			case re.Kind != c.kind || re.Name != c.what:
				t.Errorf("Check refused %s %q, want %s %q", re.Kind, re.Name, c.kind, c.what)
			case schemas != nil:
				t.Errorf("Check refused and returned %d schemas", len(schemas))
			}
		})
	}
}

// A project's settings raise or lower the registration limits; 0 keeps the
// default.
func TestAgentFrontLimitsOf(t *testing.T) {
	got := LimitsOf(store.ProjectSettings{MaxTools: 3, MaxRegistrationBytes: 2048})
	want := Limits{MaxTools: 3, MaxSchema: agentproto.DefaultMaxSchema, MaxResources: agentproto.DefaultMaxResources, MaxRegister: 2048}
	if got != want {
		t.Errorf("LimitsOf = %+v, want %+v", got, want)
	}
}

// replicaRegistration is what each replica of one agent registers.
func replicaRegistration() *agentproto.Registration {
	return &agentproto.Registration{Protocol: agentproto.Version, Name: "orders",
		Tools: []agentproto.Tool{{Name: "get_order", InputSchema: json.RawMessage(
			`{"type":"object","properties":{"id":{"type":"string","pattern":"^[0-9]+$"}},"required":["id"]}`)}}}
}

// 100 replicas of one agent share one compiled input schema.
func TestAgentFrontCheckSharesSchemas(t *testing.T) {
	var first map[string]*schema.Schema
	for i := range 100 {
		got, err := Check(replicaRegistration(), DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = got
		} else if got["get_order"] != first["get_order"] {
			t.Fatalf("replica %d compiled a schema of its own", i)
		}
	}
}

// BenchmarkAgentFrontCheckReplica is the check of one more replica's
// registration when others of the agent are connected (their schema is
// compiled already).
func BenchmarkAgentFrontCheckReplica(b *testing.B) {
	held, _ := Check(replicaRegistration(), DefaultLimits())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Check(replicaRegistration(), DefaultLimits()); err != nil {
			b.Fatal(err)
		}
	}
	runtime.KeepAlive(held)
}

// The idempotency argument's description gains the reuse sentence once,
// and not when it already says to reuse or retry.
func TestAgentFrontDescribeIdempotencyKey(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"type":"object","properties":{"requestId":{"type":"string"}},"required":["requestId"]}`,
			`{"properties":{"requestId":{"description":"Reuse the same value when you retry this call, so it takes effect only once.","type":"string"}},"required":["requestId"],"type":"object"}`},
		{`{"type":"object","properties":{"requestId":{"type":"string","description":"Unique per order"}},"required":["requestId"]}`,
			`{"properties":{"requestId":{"description":"Unique per order. Reuse the same value when you retry this call, so it takes effect only once.","type":"string"}},"required":["requestId"],"type":"object"}`},
		{`{"type":"object","properties":{"requestId":{"type":"string","description":"Send the same id on a RETRY."}}}`,
			`{"type":"object","properties":{"requestId":{"type":"string","description":"Send the same id on a RETRY."}}}`},
		{`{"type":"object"}`, `{"type":"object"}`},
	} {
		if got := string(DescribeIdempotencyKey(json.RawMessage(c.in), "requestId")); got != c.want {
			t.Errorf("DescribeIdempotencyKey(%s)\n got  %s\n want %s", c.in, got, c.want)
		}
	}
	reg := agentproto.Registration{Protocol: 1, Tools: []agentproto.Tool{{Name: "create_order", IdempotencyKey: "requestId",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"requestId":{"type":"string"}},"required":["requestId"]}`)}}}
	if _, err := Check(&reg, DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(reg.Tools[0].InputSchema), ReuseSentence) {
		t.Errorf("Check left the schema as %s", reg.Tools[0].InputSchema)
	}
}
