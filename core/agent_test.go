package core

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

type getOrderInput struct {
	ID string `json:"id" desc:"The order id, for example \"1042\""`
}

type searchOrdersInput struct {
	Customer string `json:"customer" desc:"Customer handle, for example \"ada\""`
	Status   string `json:"status,omitempty" desc:"Only orders in this status" enum:"open,shipped,cancelled"`
	Limit    int    `json:"limit,omitempty" desc:"How many orders to return (1 to 50)" min:"1" max:"50" default:"10"`
}

type order struct {
	ID    string   `json:"id"`
	Total int      `json:"total"`
	Tags  []string `json:"tags,omitempty"`
}

func TestNew(t *testing.T) {
	t.Setenv("SPACEFIX_API_KEY", "")
	t.Setenv("SPACEFIX_URL", "")
	tests := []struct {
		name        string
		opts        Options
		env         map[string]string
		wantErr     string
		wantReg     string
		wantConnect string
	}{
		{
			name:    "no key",
			opts:    Options{},
			wantErr: "spacefix keys create --kind agent",
		},
		{
			name:        "key and URL from the environment",
			env:         map[string]string{"SPACEFIX_API_KEY": "k", "SPACEFIX_URL": "https://gw.example.com/base/"},
			wantReg:     "https://gw.example.com/base/v1/agent/register",
			wantConnect: "wss://gw.example.com/base/v1/agent",
		},
		{
			name:        "default URL",
			opts:        Options{APIKey: "k"},
			wantReg:     "http://127.0.0.1:8080/v1/agent/register",
			wantConnect: "ws://127.0.0.1:8080/v1/agent",
		},
		{
			name:        "options win over the environment",
			opts:        Options{APIKey: "k", URL: "ws://localhost:9"},
			env:         map[string]string{"SPACEFIX_URL": "https://ignored"},
			wantReg:     "http://localhost:9/v1/agent/register",
			wantConnect: "ws://localhost:9/v1/agent",
		},
		{name: "bad scheme", opts: Options{APIKey: "k", URL: "ftp://x"}, wantErr: "use http:// or https://"},
		{name: "no host", opts: Options{APIKey: "k", URL: "http://"}, wantErr: "has no host"},
		{name: "bad agent name", opts: Options{APIKey: "k", Name: "my agent"}, wantErr: `invalid agent name "my agent"`},
		{name: "namespace without name", opts: Options{APIKey: "k", Namespace: true}, wantErr: "Namespace needs Options.Name"},
		{name: "long instance", opts: Options{APIKey: "k", Instance: strings.Repeat("i", 65)}, wantErr: "longer than 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			a, err := New(tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.registerURL != tt.wantReg || a.connectURL != tt.wantConnect {
				t.Errorf("URLs = %s, %s; want %s, %s", a.registerURL, a.connectURL, tt.wantReg, tt.wantConnect)
			}
			if a.log == nil || a.client == nil {
				t.Error("Logger or HTTPClient default not set")
			}
		})
	}
}

