package mcpfront

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resumeStage settles a call that is already under way: an early session
// call go-sdk took over at the agent's question (handoff.go), or a retry
// that carries the user's answer to the agent's question (the call is
// still running on its replica). Neither is picked, cached or claimed
// again. (A call that asked is not cached.)
type resumeStage struct{}

func (resumeStage) serve(ctx context.Context, f *Front, c *toolCall, next next) (*mcp.CallToolResult, error) {
	if h := handedOver(c.req.Extra); h != nil {
		c.call, c.res, c.start, c.settled = h.call, h.res, h.start, true
		return next.run(ctx, c)
	}
	req := c.req
	if req.Params.RequestState == "" {
		c.start = time.Now()
		return next.run(ctx, c)
	}
	if f.isPolicyState(req.Params.RequestState) {
		// The user's answer to the policy's question: the call is made
		// now, and the policy stage reads the answer (policy_confirm.go).
		c.start = time.Now()
		return next.run(ctx, c)
	}
	h, err := f.held.resume(req.Params.RequestState, c.key.ID)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	if h.asked != nil {
		h.respond(req.Params.InputResponses)
	} else {
		accepted, err := answer(req, h.input)
		h.call.Answer(h.input, accepted, err)
	}
	c.call, c.res, c.start, c.settled = h.call, waitOn(ctx, req, h.call), h.start, true
	return next.run(ctx, c)
}
