package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/bridge"
)

// TestBridgeInputRequests bridges go-sdk's everything-server as a stdio
// child spoken to in 2026-07-28 ("protocol": "2026-07-28") and reads what
// a 2026-07-28 client of the gateway reads, byte for byte: the server's
// input requests under the server's own ids (a form, a message from the
// model and the roots, in one round), the server's result once the client
// answers them, and the server's -32021 for a capability the client did
// not declare, with data.requiredCapabilities. A 2025 client of the same
// bridge is asked over its session and gets the same result.
func TestBridgeInputRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	br := e.startBridge(bridge.Server{Name: "ev", Command: binary(t, goEverything), Protocol: "2026-07-28"}, bridge.Options{})
	br.waitLog(t, "connected to the MCP server", "protocol=2026-07-28")

	const all = `{"elicitation":{},"sampling":{},"roots":{}}`
	const tool = "ev__test_input_required_result_multiple_inputs"
	resp, body := modernCallCaps(t, e, e.clientKey, "tools/call", tool, `{"name":"`+tool+`","arguments":{}}`, all)
	var first struct {
		Result struct {
			ResultType    string `json:"resultType"`
			InputRequests map[string]struct {
				Method string         `json:"method"`
				Params map[string]any `json:"params"`
			} `json:"inputRequests"`
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(sseData(body), &first) != nil || first.Result.ResultType != "input_required" || first.Result.RequestState == "" {
		t.Fatalf("first call = %d %s; want an input_required result", resp.StatusCode, body)
	}
	methods := map[string]string{}
	for id, r := range first.Result.InputRequests {
		methods[id] = r.Method
	}
	want := map[string]string{"user_name": "elicitation/create", "greeting": "sampling/createMessage", "client_roots": "roots/list"}
	if d := cmp.Diff(want, methods); d != "" {
		t.Errorf("input requests by id (-the server's +the client's):\n%s", d)
	}
	if msg := first.Result.InputRequests["user_name"].Params["message"]; msg != "What is your name?" {
		t.Errorf("the form's message = %v", msg)
	}

	retry := `{"name":"` + tool + `","arguments":{},"requestState":"` + first.Result.RequestState + `","inputResponses":{` +
		`"user_name":{"action":"accept","content":{"name":"Alice"}},` +
		`"greeting":{"role":"assistant","content":{"type":"text","text":"Hello there!"},"model":"m"},` +
		`"client_roots":{"roots":[{"uri":"file:///work","name":"Work"}]}}}`
	resp, body = modernCallCaps(t, e, e.clientKey, "tools/call", tool, retry, all)
	var done struct {
		Result mcp.CallToolResult `json:"result"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(sseData(body), &done) != nil || done.Result.IsError || text(&done.Result) != "Hello there! Alice — 1 root(s) visible" {
		t.Errorf("retry with the answers = %d %s; want the server's result", resp.StatusCode, body)
	}

	// The server refuses a call whose client did not declare sampling, and
	// the client reads the refusal as the server words its data.
	const needs = "ev__test_missing_capability"
	resp, body = modernCallCaps(t, e, e.clientKey, "tools/call", needs, `{"name":"`+needs+`","arguments":{}}`, `{"elicitation":{}}`)
	var refused struct {
		Error *struct {
			Code int `json:"code"`
			Data struct {
				RequiredCapabilities map[string]any `json:"requiredCapabilities"`
			} `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(sseData(body), &refused) != nil || refused.Error == nil || refused.Error.Code != -32021 || resp.StatusCode != 400 {
		t.Fatalf("a call without sampling = %d %s; want HTTP 400 with JSON-RPC -32021", resp.StatusCode, body)
	}
	if s, ok := refused.Error.Data.RequiredCapabilities["sampling"].(map[string]any); !ok || len(s) != 0 {
		t.Errorf("data.requiredCapabilities = %v; want sampling: {}", refused.Error.Data.RequiredCapabilities)
	}
	if _, ok := refused.Error.Data.RequiredCapabilities["elicitation"]; ok {
		t.Errorf("data.requiredCapabilities = %v names what the client declared", refused.Error.Data.RequiredCapabilities)
	}
	// The same call from a client that declared sampling runs.
	resp, body = modernCallCaps(t, e, e.clientKey, "tools/call", needs, `{"name":"`+needs+`","arguments":{}}`, `{"sampling":{}}`)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Client declared the sampling capability; tool executed.") {
		t.Errorf("a call with sampling = %d %s", resp.StatusCode, body)
	}

	// A 2025 client is asked with elicitation/create on its session.
	var asked []string
	cs := e.connect("2025-11-25", e.clientKey, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = append(asked, r.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Bo"}}, nil
		},
	})
	if r := call(t, cs, "ev__test_input_required_result_elicitation", nil); r.IsError || text(r) != "Hello, Bo!" || !slices.Equal(asked, []string{"What is your name?"}) {
		t.Errorf("a 2025 client's call = %v %q after being asked %q", r.IsError, text(r), asked)
	}
}