func TestAddToolErrors(t *testing.T) {
	a, err := New(Options{APIKey: "k"})
	must(t, err)
	ok := func(context.Context, getOrderInput) (string, error) { return "", nil }
	must(t, AddTool(a, "get_order", "d", ok))

	tests := []struct {
		name string
		add  func() error
		want string
	}{
		{"invalid name", func() error { return AddTool(a, "get order", "d", ok) },
			`core: add tool "get order": Invalid tool name "get order".`},
		{"empty name", func() error { return AddTool(a, "", "d", ok) },
			`core: add tool "": Invalid tool name "".`},
		{"too long", func() error { return AddTool(a, strings.Repeat("x", 65), "d", ok) },
			`Invalid tool name "` + strings.Repeat("x", 65) + `".`},
		{"reserved", func() error { return AddTool(a, "a__b", "d", ok) },
			`core: add tool "a__b": Invalid tool name "a__b": names containing "__" are reserved for bridged MCP servers.`},
		{"duplicate", func() error { return AddTool(a, "get_order", "d", ok) },
			`core: add tool "get_order": a tool of that name is already registered; each tool needs its own name`},
		{"input not a struct", func() error {
			return AddTool(a, "n", "d", func(context.Context, int) (string, error) { return "", nil })
		}, `core: tool input must be a struct (tool "n" takes int)`},
		{"bad tag", func() error {
			return AddTool(a, "n", "d", func(context.Context, struct {
				S string `min:"1"`
			}) (string, error) {
				return "", nil
			})
		}, `core: add tool "n": input: schema: field S: tag min applies to numbers, not type string`},
		{"nil handler", func() error { return AddTool[getOrderInput, string](a, "n", "d", nil) },
			`core: add tool "n": the handler is nil`},
		{"timeout above 120 s", func() error { return AddTool(a, "n", "d", ok, Timeout(121*time.Second)) },
			`core: add tool "n": Timeout(2m1s): use a duration above 0 and at most 2m0s`},
		{"call timeout zero", func() error { return AddTool(a, "n", "d", ok, CallTimeout(0)) },
			`core: add tool "n": CallTimeout(0s): use a duration above 0`},
		{"read-only and destructive", func() error { return AddTool(a, "n", "d", ok, ReadOnly(), Destructive()) },
			`core: add tool "n": ReadOnly and Destructive contradict each other`},
		{"prompt name", func() error {
			return a.Prompt("bad name", PromptOptions{}, func(context.Context, map[string]string) (PromptResult, error) {
				return PromptText(""), nil
			})
		}, `core: add prompt "bad name": Invalid prompt name "bad name".`},
		{"resource URI", func() error {
			return a.Resource("open-orders", ResourceOptions{Name: "x"}, func(context.Context) (any, error) { return nil, nil })
		}, `core: add resource "open-orders": use an absolute URI such as orders://open`},
		{"resource name", func() error {
			return a.Resource("orders://open", ResourceOptions{}, func(context.Context) (any, error) { return nil, nil })
		}, `core: add resource "orders://open": ResourceOptions.Name is required`},
		{"unknown tool for SetEnabled", func() error { return a.SetEnabled("nope", false) },
			`core: set enabled "nope": no tool of that name is registered`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.add()
			if err == nil {
				t.Fatalf("got no error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q\nwant it to contain %q", err, tt.want)
			}
		})
	}
	if MaxTimeout != agentproto.MaxToolTimeoutMs*time.Millisecond {
		t.Errorf("MaxTimeout = %v, the protocol says %dms", MaxTimeout, agentproto.MaxToolTimeoutMs)
	}
	if n := len(a.tools); n != 1 {
		t.Errorf("%d tools registered after the failures, want 1", n)
	}
}

func TestRegisterAfterRun(t *testing.T) {
	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
	ok := func(context.Context, getOrderInput) (string, error) { return "", nil }
	must(t, AddTool(a, "get_order", "d", ok))
	p.play(a, script(t, connected+`
-- do --
addAfterRun
`), actions{"addAfterRun": func(string) {
		err := AddTool(a, "x", "d", ok)
		if want := `core: add tool "x": the agent is already running; register everything before Run`; err == nil || err.Error() != want {
			t.Errorf("AddTool after Run = %v, want %q", err, want)
		}
		err = a.Resource("orders://x", ResourceOptions{Name: "x"}, func(context.Context) (any, error) { return nil, nil })
		if err == nil || !strings.Contains(err.Error(), "already running") {
			t.Errorf("Resource after Run = %v", err)
		}
		err = a.Prompt("p", PromptOptions{}, func(context.Context, map[string]string) (PromptResult, error) { return PromptResult{}, nil })
		if err == nil || !strings.Contains(err.Error(), "already running") {
			t.Errorf("Prompt after Run = %v", err)
		}
		if err := a.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "Run was already called") {
			t.Errorf("second concurrent Run = %v, want an error", err)
		}
		p.stop()
		if err := a.Run(context.Background()); err == nil {
			t.Error("Run after Run returned: no error")
		}
	}})
}

