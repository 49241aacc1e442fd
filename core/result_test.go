package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

type emptyIn struct{}

// answerCase registers one tool and says what calling it must answer.
type answerCase struct {
	name    string
	add     func(a *Agent, name string) error
	kind    string // of the call; tool when empty
	args    string
	want    string // the result's JSON, for a result
	wantErr string // the message, for an error
}

func returns[Out any](v Out, err error) func(a *Agent, name string) error {
	return func(a *Agent, name string) error {
		return AddTool(a, name, "d", func(context.Context, emptyIn) (Out, error) { return v, err })
	}
}

func TestResults(t *testing.T) {
	big := strings.Repeat("x", agentproto.MaxResultBytes)
	bigLen := len(big) + len(`{"content":[{"type":"text","text":""}]}`)
	png := []byte{0x89, 'P', 'N', 'G'}
	cases := []answerCase{
		{name: "string", add: returns("a <b> & \"c\"", nil),
			want: `{"content":[{"type":"text","text":"a <b> & \"c\""}]}`},
		{name: "nil any", add: returns[any](nil, nil),
			want: `{"content":[{"type":"text","text":"null"}]}`},
		{name: "nil struct pointer", add: returns[*order](nil, nil),
			want: `{"content":[{"type":"text","text":"null"}]}`},
		{name: "struct", add: returns(order{ID: "1042", Total: 1999}, nil),
			want: `{"content":[{"type":"text","text":"{\"id\":\"1042\",\"total\":1999}"}],"structuredContent":{"id":"1042","total":1999}}`},
		{name: "struct pointer", add: returns(&order{ID: "7", Tags: []string{"<a>"}}, nil),
			want: `{"content":[{"type":"text","text":"{\"id\":\"7\",\"total\":0,\"tags\":[\"<a>\"]}"}],"structuredContent":{"id":"7","total":0,"tags":["<a>"]}}`},
		{name: "slice", add: returns([]order{{ID: "1"}}, nil),
			want: `{"content":[{"type":"text","text":"[{\"id\":\"1\",\"total\":0}]"}]}`},
		{name: "nil slice", add: returns[[]order](nil, nil),
			want: `{"content":[{"type":"text","text":"null"}]}`},
		{name: "map", add: returns(map[string]int{"b": 2, "a": 1}, nil),
			want: `{"content":[{"type":"text","text":"{\"a\":1,\"b\":2}"}]}`},
		{name: "number", add: returns(42, nil),
			want: `{"content":[{"type":"text","text":"42"}]}`},
		{name: "struct in any has no structuredContent", add: returns[any](order{ID: "1"}, nil),
			want: `{"content":[{"type":"text","text":"{\"id\":\"1\",\"total\":0}"}]}`},
		{name: "ToolResult passes through", add: returns(ToolResult{Content: []Content{Text("a"), EmbeddedText("orders://1", "text/plain", "b")}, IsError: true}, nil),
			want: `{"content":[{"type":"text","text":"a"},{"type":"resource","resource":{"uri":"orders://1","mimeType":"text/plain","text":"b"}}],"isError":true}`},
		{name: "ToolResult pointer in any", add: returns[any](&ToolResult{Content: []Content{Text("p")}}, nil),
			want: `{"content":[{"type":"text","text":"p"}]}`},
		{name: "TextResult", add: returns(TextResult("hi"), nil),
			want: `{"content":[{"type":"text","text":"hi"}]}`},
		{name: "ErrorResult", add: returns(ErrorResult("No order 1042."), nil),
			want: `{"content":[{"type":"text","text":"No order 1042."}],"isError":true}`},
		{name: "ImageResult", add: returns(ImageResult(png, "image/png", "A barcode"), nil),
			want: `{"content":[{"type":"image","data":"iVBORw==","mimeType":"image/png"},{"type":"text","text":"A barcode"}]}`},
		{name: "ImageResult without caption", add: returns(ImageResult(png, "image/png", ""), nil),
			want: `{"content":[{"type":"image","data":"iVBORw==","mimeType":"image/png"}]}`},
		{name: "AudioResult", add: returns(AudioResult([]byte("RIFF"), "audio/wav", "Hello"), nil),
			want: `{"content":[{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"},{"type":"text","text":"Hello"}]}`},
		{name: "ToolResult without parts", add: returns(ToolResult{}, nil),
			wantErr: "Result has 0 content parts; a tool result carries 1 to 16."},
		{name: "ToolResult with 17 parts", add: returns(ToolResult{Content: make([]Content, 17)}, nil),
			wantErr: "Result has 17 content parts; a tool result carries 1 to 16."},
		{name: "unknown content type", add: returns(ToolResult{Content: []Content{{Type: "video"}}}, nil),
			wantErr: `Result could not be serialised: error calling MarshalJSON for type core.Content: content type "video" is not text, image, audio or resource`},
		{name: "channel", add: returns[any](make(chan int), nil),
			wantErr: "Result could not be serialised: unsupported type: chan int"},
		{name: "NaN", add: returns(math.NaN(), nil),
			wantErr: "Result could not be serialised: unsupported value: NaN"},
		{name: "over 4 MiB", add: returns(big, nil),
			wantErr: fmt.Sprintf("Result is too large: %s bytes; the limit is 4 MiB (4,194,304 bytes). Return less, or page through it.", agentproto.Thousands(bigLen))},
		{name: "handler error", add: returns("ignored", fmt.Errorf("no order with id 1042: ask the user to confirm the id")),
			wantErr: "no order with id 1042: ask the user to confirm the id"},
		{name: "wrapped error sends its message only", add: returns(0, fmt.Errorf("lookup: %w", errors.New("timeout"))),
			wantErr: "lookup: timeout"},
		{name: "panic", add: func(a *Agent, name string) error {
			return AddTool(a, name, "d", func(context.Context, emptyIn) (string, error) { panic("boom") })
		}, wantErr: "panic: boom"},
		{name: "panic with an error", add: func(a *Agent, name string) error {
			return AddTool(a, name, "d", func(context.Context, emptyIn) (string, error) {
				var m map[string]int
				//lint:ignore SA5000 the panic is what this case tests
				m["x"] = 1
				return "", nil
			})
		}, wantErr: "panic: assignment to entry in nil map"},
		{name: "arguments decoded", args: `{"id":"1042"}`, add: func(a *Agent, name string) error {
			return AddTool(a, name, "d", func(_ context.Context, in *getOrderInput) (string, error) { return "got " + in.ID, nil })
		}, want: `{"content":[{"type":"text","text":"got 1042"}]}`},
		{name: "absent arguments", add: func(a *Agent, name string) error {
			return AddTool(a, name, "d", func(_ context.Context, in *getOrderInput) (string, error) { return fmt.Sprint(in != nil), nil })
		}, want: `{"content":[{"type":"text","text":"true"}]}`},
		{name: "arguments of the wrong type", args: `{"id":5}`, add: func(a *Agent, name string) error {
			return AddTool(a, name, "d", func(_ context.Context, in getOrderInput) (string, error) { return "", nil })
		}, wantErr: "Invalid arguments for tool arguments_of_the_wrong_type: json: cannot unmarshal number into Go struct field getOrderInput.id of type string"},

		{name: "resource string", kind: agentproto.KindResource, add: resourceOf("csv,text", nil, "text/csv"),
			want: `{"text":"csv,text","mimeType":"text/csv"}`},
		{name: "resource value", kind: agentproto.KindResource, add: resourceOf([]order{{ID: "1"}}, nil, ""),
			want: `{"text":"[{\"id\":\"1\",\"total\":0}]","mimeType":"application/json"}`},
		{name: "resource nil", kind: agentproto.KindResource, add: resourceOf(nil, nil, ""),
			want: `{"text":"null","mimeType":"application/json"}`},
		{name: "resource error", kind: agentproto.KindResource, add: resourceOf(nil, errors.New("store down"), ""),
			wantErr: "store down"},
		{name: "resource unserialisable", kind: agentproto.KindResource, add: resourceOf(func() {}, nil, ""),
			wantErr: "Result could not be serialised: unsupported type: func()"},

		{name: "prompt text", kind: agentproto.KindPrompt, args: `{"id":"1042"}`, add: func(a *Agent, name string) error {
			return a.Prompt(name, PromptOptions{}, func(_ context.Context, args map[string]string) (PromptResult, error) {
				return PromptText("Summarise " + args["id"]), nil
			})
		}, want: `{"messages":[{"role":"user","content":{"type":"text","text":"Summarise 1042"}}]}`},
		{name: "prompt exchange", kind: agentproto.KindPrompt, add: func(a *Agent, name string) error {
			return a.Prompt(name, PromptOptions{}, func(context.Context, map[string]string) (PromptResult, error) {
				return PromptResult{Description: "d", Messages: []PromptMessage{UserMessage("q"), AssistantMessage("a")}}, nil
			})
		}, want: `{"description":"d","messages":[{"role":"user","content":{"type":"text","text":"q"}},{"role":"assistant","content":{"type":"text","text":"a"}}]}`},
		{name: "prompt without messages", kind: agentproto.KindPrompt, add: func(a *Agent, name string) error {
			return a.Prompt(name, PromptOptions{}, func(context.Context, map[string]string) (PromptResult, error) { return PromptResult{}, nil })
		}, wantErr: "The prompt rendered no messages; return at least one."},
		{name: "prompt error", kind: agentproto.KindPrompt, add: func(a *Agent, name string) error {
			return a.Prompt(name, PromptOptions{}, func(context.Context, map[string]string) (PromptResult, error) {
				return PromptResult{}, errors.New("no such order")
			})
		}, wantErr: "no such order"},
		{name: "unknown tool", kind: agentproto.KindTool, add: nil,
			wantErr: `This agent has no tool "unknown tool".`},
		// A custom MCP request is for a bridge that set Bridge.Request.
		{name: "x/request", kind: agentproto.KindRequest, add: nil,
			wantErr: `This agent has no request "x/request".`},
	}
	runAnswerCases(t, cases)
}

