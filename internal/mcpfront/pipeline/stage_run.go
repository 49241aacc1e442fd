package pipeline

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/tasks"
)

// runStage runs a picked call: as a task (its entry answers), as a job
// (jobs.go), which answers itself, or delivered to its replica within the
// tool's wait, which settles it for shapeStage.
type runStage struct{}

func (runStage) serve(ctx context.Context, f *Pipeline, c *Call, _ next) (*mcp.CallToolResult, error) {
	if tr := c.task; tr != nil {
		tr.task, tr.err = f.tasks.Run(ctx, tasks.Spec{Key: c.key, Tool: c.tool, Call: c.call, Era: tr.era, TTL: tr.ttl, Start: c.start,
			Unauthorized: f.taskUnauthorized(c.key, c.call, c.tool.Name), Shape: c.pol.taskShaper(),
			Confirm: tr.confirm, Confirmed: tr.confirmed})
		return nil, nil
	}
	if c.asJob {
		out, err := f.runJob(ctx, c.req, c.tool, c.key, c.call, c.start, c.wait, c.pol.taskShaper())
		if c.tool.Def.IdempotencyKey != "" {
			// The job's first answer is what a repeat gets: its result,
			// or its job reference.
			end := route.Result{Outcome: route.OK, Replica: c.call.Replica()}
			if out == nil {
				end.Outcome = route.Cancelled // it may have started: unknown
			}
			f.repeats.end(c.call.ID(), end, out, store.OutcomeOK)
		}
		return out, err
	}
	call, res := c.call.Send(ctx)
	if call != nil {
		res = waitOn(ctx, c.req, call)
		if upstreamRefused(res) {
			// A per-person remote refused the person's token: once more
			// with the account refreshed (perperson.go).
			var (
				out *mcp.CallToolResult
				err error
			)
			if call, res, out, err = f.retryTool(ctx, c.req, c.pick, call, res); out != nil || err != nil {
				return out, err
			}
		}
	}
	c.call, c.res, c.settled = call, res, true
	return nil, nil
}
