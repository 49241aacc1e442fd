package gateway

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spacefix/spacefix/internal/agentfront"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/cluster"
	"github.com/spacefix/spacefix/internal/egress"
	"github.com/spacefix/spacefix/internal/identity"
	"github.com/spacefix/spacefix/internal/mcpfront"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/oauth"
	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/recovery"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/tasks"
	"github.com/spacefix/spacefix/internal/upstream"
	"github.com/spacefix/spacefix/internal/users"
)

// Gateway is one running gateway process.
type Gateway struct {
	cfg        Config
	log        *slog.Logger
	store      store.Store
	reg        *agents.Registry
	changes    *changes.Bus // the one change path: registry and saved-state changes
	front      *mcpfront.Front
	agents     *agentfront.Front
	calls      *store.CallLog
	verifier   *auth.Verifier
	obs        *observability                  // metrics, readiness, pprof
	me         store.Gateway                   // this gateway as the store knows it (peers.go)
	cluster    atomic.Pointer[cluster.Cluster] // the bus, with --bus; set by Start
	limiter    *ratelimit.Limiter              // per-key rate limits, shared over the bus
	oauth      *oauth.Server                   // nil with NoOAuth
	tasks      *tasks.Manager                  // MCP tasks: run here, kept in the store
	identity   *identity.Signer                // signs per-call identity assertions; keys in the store
	box        *secrets.Box                    // seals people's upstream tokens (secrets.go)
	boxFile    bool                            // box is a key file's, not one in memory: it seals the identity keys too
	boxCreated bool                            // this start made the key file (SQLite): nothing sealed before opens
	peers      *cluster.ForwardAuth            // signs and checks forwards between gateways; nil without --bus
	upstream   *upstream.Service               // people's own accounts at per-person bridged remotes

	srv   *http.Server
	mux   http.Handler // every route, behind panic recovery; Start adds the Host check, metrics and the edge
	ln    net.Listener
	edge  *edge      // who a request comes from, with --trusted-proxies
	limit *connLimit // --max-conns and --max-conns-per-addr

	// ctx ends when the gateway stops (see lifecycle.go): the store record
	// and the pruner, which conns waits for, and the dashboard's live
	// tails live in it.
	ctx    context.Context
	cancel context.CancelFunc
	conns  sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// New builds a gateway over an open store. It does not listen yet and
// starts no background work: Start does. Zero fields of cfg take the
// defaults their docs name; the result is then validated.
func New(cfg Config, st store.Store) (*Gateway, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	trusted, _ := parseTrustedProxies(cfg.TrustedProxies) // Validate checked them
	g := &Gateway{cfg: cfg, log: cfg.Logger, store: st,
		edge: &edge{trusted: trusted, publicHTTPS: strings.HasPrefix(strings.ToLower(cfg.PublicURL), "https://")}}
	g.limit = newConnLimit(cfg.MaxConns, cfg.MaxConnsPerAddr, g.uncapped, g.log)
	g.me.ID = "gw-" + rand.Text()[:10]
	var sessionPrefix string
	g.limiter = ratelimit.New()
	if cfg.Bus != "" {
		sessionPrefix = g.me.ID + "." // whose a session is: see forwardSessions
		g.limiter.Share()             // the gateways count each other's calls
	}
	var err error
	if g.box, err = g.openSecrets(); err != nil {
		return nil, err
	}
	if cfg.Bus != "" {
		if !g.boxFile {
			return nil, errBusNoKeyFile
		}
		g.peers = cluster.NewForwardAuth(g.box, nil)
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.verifier = auth.NewVerifier(st, 500*time.Millisecond)
	g.obs = newObservability(g) // before the call log: metrics count every record
	g.obs.metrics.WatchConns(g.limit.stats)
	g.calls = store.NewCallLog(st, &store.CallLogOptions{Logger: g.log, Observe: g.obs.metrics.ObserveCall})
	g.changes = changes.New(g.log)
	g.reg = agents.New(&agents.Options{Grace: cfg.Grace, Changes: g.changes, Logger: g.log, Observer: observer{g}})
	g.identity = g.newIdentity()
	g.upstream = upstream.New(upstream.Options{
		Store: st, Box: g.box, PublicURL: func() string { return strings.TrimRight(g.URL(), "/") },
		Egress: egress.Policy{AllowLoopback: cfg.UpstreamAllowLoopback, AllowPrivate: cfg.UpstreamAllowPrivate}, Log: g.log,
	})
	if !cfg.NoOAuth {
		g.oauth = oauth.New(oauth.Options{
			Store: st, BaseURL: g.baseFor, Logger: g.log, JWKSPath: JWKSPath,
			AllowPrivateClientIDs: cfg.OAuthPrivateClientIDs, ClientIDRoots: cfg.OAuthClientIDRoots,
			// Identity providers' metadata and keys are fetched under the
			// one egress policy of every upstream dial: loopback with
			// --upstream-allow-loopback, private ranges when listed in
			// --upstream-allow-private.
			IdPClient:    egress.Policy{AllowLoopback: cfg.UpstreamAllowLoopback, AllowPrivate: cfg.UpstreamAllowPrivate}.Client(),
			DPoPNonces:   g.dpopNonces(cfg),
			HashPassword: users.HashPassword,
			Revoked: func(projectID int64, grantID string) {
				g.changes.Publish(changes.Change{Project: projectID, Kind: changes.KeyRevoked, Key: grantID})
			},
		})
	}
	g.tasks = tasks.New(tasks.Options{
		Store: st, Calls: g.calls, Grants: st, Gateway: g.me.ID, Questions: pipeline.TaskQuestions{}, Log: g.log,
		Settings: func(ctx context.Context, projectID int64) (store.ProjectSettings, error) {
			p, err := st.ProjectByID(ctx, projectID)
			return p.Settings, err
		},
		ProjectName: func(ctx context.Context, projectID int64) string {
			p, _ := st.ProjectByID(ctx, projectID)
			return p.Name
		},
		LiveGateways: g.liveGateways,
	})
	g.front = mcpfront.New(mcpfront.Options{
		Registry: g.reg, Changes: g.changes, Store: st, Verifier: g.verifier, CallLog: g.calls,
		Logger: g.log, Version: cfg.Version, TracerProvider: cfg.TracerProvider,
		SessionIdle: cfg.SessionIdle, KeepAlive: cfg.KeepAlive, ViewIdle: cfg.ViewIdle,
		MaxSessionsPerKey: cfg.MaxSessionsPerKey, MaxInFlightPerKey: cfg.MaxInFlightPerKey,
		HostsChecked:  true, // checkHost, with --allowed-hosts
		SessionPrefix: sessionPrefix, Limiter: g.limiter, OAuth: g.oauth, Tasks: g.tasks,
		Secrets:  g.box,      // requestState: any gateway of the key file opens it
		Identity: g.identity, // identity tokens for agent keys that ask (docs/identity.md)
		Upstream: g.upstream, // people's tokens for per-person bridged remotes
		Policy: mcpfront.PolicyOptions{ // interceptors dial as upstream remotes do
			// No overall timeout: each interceptor has its own, and
			// the session's event stream stays open.
			HTTPClient: &http.Client{Transport: egress.Policy{AllowLoopback: cfg.UpstreamAllowLoopback, AllowPrivate: cfg.UpstreamAllowPrivate}.Transport()},
			Observe:    g.obs.metrics,
		},
	})
	g.agents = agentfront.New(agentfront.Options{
		Registry: g.reg, Store: st, Verifier: g.verifier, Logger: g.log,
		Heartbeat: cfg.Heartbeat, Redeem: g.redeemElsewhere,
	})

	// Every path but the agent WebSocket (hijacked, with deadlines of its
	// own) gets per-step read and write deadlines.
	mux := http.NewServeMux()
	timed := http.NewServeMux()
	mux.Handle("/", withTimeouts(timed, cfg.BodyTimeout, cfg.WriteTimeout))
	timed.Handle(mcpfront.Path, g.forwardSessions(g.front))
	timed.HandleFunc("POST "+agentproto.RegisterPath, g.agents.Register)
	mux.HandleFunc("GET "+agentproto.ConnectPath, g.agents.Connect)
	timed.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	timed.HandleFunc("GET "+JWKSPath, g.serveJWKS)
	g.mountObs(mux) // untimed: a CPU profile runs as long as asked
	if g.oauth != nil {
		g.oauth.Mount(timed)
	}
	g.mountDashboard(timed)
	g.mux = recovery.HTTP(g.log, mux)
	g.srv = &http.Server{
		ReadHeaderTimeout: cfg.HeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ConnState:         connState, // an agent WebSocket leaves its address's count
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	return g, nil
}

// Addr returns the address the gateway listens on.
func (g *Gateway) Addr() string {
	if g.ln == nil {
		return g.cfg.Addr
	}
	return g.ln.Addr().String()
}

// URL returns the base URL clients and agents use.
func (g *Gateway) URL() string {
	if g.cfg.PublicURL != "" {
		return g.cfg.PublicURL
	}
	return "http://" + g.Addr()
}

// baseFor is the base URL a request reached the gateway at: the public
// URL, else the request's own scheme (https only by TLS or a trusted
// proxy's word: see edge) and (checked) host. OAuth's issuer and resource
// use it, so that a client that came by localhost is not told to ask for a
// token for 127.0.0.1.
func (g *Gateway) baseFor(r *http.Request) string {
	if g.cfg.PublicURL != "" {
		return strings.TrimRight(g.cfg.PublicURL, "/")
	}
	scheme := "http"
	if secureRequest(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// Registry returns the live registry (for the dashboard and tests).
func (g *Gateway) Registry() *agents.Registry { return g.reg }

// SettingsChanged publishes that a project's saved settings changed, as the
// dashboard and admin API do after every save, for whoever wrote to the
// store directly (tests); the next MCP request applies them.
func (g *Gateway) SettingsChanged(projectID int64) {
	g.changes.Publish(changes.Change{Project: projectID, Kind: changes.Settings})
}

// Changes returns the gateway's change path.
func (g *Gateway) Changes() *changes.Bus { return g.changes }

// Views returns how many client keys have an MCP view (a go-sdk server)
// now; views of revoked and idle keys are dropped (see Config.ViewIdle).
func (g *Gateway) Views() int { return g.front.ViewCount() }

// Sessions returns how many MCP sessions (protocol 2025) client key keyID
// has open.
func (g *Gateway) Sessions(keyID string) int { return g.front.SessionCount(keyID) }

// EarlyStats returns how many tool calls the cache answered, how many of
// those were answered before go-sdk parsed the request, and how many other
// tool calls were (for tests and benchmarks).
func (g *Gateway) EarlyStats() (hits, earlyHits, earlyCalls int64) { return g.front.EarlyStats() }

// CallLog returns the call log writer.
func (g *Gateway) CallLog() *store.CallLog { return g.calls }

// dpopNonces is the box DPoP nonces are sealed with: the secret key
// file's, when --oauth-dpop-nonce asks for nonces.
func (g *Gateway) dpopNonces(cfg Config) *secrets.Box {
	if !cfg.OAuthDPoPNonce {
		return nil
	}
	return g.box
}
