package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/cache"
	"github.com/spacefix/spacefix/internal/identity"
	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/tasks"
)

// Options configure a [Pipeline]. The endpoint shares most of these with
// it (the registry, the controls, the cache, the limiter): one of each per
// gateway.
type Options struct {
	Registry *agents.Registry
	Store    access.Store
	Controls *access.Cache
	CallLog  *store.CallLog
	Logger   *slog.Logger
	Cache    *cache.Cache
	Limiter  *ratelimit.Limiter
	Tracer   trace.Tracer   // nil: no traces
	Tasks    *tasks.Manager // nil: no tasks
	// Idempotency keeps the request ids of repeat-safe tools (repeat.go);
	// nil: calls of such tools are delivered as any other.
	Idempotency store.Idempotency
	Identity    *identity.Signer // nil: no identity tokens (identity.go)
	Upstream    Upstream         // nil: no per-person accounts (perperson.go)
	Policy      PolicyOptions
	// Impl is the gateway as results name it (_meta's serverInfo at
	// 2026-07-28).
	Impl *mcp.Implementation
	// SessionPrefix and Secrets make and seal requestState (confirm.go):
	// see mcpfront.Options.
	SessionPrefix string
	Secrets       *secrets.Box
	// TrackCall notes a call in flight in a 2025 session, so that closing
	// the session ends it; it returns the function that forgets it. The
	// session era provides it.
	TrackCall func(key store.Key, sessionID string, cancel context.CancelCauseFunc) (forget func())
}

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

	trackCall func(key store.Key, sessionID string, cancel context.CancelCauseFunc) (forget func())

	hits     atomic.Int64 // tool calls answered from the cache
	draining atomic.Bool  // see Drain
}

// New builds the pipeline; [Pipeline.Close] stops its background work.
func New(o Options) *Pipeline {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	version := ""
	if o.Impl != nil {
		version = o.Impl.Version
	}
	return &Pipeline{
		reg: o.Registry, store: o.Store, calls: o.CallLog, log: o.Logger, controls: o.Controls,
		held:  newHeldCalls(o.Logger, o.SessionPrefix, o.Secrets),
		cache: o.Cache, limiter: o.Limiter, tracer: o.Tracer, tasks: o.Tasks,
		repeats: newRepeats(o.Idempotency, o.Logger), identity: o.Identity, upstream: o.Upstream,
		impl: o.Impl, policy: policyState{opts: o.Policy, version: version, log: o.Logger},
		trackCall: o.TrackCall,
	}
}

// Close waits for the repeat-safe records being written and stops the
// interceptor chains.
func (f *Pipeline) Close() {
	f.repeats.wait()
	f.policy.close()
}

// Drain makes the calls that lose their agent from now on say the gateway
// is shutting down.
func (f *Pipeline) Drain() { f.draining.Store(true) }

// Draining reports whether [Pipeline.Drain] was called: the gateway is
// shutting down.
func (f *Pipeline) Draining() bool { return f.draining.Load() }

// Hits returns how many tool calls the cache answered.
func (f *Pipeline) Hits() int64 { return f.hits.Load() }

// disconnectedMessage says why a call lost its agent.
func (f *Pipeline) disconnectedMessage() string {
	if f.draining.Load() {
		return msgShutdown
	}
	return msgDisconnected
}

// ErrSessionClosed ends the calls of a session its client deleted.
var ErrSessionClosed = errors.New("mcp session closed")

// msgSessionClosed is the JSON-RPC error a call gets when its session
// closed before it finished.
const msgSessionClosed = "The MCP session closed before this call finished. Open a new session (initialize) and call again."

// CountHit counts a tool call the cache answered outside the pipeline (the
// early path's look at the cache, [Pipeline.CachedEarly]).
func (f *Pipeline) CountHit() { f.hits.Add(1) }
