package mcpfront

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/cache"
	"github.com/spacefix/spacefix/internal/identity"
	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/tasks"
)

// Pipeline runs tools/calls down the stages, whichever era's wire they came
// in on.
type Pipeline struct {
	reg      *agents.Registry
	store    access.Store
	calls    *store.CallLog
	log      *slog.Logger
	controls *access.Cache
	held     *heldCalls // calls waiting for the user's answer
	cache    *cache.Cache
	limiter  *ratelimit.Limiter
	tracer   trace.Tracer   // nil: no traces
	tasks    *tasks.Manager // nil: no tasks
	repeats  *repeats
	callers  callers          // who is calling, per OAuth grant: caller.go
	identity *identity.Signer // nil: no identity tokens (identity.go)
	upstream Upstream         // nil: no per-person accounts (perperson.go)
	impl     *mcp.Implementation
	policy   policyState // interceptor chains: policy_chains.go

	// trackCall notes a call in flight in a 2025 session, so that closing
	// the session ends it; it returns the function that forgets it. The
	// session era sets it (Front).
	trackCall func(key store.Key, sessionID string, cancel context.CancelCauseFunc) (forget func())

	hits     atomic.Int64 // tool calls answered from the cache
	draining atomic.Bool  // see StartDrain
}
