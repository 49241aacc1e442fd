// Package mcpfront is the gateway's MCP endpoint. It serves every protocol
// era on one URL through the official go-sdk — 2025-06-18 and 2025-11-25
// with sessions, 2026-07-28 stateless — and keeps one *mcp.Server per
// client key (a view, view.go) whose tools mirror what that key may see.
//
// The endpoint is built as rooms, each a package, arrows only downward
// (internal/archtest holds it):
//
//	mcpfront     this package: the HTTP handler, the key's limits, dispatch
//	             by era, the views, and the early path (early.go), which
//	             answers a plain tools/call of either era on its own wire
//	session      the 2025 era beside go-sdk's sessions: their bookkeeping,
//	             their 2025-11-25 tasks, questions on an early call's stream
//	stateless    the 2026-07-28 era's tasks extension
//	pipeline     every tools/call, once, down one ordered list of stages:
//	             admit, resume, resolve, policy, cache, repeat, shape, run
//	wire         a POST read and decoded once (wire.Request); answers
//	             written byte for byte as go-sdk writes them
//
// One tools/call, either era: [Front.ServeHTTP] → dispatch (front.go: the
// body read and decoded once, the limits, the era) → the stateless tasks
// extension, a session's task call, or the early path (early.go), else
// go-sdk's handler and the view's middleware (view.go: view.resolve) →
// pipeline.Pipeline.Serve → the stages (pipeline/stage_*.go) → route →
// the agent's socket, and back through shape and the era's wire.
//
// go-sdk serves what it serves as designed: sessions, the GET stream,
// initialize, the list methods and their list_changed notifications. The
// request value reaches go-sdk's handlers in the key's token info, the
// channel go-sdk offers from the HTTP layer to a handler. The wire of a
// plain tools/call and the tasks of both eras are the gateway's own:
// go-sdk's per-request work costs more than the rest of a call, and
// bending it to serve a call it did not parse takes side channels.
// docs/go-sdk-gaps.md lists each gap worked around, with its upstream
// issue.
package mcpfront

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agents"
	sfauth "github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/cache"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/identity"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/mcpfront/session"
	"github.com/spacefix/spacefix/internal/mcpfront/stateless"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/oauth"
	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/tasks"
)

// Path is where the endpoint is mounted.
const Path = "/mcp"

// Options configure a [Front].
type Options struct {
	// Registry is the live registry of agents. Required.
	Registry *agents.Registry
	// Changes is the change path the registry and the dashboard publish
	// on; the endpoint subscribes to it to keep views and caches up to
	// date (see [Front.changed]). Nil: nothing changes after start.
	Changes *changes.Bus
	// Store is read for each project's tool controls ([access.Load]).
	// Required.
	Store access.Store
	// Verifier checks client keys. Required.
	Verifier *sfauth.Verifier
	// CallLog records calls that reached an agent. Required.
	CallLog *store.CallLog
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Version is the gateway version reported to clients.
	Version string
	// CacheBytes bounds the memory of cached tool results; 0 means 64 MiB.
	CacheBytes int64
	// TracerProvider traces tools/call requests (see pipeline/trace.go); nil means
	// no traces.
	TracerProvider trace.TracerProvider
	// SessionIdle closes a session with no request for this long; 0 means
	// 30 minutes. A session is not idle while a request of it is in flight
	// or it holds a GET stream (which is pinged).
	SessionIdle time.Duration
	// ViewIdle drops a client key's view (its go-sdk server, rebuilt on
	// the key's next request) once it has had no session and no request
	// for this long; 0 means 5 minutes.
	ViewIdle time.Duration
	// KeepAlive is how often sessions holding a GET stream are pinged; 0
	// means 30 seconds. Sessions without a stream are never pinged.
	KeepAlive time.Duration
	// MaxSessionsPerKey caps the sessions of one client key; a new one
	// over the cap closes the key's idlest session. 0 means 1,000.
	MaxSessionsPerKey int
	// MaxInFlightPerKey caps the requests of one client key in flight; 0
	// means 64.
	MaxInFlightPerKey int
	// HostsChecked says the caller refuses requests for unknown hosts
	// itself, so go-sdk's own check (loopback connections must name a
	// loopback host) is off: it would refuse the hosts the operator allowed
	// behind a local proxy. False keeps go-sdk's check.
	HostsChecked bool
	// SessionPrefix starts every MCP session id and every requestState
	// (a 2026-07-28 call waiting for the user) this gateway makes, so that
	// the gateways sharing a store can tell whose a session or a held call
	// is and forward its requests there; "" when this gateway is alone.
	SessionPrefix string
	// Secrets seals requestState (pipeline/confirm.go) so no client reads or forges
	// it: the key file every gateway shares, so any gateway opens any. Nil
	// means a key in memory, this endpoint's own (no key file).
	Secrets *secrets.Box
	// OAuth checks OAuth access tokens and says how to get one in every
	// 401; nil means client keys only.
	OAuth *oauth.Server
	// Limiter counts the calls of keys with a rate limit; nil means one
	// of the front's own. Gateways sharing a store share it (see
	// ratelimit.Limiter.Share).
	Limiter *ratelimit.Limiter
	// Tasks runs MCP tasks (stateless/tasks.go, session/tasks.go); nil means
	// the endpoint offers no tasks and runs every call plainly.
	Tasks *tasks.Manager
	// Idempotency keeps the request ids of repeat-safe tools
	// (pipeline/repeat.go); nil means Store's, when Store has them (a store.Store
	// does), else calls of such tools are delivered as any other.
	Idempotency store.Idempotency
	// Identity signs the identity tokens of calls to agent keys with an
	// identity audience (pipeline/identity.go); nil means no call carries one.
	Identity *identity.Signer
	// Upstream keeps the people's accounts at per-person bridged
	// remotes (pipeline/perperson.go); nil means a person's call to a
	// remote in connect mode cannot be made.
	Upstream Upstream
	// Policy is what the policy point needs (pipeline/policy_call.go).
	Policy PolicyOptions
}

