package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/interceptors"
	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/store"
)

// Rules `on: list` with effect hide take a tool out of a caller's
// tools/list, and a call of it is answered as a call of an unknown tool,
// in the very same words ([Front.admitCall]): a hidden tool is not there
// for that caller. A client key's view is its own, and an OAuth key is one
// person's grant, so a view's list is one caller's ([view.sync]). A rule
// that cannot be evaluated hides (fail closed).
//
// The interceptors' tools/list response phase runs on every tools/list
// answer ([view.listPolicy]). A list an interceptor blocks is answered
// empty rather than with an error: the tools stay guarded call by call,
// and a client that cannot list goes on without tools instead of failing
// its session; the log has why.

// permits reports whether key may see and call t: the access controls,
// then the project's rules on list.
func (f *Pipeline) permits(ctx context.Context, key store.Key, c *access.Controls, t *agents.Tool) bool {
	return access.For(key, c).Permits(t) && !f.hidden(ctx, key, c, t)
}

// hidden reports whether a rule on list hides t from key's caller.
func (f *Pipeline) hidden(ctx context.Context, key store.Key, c *access.Controls, t *agents.Tool) bool {
	if !c.Policy.Has(policy.OnList) {
		return false
	}
	caller, err := f.caller(ctx, key, nil)
	if err != nil {
		return true
	}
	in := policy.Input{Caller: policyCaller(caller), Tool: c.PolicyTool(t)}
	return c.Policy.Decide(policy.OnList, &in).Effect == policy.Hide
}

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
