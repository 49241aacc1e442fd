package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/bridge"
)

// Issue 25, "Declaring it": a tool's task support in tools/list, a
// handler's protocol error, several forms in one round.

// taskAgent offers tools with each task support, tools that end with a
// protocol error, and one that asks two forms at once.
func taskAgent(t *testing.T) func(a *core.Agent) {
	return func(a *core.Agent) {
		done := func(context.Context, Empty) (string, error) { return "done", nil }
		must(t, core.AddTool(a, "report", "A slow report.", done, core.TaskSupport(core.TaskOptional)))
		must(t, a.RawTool("export", "A slow export.", json.RawMessage(`{"type":"object"}`),
			func(context.Context, json.RawMessage) (any, error) { return "done", nil }, core.TaskSupport(core.TaskRequired)))
		must(t, core.AddTool(a, "plain", "A quick answer.", done))
		must(t, core.AddTool(a, "book", "Books, for dates that make sense.", func(context.Context, Empty) (string, error) {
			return "", fmt.Errorf("book: %w", &core.ProtocolError{Code: core.CodeInvalidParams, Message: "bad dates", Data: map[string]string{"field": "from"}})
		}))
		must(t, core.AddTool(a, "reserved", "Fails with a code of the protocol's own.", func(context.Context, Empty) (string, error) {
			return "", &core.ProtocolError{Code: -32601, Message: "not like this"}
		}))
		must(t, a.Resource("orders://archive", core.ResourceOptions{Name: "Archive"}, func(context.Context) (any, error) {
			return nil, &core.ProtocolError{Code: 4001, Message: "the archive moved"}
		}))
		must(t, core.AddTool(a, "two_forms", "Asks for a name and a city in one round.", func(ctx context.Context, _ Empty) (string, error) {
			form := map[string]any{"type": "object", "properties": map[string]any{"value": map[string]any{"type": "string"}}, "required": []string{"value"}}
			r, err := core.Together(ctx, core.Inputs{Elicits: []core.ElicitRequest{
				{Message: "Your name?", Schema: form},
				{Message: "Your city?", Schema: form, ID: "city"},
			}})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s %v, %s %v", r.Elicits[0].Action, r.Elicits[0].Content["value"], r.Elicits[1].Action, r.Elicits[1].Content["value"]), nil
		}, core.Timeout(3*time.Second))) // short: the raw client below never answers
	}
}

// bodyRecorder keeps the bodies of the responses a client reads.
type bodyRecorder struct {
	base http.RoundTripper
	buf  syncBuffer
}

func (r *bodyRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(resp.Body, &r.buf), resp.Body}
	}
	return resp, err
}

// rawToolsList returns the tools of the tools/list result among the JSON
// messages in body (SSE data lines or plain JSON), by name, as raw JSON.
func rawToolsList(t *testing.T, body string) map[string]json.RawMessage {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data: ")
		var msg struct {
			Result struct {
				Tools []json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(line), &msg) != nil || msg.Result.Tools == nil {
			continue
		}
		out := map[string]json.RawMessage{}
		for _, raw := range msg.Result.Tools {
			var n struct{ Name string }
			must(t, json.Unmarshal(raw, &n))
			out[n.Name] = raw
		}
		return out
	}
	t.Fatalf("no tools/list result in %s", body)
	return nil
}

// TestTaskSupportListed: a real go-sdk client's tools/list shows
// execution.taskSupport for the tools that declare optional or required,
// in a 2025 session and at 2026-07-28, and nothing for the others.
func TestTaskSupportListed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, taskAgent(t))
	forEachVersion(t, func(t *testing.T, v string) {
		rec := &bodyRecorder{base: http.DefaultTransport}
		client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp",
			HTTPClient: &http.Client{Transport: bearer{key: e.clientKey, base: rec}}}, &mcp.ClientSessionOptions{ProtocolVersion: v})
		must(t, err)
		defer cs.Close()
		res, err := cs.ListTools(ctx, nil)
		must(t, err)
		tools := rawToolsList(t, rec.buf.String())
		if len(tools) != len(res.Tools) || tools["report"] == nil || tools["export"] == nil || tools["plain"] == nil {
			t.Fatalf("listed %d tools, raw %v; want report, export and plain among them", len(res.Tools), tools)
		}
		for name, want := range map[string]string{
			"report": `"execution":{"taskSupport":"optional"}`,
			"export": `"execution":{"taskSupport":"required"}`,
		} {
			if !strings.Contains(string(tools[name]), want) {
				t.Errorf("%s listed as %s; want %s", name, tools[name], want)
			}
		}
		for _, name := range []string{"plain", "book", "two_forms"} {
			if strings.Contains(string(tools[name]), "execution") {
				t.Errorf("%s listed as %s; want no execution", name, tools[name])
			}
		}
		// The rest of the result is go-sdk's, for the era.
		hasTTL := strings.Contains(rec.buf.String(), `"ttlMs"`)
		if modern := v >= "2026-07-28"; hasTTL != modern {
			t.Errorf("ttlMs in the list at %s: %v, want %v", v, hasTTL, modern)
		}
	})
}

