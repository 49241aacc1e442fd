package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
)

// TestPolicyResumeAsAnotherTool: a 2026-07-28 retry that carries the
// user's answer to an agent's question resumes the call the requestState
// names, and only as a call of the tool it was made for. A client that
// names another tool it may call (one no result rule covers) is refused,
// and the held call's result never reaches it unshaped; the call stays
// held for a retry that names its own tool.
func TestPolicyResumeAsAnotherTool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{Name: "crm"}, func(a *core.Agent) {
		must(t, core.AddTool(a, "customer", "Shows a customer, after asking.", func(ctx context.Context, _ noInput) (string, error) {
			if ok, err := core.Confirm(ctx, "Show the customer?"); err != nil || !ok {
				return "not shown", err
			}
			return "Ann, ann@example.com", nil
		}))
		must(t, core.AddTool(a, "ping", "Answers pong.", func(ctx context.Context, _ noInput) (string, error) {
			return "pong", nil
		}, core.ReadOnly()))
	})
	probe := e.connect("2026-07-28", e.clientKey, nil)
	e.setPolicy(`{"rules":[
		{"name":"seen","on":"call","tools":["ping"],"effect":"deny","mode":"audit"},
		{"name":"pii","on":"result","tools":["customer"],"effect":"redact","redact":["[\\w.]+@[\\w.]+\\w"]}]}`, func() bool {
		if _, err := tryCall(probe, "ping", map[string]any{}); err != nil {
			return false
		}
		for _, c := range e.calls() {
			if c.Name == "ping" && c.Policy != "" {
				return true
			}
		}
		return false
	})
	cs := e.connect("2026-07-28", e.clientKey, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, errors.New("not reached")
		},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "customer", Arguments: map[string]any{}})
	if err != nil || first.InputRequests == nil {
		t.Fatalf("customer = %+v, %v; want the agent's question", first, err)
	}
	retry := &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}, RequestState: first.RequestState, InputResponses: mcp.InputResponseMap{}}
	for id := range first.InputRequests {
		retry.InputResponses[id] = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}
	}
	res, err := cs.CallTool(ctx, retry)
	if err == nil && strings.Contains(text(res), "ann@example.com") {
		t.Fatalf("the retry as ping got customer's result unredacted: %q", text(res))
	}
	if err == nil || !strings.Contains(err.Error(), "this requestState names no call waiting for input here") {
		t.Errorf("the retry as another tool = %q, %v; want the requestState refused", text(res), err)
	}
	// The call is still held for its own tool.
	retry.Name = "customer"
	if res, err = cs.CallTool(ctx, retry); err != nil || text(res) != "Ann, [redacted]" {
		t.Errorf("the retry as customer = %q, %v; want the answer redacted", text(res), err)
	}
}
