package e2e

import (
	"context"
	"strings"
	"testing"

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
