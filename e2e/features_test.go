package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/store"
)

func TestResources(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, a.Resource("orders://open", core.ResourceOptions{Name: "Open orders", Description: "Every order that has not shipped yet"},
			func(ctx context.Context) (any, error) { return []Order{orders[0]}, nil }))
		must(t, a.Resource("notes://readme", core.ResourceOptions{Name: "Readme", MimeType: "text/markdown"},
			func(ctx context.Context) (any, error) { return "# Orders\nSee get_order.", nil }))
		must(t, a.Resource("orders://logo", core.ResourceOptions{Name: "Logo", MimeType: "image/png"},
			func(ctx context.Context) (any, error) { return []byte{0x89, 'P', 'N', 'G', 0, 0xff}, nil }))
		must(t, a.ResourceTemplate("orders://orders/{id}", core.ResourceOptions{Name: "Order", Description: "One order by id"},
			func(ctx context.Context, uri string, params map[string]string) (any, error) {
				return map[string]string{"id": params["id"], "uri": uri}, nil
			}))
		must(t, a.Resource("orders://broken", core.ResourceOptions{Name: "Broken"},
			func(ctx context.Context) (any, error) {
				return nil, errors.New("the order database is down; try again in a minute")
			}))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		lr, err := cs.ListResources(context.Background(), nil)
		must(t, err)
		var got []string
		for _, r := range lr.Resources {
			got = append(got, r.URI+" "+r.Name+" "+r.MIMEType)
		}
		want := []string{"notes://readme Readme text/markdown", "orders://broken Broken application/json", "orders://logo Logo image/png", "orders://open Open orders application/json"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("resources/list (-want +got):\n%s", diff)
		}
		rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "orders://open"})
		must(t, err)
		if len(rr.Contents) != 1 || rr.Contents[0].MIMEType != "application/json" || !strings.Contains(rr.Contents[0].Text, `"id":"1042"`) {
			t.Errorf("orders://open = %+v", rr.Contents)
		}
		rr, err = cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "notes://readme"})
		must(t, err)
		if rr.Contents[0].Text != "# Orders\nSee get_order." || rr.Contents[0].MIMEType != "text/markdown" {
			t.Errorf("notes://readme = %q %s; a string is sent as is", rr.Contents[0].Text, rr.Contents[0].MIMEType)
		}
		// A template: listed apart, read at any URI it matches.
		lt, err := cs.ListResourceTemplates(context.Background(), nil)
		must(t, err)
		if len(lt.ResourceTemplates) != 1 || lt.ResourceTemplates[0].URITemplate != "orders://orders/{id}" || lt.ResourceTemplates[0].Name != "Order" ||
			lt.ResourceTemplates[0].MIMEType != "application/json" {
			t.Errorf("resources/templates/list = %+v", lt.ResourceTemplates)
		}
		rr, err = cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "orders://orders/1042"})
		must(t, err)
		if c := rr.Contents[0]; c.URI != "orders://orders/1042" || c.Text != `{"id":"1042","uri":"orders://orders/1042"}` {
			t.Errorf("orders://orders/1042 = %+v; want the template's handler with id 1042", c)
		}
		_, err = cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "orders://customers/ada"})
		var nf *jsonrpc.Error
		if !errors.As(err, &nf) || nf.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("a URI no resource or template matches: %v; want resource not found", err)
		}
		// Bytes are a blob: base64 on the wire, the same bytes at the client.
		rr, err = cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "orders://logo"})
		must(t, err)
		if c := rr.Contents[0]; string(c.Blob) != "\x89PNG\x00\xff" || c.Text != "" || c.MIMEType != "image/png" {
			t.Errorf("orders://logo = %+v; want the bytes as a blob", c)
		}
		_, err = cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "orders://broken"})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError || werr.Message != "the order database is down; try again in a minute" {
			t.Errorf("failing read: err = %v, want JSON-RPC -32603 with the handler's message", err)
		}
	})
	var reads int
	for _, c := range e.calls() {
		if c.Kind == "resource" {
			reads++
		}
	}
	if reads != 5*len(versions) {
		t.Errorf("call log has %d resource reads, want %d (a read is a call)", reads, 5*len(versions))
	}
}

