package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spacefix/spacefix/internal/interceptors"
)

// listPolicy keeps a view's tools/list under the project's policy: synced
// again when the policy's version changed since the view's last sync (a
// saved policy applies at the next list, as the controls refresh), and
// the answer passed through the interceptors' tools/list response phase.
func (v *view) listPolicy(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/list" {
			return next(ctx, method, req)
		}
		c := v.f.controls.Get(ctx, v.key.ProjectID)
		if c.PolicyVersion != v.policySeen.Load() {
			v.sync()
		}
		res, err := next(ctx, method, req)
		if err != nil || c.Policy == nil {
			return res, err
		}
		chain := v.f.policy.chain(v.key.ProjectID, c, v.f.bridged(v.key.ProjectID))
		if chain == nil {
			return res, err
		}
		switch lr := res.(type) {
		case *mcp.ListToolsResult:
			return v.interceptList(ctx, chain, lr), nil
		case toolsWithExecution: // execution.go
			lr.ListToolsResult = v.interceptList(ctx, chain, lr.ListToolsResult)
			return lr, nil
		}
		return res, err
	}
}

// interceptList runs the interceptors' tools/list response phase on lr.
func (v *view) interceptList(ctx context.Context, chain *interceptors.Chain, lr *mcp.ListToolsResult) *mcp.ListToolsResult {
	raw, err := json.Marshal(lr)
	if err != nil {
		return lr
	}
	caller, err := v.f.caller(ctx, v.key, nil)
	if err != nil {
		return &mcp.ListToolsResult{Tools: []*mcp.Tool{}}
	}
	ic := invokeContext(caller)
	ic.Timestamp = time.Now().UTC().Format(time.RFC3339Nano)
	out, o := chain.Run(ctx, "tools/list", interceptors.PhaseResponse, raw, ic)
	if obs := v.f.policy.opts.Observe; obs != nil {
		for _, r := range o.Ran {
			obs.ObserveInterceptor(v.key.ProjectID, r.By, r.Duration, r.Err != nil)
		}
	}
	if o.Blocked {
		v.f.log.Warn("an interceptor blocked a tools/list; the list was answered empty", "project", v.key.ProjectID, "interceptor", o.By, "message", o.Message)
		return &mcp.ListToolsResult{Tools: []*mcp.Tool{}}
	}
	if bytes.Equal(out, raw) {
		return lr
	}
	var changed mcp.ListToolsResult
	if err := json.Unmarshal(out, &changed); err != nil {
		v.f.log.Warn("an interceptor rewrote a tools/list into something else; the list was answered empty", "project", v.key.ProjectID, "err", err)
		return &mcp.ListToolsResult{Tools: []*mcp.Tool{}}
	}
	if changed.Tools == nil {
		changed.Tools = []*mcp.Tool{}
	}
	return &changed
}