// TestTaskSupportRefused: a registration whose task support is none of the
// three values is refused with a message that says what to use.
func TestTaskSupportRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := regWith("report")
	reg.Tools[0].Execution = &agentproto.Execution{TaskSupport: "sometimes"}
	status, body := e.register(e.agentKey, regJSON(t, reg))
	if want := `Task support of tool "report" is "sometimes"; use "forbidden", "optional" or "required".`; status != http.StatusBadRequest || body != want {
		t.Errorf("register: %d %q; want 400 %q", status, body, want)
	}
}

// TestProtocolErrorReachesClient: a handler's ProtocolError is the
// client's JSON-RPC error — code, message, data — at every version, on
// go-sdk's path and on the early one (2026-07-28 with HTTP 400), for a
// resource read too; a reserved code becomes -32603; each is logged as an
// error with the message, and billed.
func TestProtocolErrorReachesClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, taskAgent(t))
	want := func(t *testing.T, err error, code int64, msg, data string) {
		t.Helper()
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != code || je.Message != msg || string(je.Data) != data {
			t.Errorf("got %v (%T); want JSON-RPC error %d %q with data %s", err, err, code, msg, data)
		}
	}
	calls := 0
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		ctx := context.Background()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "book", Arguments: map[string]any{}})
		if r != nil {
			t.Errorf("book answered with a result %v", r)
		}
		want(t, err, -32602, "bad dates", `{"field":"from"}`)
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "reserved", Arguments: map[string]any{}})
		want(t, err, -32603, "not like this", "")
		_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "orders://archive"})
		want(t, err, 4001, "the archive moved", "")
		calls += 3
	})

	// The early path, as a raw client sees it.
	_, _, before := e.gw.EarlyStats()
	modern := e.post(modernHeaders("book"), modernToolCall(`"b1"`, "book", `{}`, ""))
	s := e.newRawSession(e.clientKey)
	legacy := e.sessionPost(s, legacyCall(`"b2"`, "book", `{}`, ""))
	if _, _, after := e.gw.EarlyStats(); after != before+2 {
		t.Errorf("%d calls answered early, want 2", after-before)
	}
	const rpcErr = `"error":{"code":-32602,"message":"bad dates","data":{"field":"from"}}`
	if modern.status != http.StatusBadRequest || !strings.Contains(modern.body, rpcErr) {
		t.Errorf("2026-07-28 early answer %s; want 400 with %s", modern, rpcErr)
	}
	if legacy.status != http.StatusOK || !strings.Contains(legacy.body, "data: ") || !strings.Contains(legacy.body, rpcErr) {
		t.Errorf("2025-11-25 early answer %s; want an SSE event with %s", legacy, rpcErr)
	}
	calls += 2

	logged := 0
	for _, c := range e.calls() {
		switch c.Name {
		case "book", "reserved", "orders://archive":
			logged++
			if c.Outcome != "error" || !c.Billable || !strings.Contains("bad dates|not like this|the archive moved", c.Error) || c.Error == "" {
				t.Errorf("%s logged as %s %q (billable %v); want a billable error with the message", c.Name, c.Outcome, c.Error, c.Billable)
			}
		}
	}
	if logged != calls {
		t.Errorf("%d protocol errors in the call log, want %d", logged, calls)
	}
}