func TestRegistrationBody(t *testing.T) {
	p := newPlayer(t)
	a, err := New(Options{APIKey: testKey, URL: p.url(), Name: "orders", DisplayName: "Orders", Author: "Ada",
		Namespace: true, Instance: "eu-1", Version: "1.4.2", Logger: discard()})
	must(t, err)
	must(t, AddTool(a, "get_order", "Look up one order by its id.",
		func(context.Context, getOrderInput) (order, error) { return order{}, nil },
		ReadOnly(), Title("Get an order"), Timeout(60*time.Second), CallTimeout(55*time.Second)))
	must(t, AddTool(a, "search_orders", "List orders.",
		func(context.Context, *searchOrdersInput) ([]order, error) { return nil, nil },
		StrictInput(), Idempotent(), OpenWorld(), CallTimeout(5*time.Second))) // the gateway's wait stays the project's
	must(t, AddTool(a, "delete_order", "Delete an order.",
		func(context.Context, getOrderInput) (ToolResult, error) { return TextResult("ok"), nil },
		Destructive(), Timeout(1500*time.Microsecond)))
	must(t, a.SetEnabled("delete_order", false))
	must(t, a.Resource("orders://open", ResourceOptions{Name: "Open orders", Description: "Every open order"},
		func(context.Context) (any, error) { return nil, nil }))
	must(t, a.Resource("orders://stats.csv", ResourceOptions{Name: "Stats", MimeType: "text/csv"},
		func(context.Context) (any, error) { return nil, nil }))
	must(t, a.Prompt("summarise_order", PromptOptions{Title: "Summarise an order", Description: "A summary.",
		Args: []PromptArg{{Name: "id", Description: "The order id", Required: true}, {Name: "tone"}}},
		func(context.Context, map[string]string) (PromptResult, error) { return PromptText("x"), nil }))
	p.play(a, script(t, connected), nil)

	want := `{
	  "protocol": 1, "sdk": "go/` + SDKVersion + `", "name": "orders", "namespace": true, "instance": "eu-1",
	  "version": "1.4.2", "displayName": "Orders", "author": "Ada",
	  "tools": [
	    {"name": "get_order", "title": "Get an order", "description": "Look up one order by its id.",
	     "inputSchema": {"type":"object","properties":{"id":{"type":"string","description":"The order id, for example \"1042\""}},"required":["id"]},
	     "outputSchema": {"type":"object","properties":{"id":{"type":"string"},"total":{"type":"integer"},"tags":{"type":["array","null"],"items":{"type":"string"}}},"required":["id","total"]},
	     "annotations": {"title": "Get an order", "readOnlyHint": true},
	     "timeoutMs": 60000},
	    {"name": "search_orders", "description": "List orders.",
	     "inputSchema": {"type":"object","properties":{"customer":{"type":"string","description":"Customer handle, for example \"ada\""},"status":{"type":"string","description":"Only orders in this status","enum":["open","shipped","cancelled"]},"limit":{"type":"integer","description":"How many orders to return (1 to 50)","minimum":1,"maximum":50,"default":10}},"required":["customer"],"additionalProperties":false},
	     "annotations": {"idempotentHint": true, "openWorldHint": true}},
	    {"name": "delete_order", "description": "Delete an order.",
	     "inputSchema": {"type":"object","properties":{"id":{"type":"string","description":"The order id, for example \"1042\""}},"required":["id"]},
	     "annotations": {"destructiveHint": true}, "timeoutMs": 2, "disabled": true}
	  ],
	  "resources": [
	    {"uri": "orders://open", "name": "Open orders", "description": "Every open order", "mimeType": "application/json"},
	    {"uri": "orders://stats.csv", "name": "Stats", "mimeType": "text/csv"}
	  ],
	  "prompts": [
	    {"name": "summarise_order", "title": "Summarise an order", "description": "A summary.",
	     "arguments": [{"name": "id", "description": "The order id", "required": true}, {"name": "tone"}]}
	  ]
	}`
	regs := p.registrations()
	if len(regs) != 1 {
		t.Fatalf("%d registrations, want 1", len(regs))
	}
	if diff := cmp.Diff(decode(t, want), decode(t, string(regs[0]))); diff != "" {
		t.Errorf("registration mismatch (-want +got):\n%s", diff)
	}
}

func TestEmptyRegistrationHasToolsArray(t *testing.T) {
	a, err := New(Options{APIKey: "k"})
	must(t, err)
	reg, _ := a.registration()
	b, _ := json.Marshal(reg)
	if !strings.Contains(string(b), `"tools":[]`) {
		t.Errorf("registration = %s, want \"tools\":[]", b)
	}
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v in %s", err, s)
	}
	return v
}
