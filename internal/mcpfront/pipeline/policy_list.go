package pipeline

import (
	"context"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/store"
)

// Rules `on: list` with effect hide take a tool out of a caller's
// tools/list, and a call of it is answered as a call of an unknown tool,
// in the very same words ([Pipeline.AdmitCall]): a hidden tool is not there
// for that caller. A client key's view is its own, and an OAuth key is one
// person's grant, so a view's list is one caller's (mcpfront's view.sync). A rule
// that cannot be evaluated hides (fail closed).
//
// The interceptors' tools/list response phase runs on every tools/list
// answer (mcpfront's view.listPolicy). A list an interceptor blocks is answered
// empty rather than with an error: the tools stay guarded call by call,
// and a client that cannot list goes on without tools instead of failing
// its session; the log has why.

// Permits reports whether key may see and call t: the access controls,
// then the project's rules on list.
func (f *Pipeline) Permits(ctx context.Context, key store.Key, c *access.Controls, t *agents.Tool) bool {
	return access.For(key, c).Permits(t) && !f.Hidden(ctx, key, c, t)
}

// Hidden reports whether a rule on list hides t from key's caller.
func (f *Pipeline) Hidden(ctx context.Context, key store.Key, c *access.Controls, t *agents.Tool) bool {
	if !c.Policy.Has(policy.OnList) {
		return false
	}
	caller, err := f.Caller(ctx, key, nil)
	if err != nil {
		return true
	}
	in := policy.Input{Caller: policyCaller(caller), Tool: c.PolicyTool(t)}
	return c.Policy.Decide(policy.OnList, &in).Effect == policy.Hide
}
