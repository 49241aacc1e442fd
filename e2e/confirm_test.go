package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
)

func TestConfirm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "delete_order", "Deletes an order after asking the user.", func(ctx context.Context, in GetOrderInput) (string, error) {
			ok, err := core.Confirm(ctx, "Delete order "+in.ID+"?")
			if err != nil {
				return "", err
			}
			if !ok {
				return "kept order " + in.ID, nil
			}
			return "deleted order " + in.ID, nil
		}, core.Destructive()))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		var asked []string
		answer := "accept"
		cs := e.connect(v, e.clientKey, &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked = append(asked, r.Params.Message)
				if answer != "accept" {
					return &mcp.ElicitResult{Action: answer}, nil
				}
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
			},
		})
		if got := text(call(t, cs, "delete_order", map[string]any{"id": "1042"})); got != "deleted order 1042" {
			t.Errorf("accepted: %q", got)
		}
		answer = "decline"
		if got := text(call(t, cs, "delete_order", map[string]any{"id": "1043"})); got != "kept order 1043" {
			t.Errorf("declined: %q", got)
		}
		if len(asked) != 2 || asked[0] != "Delete order 1042?" {
			t.Errorf("the user was asked %q", asked)
		}

		plain := e.connect(v, e.clientKey, nil) // cannot elicit
		res := call(t, plain, "delete_order", map[string]any{"id": "1044"})
		if !res.IsError || !strings.Contains(text(res), "the MCP client cannot ask the user") {
			t.Errorf("client without elicitation: isError %v %q", res.IsError, text(res))
		}
	})
	for _, c := range e.calls() {
		if c.Name == "delete_order" && c.Outcome == "timeout" {
			t.Errorf("a confirmed call was logged as a timeout")
		}
	}
}

// TestConfirmMalformedAnswers: a confirmation never fails open. Only an
// accepted form whose confirm is the boolean true is a yes; a decline or
// cancel is a no; a form without confirm, with a string or a number, or an
// answer with another action reaches the handler as an error that says
// what was wrong (core.ErrCannotConfirm), at every protocol version: the
// answer of a 2025 session's elicitation/create and a 2026-07-28 retry's
// inputResponses alike. The client here is go-sdk's, answering each shape
// as is (past its own check of the form).
func TestConfirmMalformedAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "delete_order", "Deletes an order after asking the user.", func(ctx context.Context, in GetOrderInput) (string, error) {
			ok, err := core.Confirm(ctx, "Delete order "+in.ID+"?")
			switch {
			case errors.Is(err, core.ErrCannotConfirm):
				return "", fmt.Errorf("kept order %s: %w", in.ID, err)
			case err != nil:
				return "", err
			case !ok:
				return "kept order " + in.ID, nil
			}
			return "deleted order " + in.ID, nil
		}, core.Destructive()))
	})
	const explain = ". Explain what you are about to do and ask the user in the conversation instead."
	notYesOrNo := func(why string) string {
		return "kept order 7: the MCP client cannot ask the user: its answer to the question is not a yes or no (" + why + ")" + explain
	}
	cases := []struct {
		name   string
		answer *mcp.ElicitResult
		want   string // the text of the result
		legacy string // the text on 2025 sessions, where it differs: go-sdk's server refuses a form not of the schema
	}{
		{"yes", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, "deleted order 7", ""},
		{"no", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": false}}, "kept order 7", ""},
		{"declined", &mcp.ElicitResult{Action: "decline", Content: map[string]any{"confirm": true}}, "kept order 7", ""},
		{"cancelled", &mcp.ElicitResult{Action: "cancel"}, "kept order 7", ""},
		{"empty form", &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, notYesOrNo("data must have required property 'confirm'"), ""},
		{"no content", &mcp.ElicitResult{Action: "accept"}, notYesOrNo("data must have required property 'confirm'"), ""},
		{"string false", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": "false"}}, notYesOrNo("data/confirm must be boolean"),
			`kept order 7: the MCP client cannot ask the user: it did not answer the question: elicitation result content does not match requested schema: validating root: validating /properties/confirm: type: false has type "string", want "boolean"` + explain},
		{"zero", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": 0}}, notYesOrNo("data/confirm must be boolean"),
			`kept order 7: the MCP client cannot ask the user: it did not answer the question: elicitation result content does not match requested schema: validating root: validating /properties/confirm: type: 0 has type "integer", want "boolean"` + explain},
		{"other action", &mcp.ElicitResult{Action: "yes", Content: map[string]any{"confirm": true}},
			`kept order 7: the MCP client cannot ask the user: its answer to the question has action "yes", which is none of accept, decline and cancel` + explain, ""},
	}
	forEachVersion(t, func(t *testing.T, v string) {
		var answer atomic.Pointer[mcp.ElicitResult]
		callTool := answeringClient(t, e, v, func() *mcp.ElicitResult { return answer.Load() })
		for _, c := range cases {
			answer.Store(c.answer)
			want := c.want
			if c.legacy != "" && v < "2026-07-28" {
				want = c.legacy
			}
			res, err := callTool("delete_order", map[string]any{"id": "7"})
			if err != nil {
				t.Errorf("%s: tools/call: %v", c.name, err)
				continue
			}
			wantError := strings.HasPrefix(want, "kept order 7:")
			if got := text(res); got != want || res.IsError != wantError {
				t.Errorf("%s: the client got isError %v %q;\nwant isError %v %q", c.name, res.IsError, got, wantError, want)
			}
		}
	})
	for _, c := range e.calls() {
		if c.Name == "delete_order" && c.Outcome == "timeout" {
			t.Errorf("a call whose answer was malformed was held to its deadline")
		}
	}
}

// answeringClient connects a go-sdk client at protocol version v whose
// user gives answer() to every form, as is: on a 2025 session it is the
// response to elicitation/create (go-sdk's client would refuse to send a
// form not of the schema; this one does); on 2026-07-28 the client retries
// the call itself with it in inputResponses. It returns how to call a tool.
func answeringClient(t *testing.T, e *env, v string, answer func() *mcp.ElicitResult) func(name string, args any) (*mcp.CallToolResult, error) {
	t.Helper()
	opts := &mcp.ClientOptions{
		// Declares the capability; the middleware below answers instead.
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, errors.New("not reached")
		},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, opts)
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "elicitation/create" {
				return answer(), nil
			}
			return next(ctx, method, req)
		}
	})
	tr := &mcp.StreamableClientTransport{
		Endpoint:   e.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key: e.clientKey, base: http.DefaultTransport}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: v})
	if err != nil {
		t.Fatalf("connect at %s: %v", v, err)
	}
	t.Cleanup(func() { cs.Close() })
	return func(name string, args any) (*mcp.CallToolResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p := &mcp.CallToolParams{Name: name, Arguments: args}
		res, err := cs.CallTool(ctx, p)
		for range 3 {
			if err != nil || res.InputRequests == nil {
				break
			}
			p.RequestState, p.InputResponses = res.RequestState, mcp.InputResponseMap{}
			for id := range res.InputRequests {
				p.InputResponses[id] = answer()
			}
			res, err = cs.CallTool(ctx, p)
		}
		return res, err
	}
}
