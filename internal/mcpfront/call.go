package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/schema"
	"github.com/spacefix/spacefix/internal/store"
)

// Messages a model reads.
const (
	msgDisconnected = "Agent disconnected before returning a result."
	msgShutdown     = "The gateway is shutting down and stopped this call. Try again in a moment."
	msgNoReplica    = "No replica of the agent that offers %q can take calls right now. Try again in a few seconds."
)

// toolHandler is the whole tools/call flow, top to bottom. [view.resolve] has
// already checked the key's access and put the tool in ctx; the key check and
// go-sdk's parsing happened before that.
func (f *Front) toolHandler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	defer f.track()()
	t, _ := ctx.Value(toolCtxKey{}).(*agents.Tool)
	key, _ := keyFrom(req.Extra.TokenInfo)
	if t == nil {
		return nil, fmt.Errorf("Tool %s not found", trimName(req.Params.Name))
	}

	// Validation: before any agent sees the call; not logged, not billed.
	args := req.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var instance string
	if !t.OwnsInstance {
		var problem string
		if args, instance, problem = splitInstance(args); problem != "" {
			return errorResult(fmt.Sprintf("Input validation error: Invalid arguments for tool %s: %s", t.Name, problem)), nil
		}
	}
	if err := t.Schema.Validate(args); err != nil {
		var ve *schema.ValidationError
		if errors.As(err, &ve) {
			return errorResult(fmt.Sprintf("Input validation error: Invalid arguments for tool %s: %s", t.Name, ve.Error())), nil
		}
		return errorResult(fmt.Sprintf("Input validation error: Invalid arguments for tool %s: %v", t.Name, err)), nil
	}

	if instance != "" && !slices.Contains(t.Instances(), instance) {
		return errorResult(fmt.Sprintf("Instance %q of tool %s is not connected. Connected instances: %s. Leave instance out to let the gateway choose.",
			instance, t.Name, strings.Join(t.Instances(), ", "))), nil
	}

	// Delivery to one replica, within the tool's wait.
	wait := f.settings.get(ctx, key.ProjectID).CallWait()
	if t.Def.TimeoutMs > 0 {
		wait = time.Duration(t.Def.TimeoutMs) * time.Millisecond
	}
	start := time.Now()
	res := route.Deliver(ctx, f.reg, key.ProjectID, toolTarget(t.Name, t.AgentKey), route.Request{
		Kind:     agentproto.KindTool,
		Name:     t.Def.Name,
		Args:     args,
		Caller:   agentproto.Caller{KeyID: key.ID, KeyName: key.Name},
		Wait:     wait,
		Instance: instance,
		Progress: progressSender(ctx, req),
	})

	// Result or error.
	var (
		out     *mcp.CallToolResult
		errText string
		outcome = store.OutcomeOK
	)
	switch {
	case res.NotFound:
		return nil, fmt.Errorf("Tool %s not found", t.Name)
	case res.NoReplica:
		out, outcome = errorResult(fmt.Sprintf(msgNoReplica, t.Name)), store.OutcomeError
	case res.TimedOut:
		errText = fmt.Sprintf("Request for tool %q timed out after %dms", t.Name, wait.Milliseconds())
		out, outcome = errorResult(errText), store.OutcomeTimeout
	case res.Cancelled:
		outcome = store.OutcomeCancelled
	case res.Disconnected:
		errText, outcome = f.disconnectedMessage(), store.OutcomeDisconnected
		out = errorResult(errText)
	case res.Err != "":
		errText, outcome = res.Err, store.OutcomeError
		out = errorResult(res.Err)
	default:
		out = new(mcp.CallToolResult)
		if err := json.Unmarshal(res.Result, out); err != nil {
			errText, outcome = "The agent sent a result the gateway could not read: "+err.Error(), store.OutcomeError
			out = errorResult(errText)
		} else if out.IsError {
			outcome, errText = store.OutcomeError, firstText(out)
		}
	}

	// Call log and usage, for calls that reached an agent.
	if res.Reached() {
		f.calls.Add(store.Call{
			Time: start, ProjectID: key.ProjectID, Kind: agentproto.KindTool, Name: t.Name,
			KeyID: key.ID, Agent: t.AgentKey, Replica: res.Replica.ID, Duration: time.Since(start),
			Outcome: outcome, Error: truncate(errText, agentproto.MaxErrorLogLen), Progress: res.Progress, Billable: true,
		})
	}
	if res.Cancelled {
		return nil, ctx.Err()
	}
	return out, nil
}

// toolTarget finds the replicas behind an exposed tool name, as long as the
// same agent still offers it.
func toolTarget(name, agentKey string) route.Target {
	return func(s *agents.Snapshot) ([]*agents.Replica, time.Time, bool) {
		t := s.Tools[name]
		if t == nil || t.AgentKey != agentKey || !t.Enabled {
			return nil, time.Time{}, false
		}
		return t.Replicas, t.GraceUntil, true
	}
}

// progressSender passes progress lines to the client when it asked for them
// with a progress token.
func progressSender(ctx context.Context, req *mcp.CallToolRequest) func(string) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil
	}
	n := 0
	return func(line string) {
		n++
		err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: line})
		if err != nil && ctx.Err() == nil {
			// The client will still get its result; progress is best effort.
			_ = err
		}
	}
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

func firstText(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}

// truncate keeps the first n characters of s.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