func TestPrompts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, a.Prompt("summarise_order", core.PromptOptions{
			Title: "Summarise an order", Description: "Write a short, polite summary of an order.",
			Args: []core.PromptArg{{Name: "id", Description: "The order id", Required: true}, {Name: "tone"}},
		}, func(ctx context.Context, args map[string]string) (core.PromptResult, error) {
			return core.PromptText("Summarise order " + args["id"] + " politely."), nil
		}))
		must(t, a.Prompt("dialogue", core.PromptOptions{Description: "Two messages."},
			func(ctx context.Context, args map[string]string) (core.PromptResult, error) {
				return core.PromptResult{Messages: []core.PromptMessage{core.UserMessage("Hi"), core.AssistantMessage("Hello! How can I help?")}}, nil
			}))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		lp, err := cs.ListPrompts(context.Background(), nil)
		must(t, err)
		if len(lp.Prompts) != 2 || lp.Prompts[1].Name != "summarise_order" || lp.Prompts[1].Title != "Summarise an order" ||
			len(lp.Prompts[1].Arguments) != 2 || !lp.Prompts[1].Arguments[0].Required {
			t.Errorf("prompts/list = %+v", lp.Prompts)
		}
		gp, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "summarise_order", Arguments: map[string]string{"id": "1042"}})
		must(t, err)
		if len(gp.Messages) != 1 || gp.Messages[0].Role != "user" || gp.Messages[0].Content.(*mcp.TextContent).Text != "Summarise order 1042 politely." {
			t.Errorf("summarise_order = %+v", gp.Messages)
		}
		gp, err = cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "dialogue"})
		must(t, err)
		if len(gp.Messages) != 2 || gp.Messages[1].Role != "assistant" {
			t.Errorf("dialogue = %+v", gp.Messages)
		}
		_, err = cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "summarise_order", Arguments: map[string]string{}})
		if want := "Invalid arguments for prompt summarise_order: data must have required property 'id'"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing argument: err = %v, want %q", err, want)
		}
	})
}

func TestProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "chatty", "Reports progress.", func(ctx context.Context, in Empty) (string, error) {
			core.Progress(ctx, strings.Repeat("x", 250))
			for i := 2; i <= 10; i++ {
				core.Progress(ctx, fmt.Sprintf("line %d", i))
			}
			time.Sleep(1300 * time.Millisecond) // the behaviour: a call that outlasts the progress throttle
			return "done", nil
		}))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		var mu sync.Mutex
		var lines []string
		cs := e.connect(v, e.clientKey, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				lines = append(lines, r.Params.Message)
				mu.Unlock()
			},
		})
		params := &mcp.CallToolParams{Name: "chatty", Arguments: map[string]any{}}
		params.SetProgressToken("tok-" + v)
		res, err := cs.CallTool(context.Background(), params)
		must(t, err)
		if text(res) != "done" {
			t.Fatalf("chatty = %q", text(res))
		}
		mu.Lock()
		defer mu.Unlock()
		if len(lines) < 2 || len(lines) > 5 {
			t.Errorf("client got %d progress lines %q; want the first four within the second, then the latest", len(lines), lines)
		}
		if len(lines) > 0 && (len([]rune(lines[0])) != 200 || lines[len(lines)-1] != "line 10") {
			t.Errorf("progress lines = %q; want the first cut to 200 characters and the latest (line 10) last", lines)
		}
	})
	for _, c := range e.calls() {
		if len(c.Progress) < 2 || c.Progress[len(c.Progress)-1] != "line 10" {
			t.Errorf("call log progress = %q, want the lines passed on", c.Progress)
		}
	}
}

