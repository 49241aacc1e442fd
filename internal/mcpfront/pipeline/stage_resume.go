package pipeline

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// resumeStage settles a call that is already under way: a retry that
// carries the user's answer to the agent's question (the call is still
// running on its replica). It is not picked, cached or claimed again. (A
// call that asked is not cached.)
type resumeStage struct{}

func (resumeStage) serve(ctx context.Context, f *Pipeline, c *Call, next next) (*mcp.CallToolResult, error) {
	req := c.req
	if req.RequestState == "" {
		c.start = time.Now()
		return next.run(ctx, c)
	}
	if f.isPolicyState(req.RequestState) {
		// The user's answer to the policy's question: the call is made
		// now, and the policy stage reads the answer (policy_confirm.go).
		c.start = time.Now()
		return next.run(ctx, c)
	}
	h, err := f.held.resume(req.RequestState, c.key.ID, heldName(agentproto.KindTool, c.tool.Name))
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	if h.asked != nil {
		h.respond(req.InputResponses)
	} else {
		accepted, err := answer(req, h.input)
		h.call.Answer(h.input, accepted, err)
	}
	c.call, c.res, c.start, c.settled = h.call, waitOn(ctx, req, h.call), h.start, true
	return next.run(ctx, c)
}
