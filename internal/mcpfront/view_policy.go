package mcpfront

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/policy"
)

// listPolicy keeps a view's tools/list under the project's policy: synced
// again when the policy's version changed since the view's last sync (a
// saved policy applies at the next list, as the controls refresh) or when
// a rule on list reads the time (what it hides changes with the clock
// alone), and the answer passed through the interceptors' tools/list
// response phase.
func (v *view) listPolicy(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/list" {
			return next(ctx, method, req)
		}
		c := v.f.controls.Get(ctx, v.key.ProjectID)
		if c.PolicyVersion != v.policySeen.Load() || c.Policy.ReadsNow(policy.OnList) {
			v.sync()
		}
		res, err := next(ctx, method, req)
		if err != nil || c.Policy == nil {
			return res, err
		}
		switch lr := res.(type) {
		case *mcp.ListToolsResult:
			return v.f.pipe.InterceptList(ctx, v.key, c, lr), nil
		case toolsWithExecution: // execution.go
			lr.ListToolsResult = v.f.pipe.InterceptList(ctx, v.key, c, lr.ListToolsResult)
			return lr, nil
		}
		return res, err
	}
}
