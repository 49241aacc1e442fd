package pipeline

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/store"
)

// admitStage gives an admitted call its own lifetime. The admission
// itself ([Pipeline.AdmitCall]) ran before the pipeline: in the view's
// middleware, the early path, or a task's entry.
type admitStage struct{}

func (admitStage) serve(ctx context.Context, f *Pipeline, c *Call, next next) (*mcp.CallToolResult, error) {
	// A session's calls run in the session's context: end this one when
	// its client hangs up, as the stateless protocol does, or deletes the
	// session.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if hung := HangUp(c.req.Token); hung != nil {
		defer context.AfterFunc(hung, func() { cancel(context.Canceled) })()
	}
	if c.req.Session != nil && c.task == nil {
		defer f.trackCall(c.key, c.req.Session.ID(), cancel)()
	}
	return next.run(ctx, c)
}

// The checks every way of calling a tool shares, in the order go-sdk's
// path makes them: a plain call (the pipeline, through mcpfront's view.resolve or
// the early path), a 2026-07-28 task (stateless/tasks.go) and a 2025-11-25
// task (session/tasks_call.go) all call [Pipeline.AdmitCall] (the rate limit, then
// the access policy) and [Pipeline.pickCall] (the instance argument, the
// replica, validation against that replica's schema). The key was checked
// in dispatch. A call that passes is picked, not sent: the caller sends it
// (route.Call.Send) or hands it to the task runtime.

// AdmitCall looks up tool name for key as the project is now, after the
// key's rate limit (counted is true when the call was counted already: a
// call the early path handed over). A refusal is either an isError result
// (the rate limit, which the model reads) or a JSON-RPC error ("Tool <name>
// not found", the same words whether the tool is unknown, disabled or
// filtered out).
func (f *Pipeline) AdmitCall(ctx context.Context, key store.Key, name string, counted bool) (*agents.Tool, *access.Controls, *mcp.CallToolResult, error) {
	c := f.controls.Get(ctx, key.ProjectID)
	if n := c.Settings.RateLimitPerMinute; n > 0 && !counted {
		if ok, retry := f.limiter.Allow(key.ID, n); !ok {
			return nil, c, ErrorResult(ratelimit.Message(n, retry)), nil
		}
	}
	t := f.reg.Snapshot(key.ProjectID).Tools[name]
	if t == nil || !f.Permits(ctx, key, c, t) {
		return nil, c, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Tool " + TrimName(name) + " not found"}
	}
	return t, c, nil, nil
}