// Upstream keeps the people's accounts at per-person bridged remotes.
type Upstream = pipeline.Upstream

// PolicyOptions are what the policy point needs from the gateway.
type PolicyOptions = pipeline.PolicyOptions

// Front is the MCP endpoint. It is an http.Handler.
type Front struct {
	pipe *pipeline.Pipeline // every tools/call, whichever era
	ext  *stateless.Tasks   // 2026-07-28's tasks extension
	era  *session.Era       // the 2025 sessions' shared part

	reg      *agents.Registry
	store    access.Store
	calls    *store.CallLog
	log      *slog.Logger
	controls *access.Cache
	cache    *cache.Cache
	limiter  *ratelimit.Limiter
	tracer   trace.Tracer   // nil: no traces
	tasks    *tasks.Manager // nil: no tasks
	impl     *mcp.Implementation

	sessionPrefix string // see Options.SessionPrefix
	hostsChecked  bool   // see Options.HostsChecked
	verifier      *sfauth.Verifier
	oauth         *oauth.Server // nil: client keys only
	sdkLog        *slog.Logger  // go-sdk's, quieter about normal endings: see sdkLogger

	earlyHits  atomic.Int64 // of the cache's hits, answered before go-sdk (see early.go)
	earlyCalls atomic.Int64 // other tool calls answered before go-sdk
	earlyNow   atomic.Int64 // of those, at 2026-07-28 and being served now

	stateful  *mcp.StreamableHTTPHandler
	stateless *mcp.StreamableHTTPHandler
	handler   http.Handler

	mu    sync.Mutex
	views map[string]*view // by client key id

	inflight inFlight // POST requests being served, until their response is written

	life           lifecycle // see lifecycle.go
	changes        *changes.Bus
	keepAliveEvery time.Duration // see Options.KeepAlive
	sessionIdle    time.Duration // see Options.SessionIdle

	maxSessions int
	maxInFlight int
	viewIdle    time.Duration
	updated     chan changes.Change // resource updates for tellSubscribers
}