func TestCancellation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started := make(chan struct{}, 1)
	cancelled := make(chan error, 1)
	late := make(chan struct{}, 1)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "long", "Waits to be cancelled.", func(ctx context.Context, in Empty) (string, error) {
			started <- struct{}{}
			select {
			case <-ctx.Done():
				cancelled <- ctx.Err()
				late <- struct{}{}
				return "late result", nil // dropped: nobody waits for it
			case <-time.After(20 * time.Second):
				return "not cancelled", nil
			}
		}))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "long", Arguments: map[string]any{}})
			errc <- err
		}()
		select {
		case <-started:
		case err := <-errc:
			t.Fatalf("the call ended before it started: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("the call did not reach the handler")
		}
		cancel()
		select {
		case err := <-cancelled:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("handler ctx.Err() = %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the client's cancellation did not reach the handler")
		}
		<-late
		select {
		case err := <-errc:
			if err == nil {
				t.Errorf("the cancelled call returned no error")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the cancelled call did not return")
		}
	})
	waitFor(t, "the cancelled calls in the log", func() bool {
		n := 0
		for _, c := range e.calls() {
			if c.Outcome == store.OutcomeCancelled {
				n++
			}
		}
		return n == len(versions)
	})
}

func TestImagesAndMixedContent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	png := []byte("\x89PNG\r\n\x1a\nnot really")
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "chart", "Draws a chart.", func(ctx context.Context, in Empty) (core.ToolResult, error) {
			return core.ImageResult(png, "image/png", "Sales by month"), nil
		}))
		must(t, core.AddTool(a, "mixed", "Many parts.", func(ctx context.Context, in Empty) (core.ToolResult, error) {
			return core.ToolResult{Content: []core.Content{
				core.Text("before"), core.Audio([]byte("RIFFxxxxWAVE"), "audio/wav"), core.EmbeddedText("orders://1042", "application/json", `{"id":"1042"}`),
			}}, nil
		}))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		res := call(t, cs, "chart", nil)
		if len(res.Content) != 2 {
			t.Fatalf("chart has %d parts, want image and caption", len(res.Content))
		}
		img, ok := res.Content[0].(*mcp.ImageContent)
		if !ok || string(img.Data) != string(png) || img.MIMEType != "image/png" {
			t.Errorf("chart part 0 = %#v, want the PNG", res.Content[0])
		}
		if cap, ok := res.Content[1].(*mcp.TextContent); !ok || cap.Text != "Sales by month" {
			t.Errorf("chart part 1 = %#v, want the caption", res.Content[1])
		}
		res = call(t, cs, "mixed", nil)
		if len(res.Content) != 3 {
			t.Fatalf("mixed has %d parts", len(res.Content))
		}
		if a, ok := res.Content[1].(*mcp.AudioContent); !ok || a.MIMEType != "audio/wav" {
			t.Errorf("mixed part 1 = %#v, want audio", res.Content[1])
		}
		if r, ok := res.Content[2].(*mcp.EmbeddedResource); !ok || r.Resource.URI != "orders://1042" {
			t.Errorf("mixed part 2 = %#v, want the embedded resource", res.Content[2])
		}
	})
}

func TestSetEnabled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ra := e.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOrderTools(a)) })
	changed := make(chan struct{}, 16)
	cs := e.connect("2025-11-25", e.clientKey, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	modern := e.connect("2026-07-28", e.clientKey, nil)
	must(t, ra.agent.SetEnabled("search_orders", false))
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no tools/list_changed after SetEnabled(false)")
	}
	for _, c := range []*mcp.ClientSession{cs, modern} {
		if diff := cmp.Diff([]string{"get_order"}, toolNames(t, c)); diff != "" {
			t.Errorf("tools after disabling (-want +got):\n%s", diff)
		}
		_, err := c.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_orders", Arguments: map[string]any{"customer": "ada"}})
		if err == nil || !strings.Contains(err.Error(), "Tool search_orders not found") {
			t.Errorf("call to a disabled tool: %v", err)
		}
	}
	must(t, ra.agent.SetEnabled("search_orders", true))
	waitFor(t, "the tool to come back", func() bool { return len(toolNames(t, cs)) == 2 })
	if err := ra.agent.SetEnabled("nope", false); err == nil {
		t.Error("SetEnabled of an unknown tool: no error")
	}
}

