package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/interceptors"
	"github.com/spacefix/spacefix/internal/store"
)

// InterceptList runs the interceptors' tools/list response phase on lr,
// the tools/list answer of key's view under the project's controls c.
func (f *Pipeline) InterceptList(ctx context.Context, key store.Key, c *access.Controls, lr *mcp.ListToolsResult) *mcp.ListToolsResult {
	chain := f.policy.chain(key.ProjectID, c, f.Bridged(key.ProjectID))
	hk := chain.Hooked(ctx, "tools/list", interceptors.PhaseResponse)
	if hk == nil {
		return lr
	}
	raw, err := json.Marshal(lr)
	if err != nil {
		return lr
	}
	caller, err := f.Caller(ctx, key, nil)
	if err != nil {
		return &mcp.ListToolsResult{Tools: []*mcp.Tool{}}
	}
	ic := InvokeContext(caller)
	ic.Timestamp = time.Now().UTC().Format(time.RFC3339Nano)
	out, o := hk.Run(ctx, raw, ic)
	if obs := f.policy.opts.Observe; obs != nil {
		for _, r := range o.Ran {
			obs.ObserveInterceptor(key.ProjectID, r.By, r.Duration, r.Err != nil)
		}
	}
	if o.Blocked {
		f.log.Warn("an interceptor blocked a tools/list; the list was answered empty", "project", key.ProjectID, "interceptor", o.By, "message", o.Message)
		return &mcp.ListToolsResult{Tools: []*mcp.Tool{}}
	}
	if bytes.Equal(out, raw) {
		return lr
	}
	var changed mcp.ListToolsResult
	if err := json.Unmarshal(out, &changed); err != nil {
		f.log.Warn("an interceptor rewrote a tools/list into something else; the list was answered empty", "project", key.ProjectID, "err", err)
		return &mcp.ListToolsResult{Tools: []*mcp.Tool{}}
	}
	if changed.Tools == nil {
		changed.Tools = []*mcp.Tool{}
	}
	return &changed
}