// New builds the endpoint; it starts nothing. [Front.Start] subscribes it
// to opts.Changes and starts its background work, until [Front.Close].
func New(opts Options) *Front {
	if opts.Registry == nil || opts.Store == nil || opts.Verifier == nil || opts.CallLog == nil {
		panic("mcpfront.New: Registry, Store, Verifier and CallLog are required")
	}
	idem := opts.Idempotency
	if idem == nil {
		idem, _ = opts.Store.(store.Idempotency)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	f := &Front{
		reg: opts.Registry, store: opts.Store, calls: opts.CallLog, log: log,
		controls: access.NewCache(opts.Store, time.Second, policy.Options{Log: log}),
		limiter:  opts.Limiter, tasks: opts.Tasks,
		impl:          &mcp.Implementation{Name: "spacefix", Title: "Spacefix", Version: opts.Version},
		sessionPrefix: opts.SessionPrefix, hostsChecked: opts.HostsChecked,
		verifier: opts.Verifier, oauth: opts.OAuth, changes: opts.Changes,
		views: make(map[string]*view),
	}
	if opts.TracerProvider != nil {
		f.tracer = opts.TracerProvider.Tracer(pipeline.TracerName, trace.WithInstrumentationVersion(opts.Version))
	}
	if f.limiter == nil {
		f.limiter = ratelimit.New()
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 64 << 20
	}
	f.cache = cache.New(opts.CacheBytes)
	f.pipe = pipeline.New(pipeline.Options{
		Registry: f.reg, Store: f.store, Controls: f.controls, CallLog: f.calls, Logger: log,
		Cache: f.cache, Limiter: f.limiter, Tracer: f.tracer, Tasks: f.tasks, Idempotency: idem,
		Identity: opts.Identity, Upstream: opts.Upstream, Policy: opts.Policy, Impl: f.impl,
		SessionPrefix: opts.SessionPrefix, Secrets: opts.Secrets,
		TrackCall: func(k store.Key, id string, cancel context.CancelCauseFunc) func() {
			return f.viewFor(k).sess.TrackCall(id, cancel)
		},
	})
	f.life.stop = make(chan struct{})
	f.ext = stateless.New(stateless.Options{Tasks: f.tasks, Pipeline: f.pipe, Registry: f.reg, Logger: log, Impl: f.impl, Stop: f.life.stop})
	f.era = session.New(session.Options{Tasks: f.tasks, Pipeline: f.pipe, Registry: f.reg, Controls: f.controls, Logger: log, Impl: f.impl})
	f.sdkLog = sdkLogger(f.log)
	f.sessionIdle, f.keepAliveEvery = opts.SessionIdle, opts.KeepAlive
	if f.sessionIdle <= 0 {
		f.sessionIdle = 30 * time.Minute
	}
	if f.keepAliveEvery <= 0 {
		f.keepAliveEvery = 30 * time.Second
	}
	f.viewIdle = opts.ViewIdle
	if f.viewIdle <= 0 {
		f.viewIdle = 5 * time.Minute
	}
	f.maxSessions, f.maxInFlight = opts.MaxSessionsPerKey, opts.MaxInFlightPerKey
	if f.maxSessions <= 0 {
		f.maxSessions = 1000
	}
	if f.maxInFlight <= 0 {
		f.maxInFlight = 64
	}
	// Request bodies are capped in dispatch, by the project's largest
	// arguments.
	// No SessionTimeout: go-sdk's counts only POSTs as use, so a session
	// whose client listens on its GET stream would close; keepAlive closes
	// idle sessions instead.
	f.stateful = mcp.NewStreamableHTTPHandler(f.getServer, &mcp.StreamableHTTPOptions{
		Logger:                     f.sdkLog,
		MaxRequestBodyBytes:        -1,
		DisableLocalhostProtection: opts.HostsChecked,
	})
	f.stateless = mcp.NewStreamableHTTPHandler(f.getServer, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		PropagateRequestCancellation: true,
		Logger:                       f.sdkLog,
		MaxRequestBodyBytes:          -1,
		DisableLocalhostProtection:   opts.HostsChecked,
	})
	f.updated = make(chan changes.Change, 1024)
	bearer := auth.RequireBearerToken(f.verifyToken, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	f.handler = http.NewCrossOriginProtection().Handler(f.challenge(f.dpopScheme(bearer(http.HandlerFunc(f.dispatch)))))
	return f
}

// ServeHTTP serves the MCP endpoint.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Proxies must not buffer the SSE responses that carry progress.
	w.Header().Set("X-Accel-Buffering", "no")
	if r.Method == http.MethodPost {
		// Counted until the response is written, not just until a handler
		// returned: shutdown waits for answers to reach their clients.
		f.inflight.add()
		defer f.inflight.done()
		defer f.flushDraining(w)
	}
	f.handler.ServeHTTP(w, r)
}

// flushDraining sends what is buffered of w's response when the gateway
// is shutting down: what a handler wrote may sit in net/http's buffer
// after it returns, and a shutdown that closes the connection once the
// count drops would cut the answer before its first byte
// (TestGracefulShutdown: "Post …: EOF"). Otherwise net/http sends it as
// it always does (with a Content-Length when it fits its buffer).
func (f *Front) flushDraining(w http.ResponseWriter) {
	if f.pipe.Draining() {
		_ = http.NewResponseController(w).Flush() // an error: the client has gone
	}
}