func TestNamespacesAndCollisions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, second := e.newKey(store.Key{Kind: store.KindAgent, Name: "second"})
	_, third := e.newKey(store.Key{Kind: store.KindAgent, Name: "third"})
	tool := func(answer string) func(*core.Agent) {
		return func(a *core.Agent) {
			must(t, core.AddTool(a, "run_tests", "Runs tests.", func(ctx context.Context, in Empty) (string, error) { return answer, nil }))
		}
	}
	e.startAgent(core.Options{}, tool("first"))
	e.startAgent(core.Options{APIKey: second}, tool("second"))
	e.startAgent(core.Options{APIKey: third, Name: "test-radar", Namespace: true}, tool("radar"))
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		if diff := cmp.Diff([]string{"run_tests", "run_tests_2", "test_radar_run_tests"}, toolNames(t, cs)); diff != "" {
			t.Errorf("names (-want +got):\n%s", diff)
		}
		for name, want := range map[string]string{"run_tests": "first", "run_tests_2": "second", "test_radar_run_tests": "radar"} {
			if got := text(call(t, cs, name, nil)); got != want {
				t.Errorf("%s answered %q, want %q", name, got, want)
			}
		}
	})
	status, body := e.register(second, regJSON(t, regWith("spacefix_status")))
	if status != 400 || body != `Invalid tool name "spacefix_status": names starting with "spacefix_" are reserved for the gateway's own tools.` {
		t.Errorf("reserved name: %d %q", status, body)
	}
}

func TestInstances(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, inst := range []string{"eu-1", "us-1"} {
		e.startAgent(core.Options{Instance: inst}, func(a *core.Agent) {
			must(t, core.AddTool(a, "where", "Says where it ran.", func(ctx context.Context, in Empty) (string, error) { return inst, nil },
				core.StrictInput()))
		})
	}
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		lt, err := cs.ListTools(context.Background(), nil)
		must(t, err)
		schema, _ := json.Marshal(lt.Tools[0].InputSchema)
		if !strings.Contains(string(schema), `"instance":{"description":"Which instance of the agent runs this call: eu-1, us-1. Leave it out to let the gateway choose any.","enum":["eu-1","us-1"],"type":"string"}`) {
			t.Errorf("where's schema = %s, want an optional instance enum", schema)
		}
		for range 3 {
			if got := text(call(t, cs, "where", map[string]any{"instance": "us-1"})); got != "us-1" {
				t.Errorf("instance us-1 answered from %q", got)
			}
		}
		seen := map[string]bool{}
		for range 10 {
			seen[text(call(t, cs, "where", map[string]any{}))] = true
		}
		if len(seen) != 2 {
			t.Errorf("without instance, calls went to %v; want any replica", seen)
		}
		res := call(t, cs, "where", map[string]any{"instance": "ap-1"})
		if want := `Instance "ap-1" of tool where is not connected. Connected instances: eu-1, us-1. Leave instance out to let the gateway choose.`; text(res) != want {
			t.Errorf("unknown instance = %q, want %q", text(res), want)
		}
	})

	e2 := newEnv(t)
	e2.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "plain", "No instances.", func(ctx context.Context, in Empty) (string, error) { return "ok", nil }))
	})
	cs := e2.connect("2025-11-25", e2.clientKey, nil)
	res := call(t, cs, "plain", map[string]any{"instance": "eu-1"})
	if want := `Instance "eu-1" of tool plain is not connected, and no connected replica has an instance name. Leave instance out.`; text(res) != want {
		t.Errorf("instance without named replicas = %q, want %q", text(res), want)
	}
}