// TestTogetherTwoForms: a handler asks two forms in one round; a real
// go-sdk client answers both — two requests at once in a 2025 session, one
// input_required result with two input requests at 2026-07-28.
func TestTogetherTwoForms(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, taskAgent(t))
	forEachVersion(t, func(t *testing.T, v string) {
		var asked syncBuffer
		cs := e.connect(v, e.clientKey, &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				fmt.Fprintf(&asked, "%s;", r.Params.Message)
				switch r.Params.Message {
				case "Your name?":
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"value": "Ada"}}, nil
				case "Your city?":
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"value": "Rome"}}, nil
				}
				return nil, errors.New("unexpected question " + r.Params.Message)
			},
		})
		if got := text(call(t, cs, "two_forms", map[string]any{})); got != "accept Ada, accept Rome" {
			t.Errorf("two_forms = %q", got)
		}
		if n := strings.Count(asked.String(), "?;"); n != 2 {
			t.Errorf("the client was asked %q; want both questions once", asked.String())
		}
	})
	// At 2026-07-28, both questions are in the one input_required result.
	a := e.post(modernHeaders("two_forms"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"two_forms","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`)
	var res struct {
		Result struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
		} `json:"result"`
	}
	must(t, json.Unmarshal(sseData([]byte(a.body)), &res))
	if res.Result.ResultType != "input_required" || len(res.Result.InputRequests) != 2 || res.Result.InputRequests["city"] == nil ||
		!bytes.Contains(res.Result.InputRequests["city"], []byte("Your city?")) {
		t.Errorf("2026-07-28 answer %s; want input_required with two input requests, one of them city", a)
	}
}

// listedWithExecution is a tools/list result whose tools named in exec are
// written with execution.taskSupport, as a server whose SDK knows the field
// writes them (go-sdk v1.8.0's mcp.Tool has none).
type listedWithExecution struct {
	*mcp.ListToolsResult
	exec map[string]string
}

func (r listedWithExecution) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.ListToolsResult)
	for name, ts := range r.exec {
		b = bytes.Replace(b, []byte(`"name":"`+name+`"`), []byte(`"execution":{"taskSupport":"`+ts+`"},"name":"`+name+`"`), 1)
	}
	return b, err
}

// TestBridgePassesTaskSupport: a fronted MCP server's own
// execution.taskSupport reaches the bridge's registration and the
// gateway's tools/list.
func TestBridgePassesTaskSupport(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	server := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	done := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	}
	for _, name := range []string{"report", "export", "quick"} {
		server.AddTool(&mcp.Tool{Name: name, Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)}, done)
	}
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if r, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				return listedWithExecution{r, map[string]string{"report": "optional", "export": "required"}}, nil
			}
			return res, err
		}
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	e.startBridge(bridge.Server{Name: "slow", URL: srv.URL}, bridge.Options{})

	rec := &bodyRecorder{base: http.DefaultTransport}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key: e.clientKey, base: rec}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	must(t, err)
	defer cs.Close()
	_, err = cs.ListTools(ctx, nil)
	must(t, err)
	tools := rawToolsList(t, rec.buf.String())
	for name, want := range map[string]string{
		"slow__report": `"execution":{"taskSupport":"optional"}`,
		"slow__export": `"execution":{"taskSupport":"required"}`,
	} {
		if !strings.Contains(string(tools[name]), want) {
			t.Errorf("%s listed as %s; want %s", name, tools[name], want)
		}
	}
	if q := tools["slow__quick"]; q == nil || strings.Contains(string(q), "execution") {
		t.Errorf("slow__quick listed as %s; want it without execution", q)
	}
}

// A tool whose only change is its task support (a newer replica declares
// it) is advertised again: a client with a session hears list_changed and
// lists the new execution field. (go-sdk's tool JSON, which decided it,
// has no such field, so nothing was sent.)
func TestTaskSupportChangeNotifies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reportTool := func(opts ...core.ToolOption) func(a *core.Agent) {
		return func(a *core.Agent) {
			must(t, core.AddTool(a, "nightly", "Builds the nightly report.", func(ctx context.Context, _ struct{}) (string, error) {
				return "ok", nil
			}, opts...))
			// A task tool from the start, so the job tool is listed
			// throughout and its arrival sends nothing here.
			must(t, core.AddTool(a, "weekly", "Builds the weekly report.", func(ctx context.Context, _ struct{}) (string, error) {
				return "ok", nil
			}, core.TaskSupport(core.TaskOptional)))
		}
	}
	e.startAgent(core.Options{}, reportTool())
	changed := make(chan bool, 16)
	rec := &bodyRecorder{base: http.DefaultTransport}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- true },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key: e.clientKey, base: rec}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	must(t, err)
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for len(changed) > 0 {
		<-changed
	}

	e.startAgent(core.Options{}, reportTool(core.TaskSupport(core.TaskOptional)))
	receive(t, changed, "list_changed when only nightly's task support changed")
	before := len(rec.buf.String())
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := rawToolsList(t, rec.buf.String()[before:])["nightly"]; !strings.Contains(string(got), `"execution":{"taskSupport":"optional"}`) {
		t.Errorf("nightly listed as %s after the change; want its task support", got)
	}
}
