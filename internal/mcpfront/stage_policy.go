package mcpfront

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// policyStage is where policy rules and interceptors stand: every call
// that is picked passes here exactly once, before the cache, a request
// id's claim or any agent. Empty today: every call goes on.
type policyStage struct{}

func (policyStage) serve(ctx context.Context, _ *Front, c *toolCall, next next) (*mcp.CallToolResult, error) {
	return next.run(ctx, c)
}