func TestCallFrom(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "whoami", "Describes the call.", func(ctx context.Context, in Empty) (string, error) {
			c, ok := core.CallFrom(ctx)
			if !ok {
				return "", errors.New("no call in ctx")
			}
			return fmt.Sprintf("%s|%s|%s|%d", c.Tool, c.KeyID, c.KeyName, time.Until(c.Deadline).Round(time.Second)/time.Second), nil
		}))
	})
	k, secret := e.newKey(store.Key{Kind: store.KindClient, Name: "claude"})
	cs := e.connect("2026-07-28", secret, nil)
	got := text(call(t, cs, "whoami", nil))
	if want := "whoami|" + k.ID + "|claude|30"; got != want {
		t.Errorf("CallFrom = %q, want %q", got, want)
	}
}

// TestCompletion: completion/complete asks the agent's completer of a
// prompt argument or a template variable, with what the user typed and the
// other values; an argument without a completer gets no suggestions.
func TestCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	customers := []string{"ada", "alan", "bob"}
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, a.Prompt("summary", core.PromptOptions{Args: []core.PromptArg{
			{Name: "customer", Required: true, Complete: func(ctx context.Context, value string, _ map[string]string) ([]string, error) {
				var out []string
				for _, c := range customers {
					if strings.HasPrefix(c, value) {
						out = append(out, c)
					}
				}
				return out, nil
			}},
			{Name: "style"},
		}}, func(ctx context.Context, args map[string]string) (core.PromptResult, error) {
			return core.PromptText("Summarise " + args["customer"]), nil
		}))
		must(t, a.ResourceTemplate("orders://customers/{customer}/orders/{id}", core.ResourceOptions{Name: "Customer order",
			Complete: func(ctx context.Context, param, value string, args map[string]string) ([]string, error) {
				if param == "id" {
					return []string{args["customer"] + "-1", args["customer"] + "-2"}, nil
				}
				return nil, nil
			}}, func(ctx context.Context, uri string, params map[string]string) (any, error) { return params, nil }))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		complete := func(ref *mcp.CompleteReference, arg, value string, ctxArgs map[string]string) []string {
			t.Helper()
			p := &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: arg, Value: value}}
			if ctxArgs != nil {
				p.Context = &mcp.CompleteContext{Arguments: ctxArgs}
			}
			r, err := cs.Complete(context.Background(), p)
			if err != nil {
				t.Fatalf("complete %s %q: %v", arg, value, err)
			}
			return r.Completion.Values
		}
		prompt := &mcp.CompleteReference{Type: "ref/prompt", Name: "summary"}
		if got := complete(prompt, "customer", "a", nil); strings.Join(got, ",") != "ada,alan" {
			t.Errorf("customer a… = %v", got)
		}
		if got := complete(prompt, "style", "br", nil); got == nil || len(got) != 0 {
			t.Errorf("an argument without a completer = %#v; want an empty list", got)
		}
		tmpl := &mcp.CompleteReference{Type: "ref/resource", URI: "orders://customers/{customer}/orders/{id}"}
		if got := complete(tmpl, "id", "", map[string]string{"customer": "ada"}); strings.Join(got, ",") != "ada-1,ada-2" {
			t.Errorf("template id for ada = %v", got)
		}
		_, err := cs.Complete(context.Background(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "nope"},
			Argument: mcp.CompleteParamsArgument{Name: "x"}})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || !strings.Contains(je.Message, "Prompt nope not found") {
			t.Errorf("completion of an unknown prompt: %v", err)
		}
	})
	completions := 0
	for _, c := range e.calls() {
		if c.Kind == "complete" {
			completions++
			if c.Billable {
				t.Errorf("a completion was billed: %+v", c)
			}
		}
	}
	if want := 2 * len(versions); completions != want { // the two with a completer reached the agent
		t.Errorf("call log has %d completions; want %d", completions, want)
	}
}

