package pipeline

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// repeatStage makes a repeat-safe tool's call claim its request id: a
// repeat of the id is answered here, or the call goes on with its id
// claimed (repeat.go). A job claims it too; its first answer is what a
// repeat gets (runStage). A task-augmented call is run as any task,
// without the record: its client holds the task id.
type repeatStage struct{}

func (repeatStage) serve(ctx context.Context, f *Pipeline, c *Call, next next) (*mcp.CallToolResult, error) {
	if c.tool.Def.IdempotencyKey != "" && c.task == nil {
		if out, err := f.repeat(ctx, c.tool, c.key, c.controls, c.args, c.call, c.start, c.pol); out != nil || err != nil {
			return out, err
		}
	}
	return next.run(ctx, c)
}