// A plain value (an any, a map) whose JSON is already a tool result goes
// untouched, as in the Node SDK; a typed struct keeps structuredContent.
func TestContentPassthrough(t *testing.T) {
	type shapedStruct struct {
		Content []map[string]string `json:"content"`
	}
	parts := []map[string]string{{"type": "text", "text": "a"}}
	cases := []answerCase{
		{name: "map with content", add: returns(map[string]any{"content": []any{map[string]any{"type": "text", "text": "hi"}}, "isError": true}, nil),
			want: `{"content":[{"text":"hi","type":"text"}],"isError":true}`}, // a map's JSON: keys sorted
		{name: "any with content and structuredContent", add: returns[any](map[string]any{
			"content":           []any{map[string]any{"type": "image", "data": "iVBORw==", "mimeType": "image/png"}, map[string]any{"type": "resource", "resource": map[string]any{"uri": "orders://1", "text": "b"}}},
			"structuredContent": map[string]any{"id": "1"},
		}, nil),
			want: `{"content":[{"data":"iVBORw==","mimeType":"image/png","type":"image"},{"resource":{"text":"b","uri":"orders://1"},"type":"resource"}],"structuredContent":{"id":"1"}}`},
		{name: "raw JSON with content", add: returns[any](json.RawMessage(`{"content":[{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"}],"_meta":{"k":1}}`), nil),
			want: `{"content":[{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"}],"_meta":{"k":1}}`},
		{name: "struct in any with content", add: returns[any](shapedStruct{Content: parts}, nil),
			want: `{"content":[{"text":"a","type":"text"}]}`},
		{name: "map with empty content", add: returns(map[string]any{"content": []any{}}, nil),
			wantErr: "Result has 0 content parts; a tool result carries 1 to 16."},
		{name: "map with 17 parts", add: returns(map[string]any{"content": func() []any {
			var p []any
			for range 17 {
				p = append(p, map[string]any{"type": "text", "text": "x"})
			}
			return p
		}()}, nil),
			wantErr: "Result has 17 content parts; a tool result carries 1 to 16."},
		{name: "map with invalid part is data", add: returns(map[string]any{"content": []any{map[string]any{"type": "video"}}}, nil),
			want: `{"content":[{"type":"text","text":"{\"content\":[{\"type\":\"video\"}]}"}]}`},
		{name: "map with content not an array is data", add: returns(map[string]any{"content": "x"}, nil),
			want: `{"content":[{"type":"text","text":"{\"content\":\"x\"}"}]}`},
		{name: "typed struct keeps structuredContent", add: returns(shapedStruct{Content: parts}, nil),
			want: `{"content":[{"type":"text","text":"{\"content\":[{\"text\":\"a\",\"type\":\"text\"}]}"}],"structuredContent":{"content":[{"text":"a","type":"text"}]}}`},
	}
	runAnswerCases(t, cases)
}