// TestResourceSubscribe: a session subscribed to a resource hears when its
// agent says it changed (notifications/resources/updated), also for a URI
// of a template; an unsubscribed one does not; an unknown URI is refused
// on the agent's side.
func TestResourceSubscribe(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ra := e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, a.Resource("orders://open", core.ResourceOptions{Name: "Open orders"}, func(ctx context.Context) (any, error) { return "[]", nil }))
		must(t, a.ResourceTemplate("orders://orders/{id}", core.ResourceOptions{Name: "Order"},
			func(ctx context.Context, uri string, params map[string]string) (any, error) { return params, nil }))
	})
	for _, v := range []string{"2025-06-18", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			updated := make(chan string, 8)
			cs := e.connect(v, e.clientKey, &mcp.ClientOptions{
				ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
			})
			other := make(chan string, 8)
			e.connect(v, e.clientKey, &mcp.ClientOptions{
				ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { other <- r.Params.URI },
			})
			must(t, cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "orders://open"}))
			must(t, cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "orders://orders/1042"}))
			must(t, ra.agent.ResourceChanged("orders://open"))
			must(t, ra.agent.ResourceChanged("orders://orders/1042"))
			for _, want := range []string{"orders://open", "orders://orders/1042"} {
				select {
				case got := <-updated:
					if got != want {
						t.Errorf("updated %q; want %q", got, want)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("no notifications/resources/updated for %s", want)
				}
			}
			must(t, cs.Unsubscribe(context.Background(), &mcp.UnsubscribeParams{URI: "orders://open"}))
			must(t, ra.agent.ResourceChanged("orders://open"))
			must(t, ra.agent.ResourceChanged("orders://orders/1042")) // still subscribed: it comes after any stray open
			if got := <-updated; got != "orders://orders/1042" {
				t.Errorf("after unsubscribing from orders://open the session heard of %s", got)
			}
			select {
			case got := <-other:
				t.Errorf("a session that never subscribed heard of %s", got)
			default:
			}
		})
	}
	if err := ra.agent.ResourceChanged("orders://closed"); err == nil || !strings.Contains(err.Error(), "no resource or template of this agent has that URI") {
		t.Errorf("ResourceChanged of an unknown URI: %v", err)
	}
}

// TestSetEnabledPromptsAndResources: an agent switches a prompt and a
// resource off and on at run time; clients' lists follow, with
// list_changed on 2025 sessions.
func TestSetEnabledPromptsAndResources(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ra := e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, a.Prompt("summary", core.PromptOptions{}, func(ctx context.Context, _ map[string]string) (core.PromptResult, error) {
			return core.PromptText("Summarise."), nil
		}))
		must(t, a.Resource("orders://open", core.ResourceOptions{Name: "Open orders"}, func(ctx context.Context) (any, error) { return "[]", nil }))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		promptsChanged, resourcesChanged := make(chan struct{}, 8), make(chan struct{}, 8)
		cs := e.connect(v, e.clientKey, &mcp.ClientOptions{
			PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { promptsChanged <- struct{}{} },
			ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { resourcesChanged <- struct{}{} },
		})
		listed := func() (prompts, resources int) {
			lp, err := cs.ListPrompts(context.Background(), nil)
			must(t, err)
			lr, err := cs.ListResources(context.Background(), nil)
			must(t, err)
			return len(lp.Prompts), len(lr.Resources)
		}
		must(t, ra.agent.SetPromptEnabled("summary", false))
		must(t, ra.agent.SetResourceEnabled("orders://open", false))
		waitFor(t, "the prompt and the resource to go", func() bool { p, r := listed(); return p == 0 && r == 0 })
		if _, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "summary"}); err == nil {
			t.Errorf("a switched-off prompt could still be got")
		}
		if v < "2026-07-28" {
			for what, ch := range map[string]chan struct{}{"prompts": promptsChanged, "resources": resourcesChanged} {
				select {
				case <-ch:
				case <-time.After(5 * time.Second):
					t.Errorf("no %s/list_changed after switching one off", what)
				}
			}
		}
		must(t, ra.agent.SetPromptEnabled("summary", true))
		must(t, ra.agent.SetResourceEnabled("orders://open", true))
		waitFor(t, "the prompt and the resource to come back", func() bool { p, r := listed(); return p == 1 && r == 1 })
	})
	if err := ra.agent.SetPromptEnabled("nope", false); err == nil {
		t.Error("SetPromptEnabled of an unknown prompt succeeded")
	}
}
