package pipeline

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/route"
)

// cacheStage answers a picked call from the cache, or keeps the result of
// one that ran. A hit never reaches an agent and is neither logged nor
// billed; it has passed the key check, the rate limit and validation. (A
// per-person tool's results are never cached: perperson.go. A job's first
// answer is not kept; a task's call is neither looked up nor kept.)
type cacheStage struct{}

func (cacheStage) serve(ctx context.Context, f *Pipeline, c *Call, next next) (*mcp.CallToolResult, error) {
	cacheFor := f.CacheFor(c.controls, c.tool)
	if cacheFor <= 0 || c.task != nil {
		return next.run(ctx, c)
	}
	if _, decoded, ok := f.cache.GetDecoded(c.key.ProjectID, c.tool.Name, c.args); ok {
		if cr, ok := decoded.(*cachedResult); ok {
			c.call.Release()
			f.hits.Add(1)
			return shareResult(cr.res), nil
		}
	}
	out, err := next.run(ctx, c)
	if res := c.res; !c.asJob && err == nil && out != nil && !out.IsError && out.InputRequests == nil && res.Outcome == route.OK && len(res.Result) > 0 {
		f.cache.PutDecoded(c.key.ProjectID, c.tool.Name, c.args, res.Result, f.newCachedResult(shareResult(out)), cacheFor)
	}
	return out, err
}

// CachedEarly returns the cached result of call in the era's encoding, or
// nil when there is none or the call must go through the pipeline to find
// it: the early path's look at the cache, before any replica is picked, so
// only where every replica validates the arguments alike (commonSchema).
func (f *Pipeline) CachedEarly(projectID int64, t *agents.Tool, call wire.Call, modern bool) []byte {
	args, instance, err := prepareArgs(t, call.Args)
	if err != nil {
		return nil
	}
	s := commonSchema(t, instance)
	if s == nil || s.Validate(args) != nil {
		return nil
	}
	_, decoded, ok := f.cache.GetDecoded(projectID, t.Name, args)
	cr, _ := decoded.(*cachedResult)
	if !ok || cr == nil {
		return nil
	}
	if modern {
		return cr.modern
	}
	return cr.legacy
}