// dispatch applies the key's limits, then sends a request to the handler of
// its protocol era: go-sdk serves one era per handler, so sessions and the
// stateless protocol share the URL here.
func (f *Front) dispatch(w http.ResponseWriter, r *http.Request) {
	if cw, ok := w.(*challengeWriter); ok {
		w = cw.ResponseWriter // verified: no challenge from here on
	}
	k, ok := pipeline.KeyFrom(auth.TokenInfoFromContext(r.Context()))
	if !ok {
		f.stateful.ServeHTTP(w, r) // go-sdk answers: no server for it
		return
	}
	v := f.viewFor(k)
	var req *wire.Request // a POST's message, read once: wire/request.go
	if r.Method == http.MethodPost {
		if n := v.inflight.Add(1); n > int64(f.maxInFlight) {
			v.inflight.Add(-1)
			refuse(w, http.StatusTooManyRequests, fmt.Sprintf(msgTooManyInFlight, f.maxInFlight))
			return
		}
		defer v.inflight.Add(-1)
		if req = f.limitBody(w, r, k); req == nil {
			return
		}
		if k.OAuth && k.ReadOnly && f.needsWrite(r.Context(), req, k) {
			w.Header().Set("WWW-Authenticate", f.oauth.InsufficientScope(r))
			refuse(w, http.StatusForbidden, msgInsufficientScope)
			return
		}
	}
	if f.isModern(r, req) {
		if req != nil && (f.ext.Serve(w, r, req, v.key) || f.answerEarly(w, r, req, v, "")) {
			return
		}
		f.stateless.ServeHTTP(w, r)
		return
	}
	f.serveSession(w, r, req, v)
}

// isModern reports whether a request speaks 2026-07-28 or later: by its
// MCP-Protocol-Version header, or, on a POST (req) outside any session, by
// the protocol version in the body's _meta.
func (f *Front) isModern(r *http.Request, req *wire.Request) bool {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		return v >= wire.ModernVersion
	}
	if req == nil || r.Header.Get("Mcp-Session-Id") != "" {
		return false
	}
	v, _ := wire.JSONString(req.Version)
	return v >= wire.ModernVersion
}

// changed keeps the MCP side equal to what changed, as a subscriber of the
// change path: it runs on the publisher's goroutine (the registry's, or a
// dashboard request's), so it does only in-memory work plus, after a
// settings change, one read of the project's controls from the store.
//
//   - Agents connected: the cached results of those agents' tools go (they
//     may answer differently now).
//   - Saved settings changed: the project's cached controls and cached
//     results go, so the next request applies them.
//   - A key was revoked: the key verifier forgets it (it stops working at
//     once, not within the verifier's TTL) and its view goes, with its
//     sessions. A request that passed verification just before may build
//     the view again; the idle sweep drops that one.
//
// Then every view of the project is brought up to date; go-sdk sends
// list_changed to sessions whose lists changed.
func (f *Front) changed(c changes.Change) {
	if c.Kind == changes.ResourceUpdated {
		// Off the publisher's goroutine (an agent's connection), in order:
		// clients that read slowly must not hold it up.
		select {
		case f.updated <- c:
		default:
			f.log.Warn("resource update dropped: too many waiting to go out", "uri", c.URI)
		}
		return
	}
	switch c.Kind {
	case changes.AgentConnected:
		connected := make(map[string]bool, len(c.AgentKeys))
		for _, k := range c.AgentKeys {
			connected[k] = true
		}
		var tools []string
		for _, t := range f.reg.Snapshot(c.Project).ToolList {
			if connected[t.AgentKey] {
				tools = append(tools, t.Name)
			}
		}
		f.cache.ClearTools(c.Project, tools...)
	case changes.Settings, changes.KeyRevoked:
		f.controls.Forget(c.Project)
		f.cache.ClearProject(c.Project)
	}
	if c.Kind == changes.KeyRevoked {
		f.verifier.Forget(c.Key)
		if f.oauth != nil {
			f.oauth.Forget(c.Key) // a grant's id, when an OAuth app was disconnected
		}
		f.dropView(c.Key, "key revoked")
	}
	f.mu.Lock()
	var vs []*view
	for _, v := range f.views {
		if v.key.ProjectID == c.Project {
			vs = append(vs, v)
		}
	}
	f.mu.Unlock()
	for _, v := range vs {
		v.sync()
	}
}

// EarlyStats returns how many tool calls the cache answered, how many of
// those were answered before go-sdk parsed them, and how many other tool
// calls were (early.go).
func (f *Front) EarlyStats() (hits, earlyHits, earlyCalls int64) {
	return f.pipe.Hits(), f.earlyHits.Load(), f.earlyCalls.Load()
}