// runAnswerCases registers every case on one agent, plays a transcript of
// one call per case and checks each answer byte for byte.
func runAnswerCases(t *testing.T, cases []answerCase) {
	t.Helper()
	p := newPlayer(t)
	a, _ := newTestAgent(t, p)
	names := map[string]string{}
	for i, c := range cases {
		name := strings.ReplaceAll(c.name, " ", "_")
		if c.kind == agentproto.KindResource {
			name = fmt.Sprintf("test://r%d", i)
		}
		names[c.name] = name
		if c.add == nil {
			names[c.name] = c.name
			continue
		}
		if err := c.add(a, name); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	steps := script(t, connected)
	for i, c := range cases {
		kind := c.kind
		if kind == "" {
			kind = agentproto.KindTool
		}
		call := agentproto.Message{Type: agentproto.TypeCall, ID: fmt.Sprintf("c-%d", i+1), Kind: kind, Name: names[c.name],
			Caller: &agentproto.Caller{KeyID: "key_42", KeyName: "claude"}, Deadline: time.Now().Add(30 * time.Second).UnixMilli()}
		if c.args != "" {
			call.Args = json.RawMessage(c.args)
		}
		b, err := json.Marshal(call)
		must(t, err)
		steps = append(steps, step{kind: "gateway", body: string(b)},
			step{kind: "agent", check: func(t *testing.T, data []byte) { checkAnswer(t, c, call.ID, data) }})
	}
	p.play(a, steps, nil)
}

// checkAnswer checks the agent's answer to case c, call id.
func checkAnswer(t *testing.T, c answerCase, id string, data []byte) {
	t.Helper()
	var m agentproto.Message
	must(t, json.Unmarshal(data, &m))
	switch {
	case m.ID != id:
		t.Fatalf("%s: got %s for call %q, want the answer to %q", c.name, m.Type, m.ID, id)
	case c.wantErr != "":
		if m.Type != agentproto.TypeError {
			t.Errorf("%s: got %s %.300s, want error %q", c.name, m.Type, m.Result, c.wantErr)
		} else if diff := cmp.Diff(c.wantErr, m.Message); diff != "" {
			t.Errorf("%s: error message mismatch (-want +got):\n%s", c.name, diff)
		}
	default:
		if m.Type != agentproto.TypeResult {
			t.Errorf("%s: got %s %q, want a result", c.name, m.Type, m.Message)
		} else if diff := cmp.Diff(c.want, string(m.Result)); diff != "" {
			t.Errorf("%s: result mismatch (-want +got):\n%s", c.name, diff)
		}
	}
}

func resourceOf(v any, err error, mime string) func(a *Agent, uri string) error {
	return func(a *Agent, uri string) error {
		return a.Resource(uri, ResourceOptions{Name: "r", MimeType: mime}, func(context.Context) (any, error) { return v, err })
	}
}

func TestStructuredContentMatchesOutputSchema(t *testing.T) {
	// The outputSchema allows null where encoding/json writes it, so a
	// struct with a nil slice still matches what clients check.
	raw, ok := outputSchema[order](&Agent{log: discard()}, "x")
	if !ok {
		t.Fatal("no output schema for a struct")
	}
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	must(t, json.Unmarshal(raw, &s))
	if diff := cmp.Diff([]any{"array", "null"}, s.Properties["tags"].Type); diff != "" {
		t.Errorf("tags type mismatch (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		name string
		fn   func() (json.RawMessage, bool)
	}{
		{"ToolResult", func() (json.RawMessage, bool) { return outputSchema[ToolResult](&Agent{log: discard()}, "x") }},
		{"slice", func() (json.RawMessage, bool) { return outputSchema[[]order](&Agent{log: discard()}, "x") }},
		{"string", func() (json.RawMessage, bool) { return outputSchema[string](&Agent{log: discard()}, "x") }},
	} {
		if raw, ok := tc.fn(); ok || raw != nil {
			t.Errorf("%s: outputSchema = %s, %v; want none", tc.name, raw, ok)
		}
	}
}
