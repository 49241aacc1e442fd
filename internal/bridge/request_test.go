package bridge

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// Types of the test server's custom methods.
type (
	echoParams struct {
		mcp.ParamsBase
		Word  string `json:"word"`
		Extra any    `json:"extra,omitempty"`
	}
	echoResult struct {
		mcp.ResultBase
		Said string `json:"said"`
		Got  any    `json:"got,omitempty"`
	}
)

// customServer is a remote MCP server with one tool and two custom
// methods: x/echo answers its params, x/fail a JSON-RPC error with data.
func customServer(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "custom", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "noop", Description: "does nothing"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	if err := mcp.AddReceivingCustomMethod(s, "x/echo", func(_ context.Context, _ *mcp.ServerSession, p *echoParams) (*echoResult, error) {
		return &echoResult{Said: p.Word, Got: p.Extra}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := mcp.AddReceivingCustomMethod(s, "x/fail", func(context.Context, *mcp.ServerSession, *echoParams) (*echoResult, error) {
		return nil, &jsonrpc.Error{Code: -32001, Message: "no such interceptor", Data: json.RawMessage(`{"name":"x"}`)}
	}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL
}

// A custom request of the gateway's (agentproto.KindRequest) reaches the
// server with its params, and its result or its JSON-RPC error comes back
// as it was; a standard method and params that are not an object are
// refused with a sentence.
func TestCustomRequest(t *testing.T) {
	g := newFakeGateway(t)
	runBridge(t, g, Server{Name: "ix", URL: customServer(t)}, "")
	g.waitTool("ix__noop")

	ans := g.deliver(agentproto.KindRequest, "x/echo", json.RawMessage(`{"word":"hello","extra":{"n":1}}`), nil)
	if ans.Type != agentproto.TypeResult {
		t.Fatalf("x/echo: %s", answerText(ans))
	}
	var got map[string]any
	if err := json.Unmarshal(ans.Result, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"said": "hello", "got": map[string]any{"n": float64(1)}}, got); diff != "" {
		t.Errorf("x/echo's result (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		method string
		params string
		want   agentproto.Message
	}{
		{"x/fail", `{"word":"x"}`, agentproto.Message{Type: agentproto.TypeError, Code: -32001, Message: "no such interceptor", Data: json.RawMessage(`{"name":"x"}`)}},
		{"tools/call", `{"name":"noop"}`, agentproto.Message{Type: agentproto.TypeError, Message: `The bridge does not send "tools/call" as a custom request: it is a standard MCP method.`}},
		{"x/echo", `["word"]`, agentproto.Message{Type: agentproto.TypeError, Message: `The gateway's params for "x/echo" are not a JSON object.`}},
	} {
		ans := g.deliver(agentproto.KindRequest, tc.method, json.RawMessage(tc.params), nil)
		ans.ID = ""
		if diff := cmp.Diff(tc.want, ans); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tc.method, tc.params, diff)
		}
	}
}

// The params' own _meta, and what go-sdk adds to it, go out as one
// _meta beside the params.
func TestRawParamsMeta(t *testing.T) {
	p, err := newRawParams(json.RawMessage(`{"a":1,"_meta":{"k":"v"}}`))
	if err != nil {
		t.Fatal(err)
	}
	p.SetMeta(map[string]any{"k": "v", "added": true})
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"_meta":{"added":true,"k":"v"},"a":1}`; string(b) != want {
		t.Errorf("params = %s, want %s", b, want)
	}
}
