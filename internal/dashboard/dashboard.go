// Package dashboard is the gateway's management face: server-rendered pages
// (html/template, a little hand-written JS, all embedded) and the JSON admin
// API under /api that the pages' scripts and the CLI use.
//
// Pages read live state from the agents registry and saved state from the
// store. Every write goes through the admin API, and every write that
// changes what MCP clients see publishes a [changes.Settings] (or
// [changes.KeyRevoked]) change on the gateway's change path, so the MCP
// endpoint applies it on the next request.
//
// Sign-in: people have passwords (argon2id) and cookie sessions; scripts
// and the CLI send an admin API token as a Bearer token. Every unsafe
// request passes Go's [http.CrossOriginProtection], which is the CSRF
// defence for cookie sessions.
package dashboard

import (
	"context"
	"embed"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/interceptors"
	"github.com/spacefix/spacefix/internal/oauth"
	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/upstream"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Store is the part of [store.Store] the dashboard and its API read and
// change: all that people manage, not the gateway's own bookkeeping
// (gateways, meta values, the store check, the call log writer).
type Store interface {
	store.Projects
	store.Keys
	store.Calls
	store.Tools
	store.Users
	store.Sessions
	store.Invites
	store.APITokens
	store.Members
	store.Audit
	store.OAuth
	store.IdPs
	store.Policies
	// A project's running tasks, read for the Tasks page; Options.Tasks
	// cancels them.
	RunningTasks(ctx context.Context, projectID int64, limit int) ([]store.Task, error)
	Task(ctx context.Context, id string) (store.Task, error)
}

// Options configure a [Dashboard].
type Options struct {
	// Store holds projects, keys, settings, users and the call log.
	// Required.
	Store Store
	// Registry is the live registry of connected agents. Required.
	Registry *agents.Registry
	// Changes carries every saved change that alters what a project's MCP
	// clients see (tool settings, project settings, approvals, keys, agent
	// key metadata); nil means nobody hears of them.
	Changes *changes.Bus
	// BaseURL returns the URL clients reach the gateway at, for the MCP
	// URL and set-up snippets; nil means http://<the request's Host>.
	BaseURL func() string
	// Context ends long-lived responses (the live log tail) when the
	// gateway shuts down; nil means they end only with their request.
	Context context.Context
	// Logger receives operator logs; nil means slog.Default(). Secrets are
	// never logged.
	Logger *slog.Logger
	// Version is shown in the footer.
	Version string
	// CallLogHealth says how many call records the gateway lost; the
	// Overview, Logs and Usage pages warn while any were. Nil means they
	// never warn.
	CallLogHealth func() store.Health
	// OAuth is the gateway's authorization server, whose consent page and
	// connected apps the dashboard shows; nil when OAuth is off.
	OAuth *oauth.Server
	// Tasks cancels a running MCP task from the Tasks page; nil means the
	// page lists tasks but cannot cancel them.
	Tasks Tasks
	// AuditRetention is how long the audit log keeps entries (the gateway
	// prunes older ones); shown on the Audit page. 0 means forever.
	AuditRetention time.Duration
	// Identity is the signer of per-call identity assertions, whose key an
	// instance admin may rotate on the Users and tokens page; nil hides it.
	Identity IdentityKeys
	// Upstream keeps people's accounts at per-person bridged remotes
	// (*upstream.Service): the connect pages, the Connected accounts lists
	// and their API. Nil turns them off.
	Upstream Upstream
	// Interceptors says what this gateway found at the interceptor
	// servers of a project's policy, and the policy version they are of
	// (mcpfront.Front.InterceptorStatus): the Policy page, its API and
	// the CLI show it. Nil: they show each server as not listed yet.
	Interceptors func(ctx context.Context, projectID int64) (version int64, servers []interceptors.ServerStatus)
}

// Dashboard serves the pages and the admin API. It is an http.Handler
// meant for the root of the gateway's mux.
type Dashboard struct {
	st        Store
	reg       *agents.Registry
	changes   *changes.Bus
	baseURL   func() string
	ctx       context.Context
	log       *slog.Logger
	version   string
	health    func() store.Health
	oauth     *oauth.Server // nil when OAuth is off
	retention time.Duration
	tasks     Tasks        // nil: tasks cannot be cancelled here
	identity  IdentityKeys // nil: no identity key to show or rotate
	upstream  Upstream     // nil: no upstream accounts
	// interceptors is Options.Interceptors; nil: none listed.
	interceptors func(ctx context.Context, projectID int64) (int64, []interceptors.ServerStatus)

	pages   map[string]*pageTemplate
	signIns *ratelimit.Limiter
	handler http.Handler
}

// New returns the dashboard. It panics if a required option is missing.
func New(opts Options) *Dashboard {
	if opts.Store == nil || opts.Registry == nil {
		panic("dashboard.New: Store and Registry are required")
	}
	if s, ok := opts.Upstream.(*upstream.Service); ok && s == nil {
		opts.Upstream = nil // a nil service is none, not one to call
	}
	d := &Dashboard{
		st: opts.Store, reg: opts.Registry, changes: opts.Changes, baseURL: opts.BaseURL,
		ctx: opts.Context, log: opts.Logger, version: opts.Version, signIns: ratelimit.New(),
		health: opts.CallLogHealth, oauth: opts.OAuth, retention: opts.AuditRetention, tasks: opts.Tasks,
		identity: opts.Identity, upstream: opts.Upstream, interceptors: opts.Interceptors,
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	if d.ctx == nil {
		d.ctx = context.Background()
	}
	d.pages = parsePages()
	mux := http.NewServeMux()
	d.routes(mux)
	d.handler = http.NewCrossOriginProtection().Handler(securityHeaders(mux))
	return d
}

// ServeHTTP serves the dashboard and the admin API.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) { d.handler.ServeHTTP(w, r) }

func (d *Dashboard) routes(mux *http.ServeMux) {
	static, _ := fs.Sub(assets, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", cacheStatic(http.FileServerFS(static))))
	mux.HandleFunc("GET /favicon.ico", favicon) // browsers ask for it on every page

	// Sign-in, sign-up and sign-out.
	mux.HandleFunc("GET /login", d.loginPage)
	mux.HandleFunc("POST /login", d.login)
	mux.HandleFunc("POST /logout", d.logout)
	mux.HandleFunc("GET /setup/{secret}", d.joinPage)
	mux.HandleFunc("POST /setup/{secret}", d.join)
	mux.HandleFunc("GET /join/{secret}", d.joinPage)
	mux.HandleFunc("POST /join/{secret}", d.join)
	mux.HandleFunc("POST /join/{secret}/accept", d.acceptInvite)

	// OAuth consent: the authorization endpoint (internal/oauth does the rest).
	mux.HandleFunc("GET "+oauth.AuthorizePath, d.consentPage)
	mux.HandleFunc("POST "+oauth.AuthorizePath, d.consent)

	// Connecting a person's account at a per-person bridged remote.
	mux.HandleFunc("GET /connect/{agentKey}", d.connectUpstream)
	mux.HandleFunc("GET /upstream/callback", d.upstreamCallback)

	// Pages.
	mux.Handle("GET /{$}", d.page(d.projectsPage, signedIn))
	mux.Handle("GET /me", d.page(d.mePage, signedIn))
	mux.Handle("GET /admin", d.page(d.adminPage, instanceAdmin))
	mux.Handle("GET /p/{project}", d.page(d.overviewPage, viewer))
	mux.Handle("GET /p/{project}/tools", d.page(d.toolsPage, viewer))
	mux.Handle("GET /p/{project}/agents", d.page(d.agentsPage, viewer))
	mux.Handle("GET /p/{project}/agents/{id}", d.page(d.agentPage, viewer))
	mux.Handle("GET /p/{project}/keys", d.page(d.keysPage, viewer))
	mux.Handle("GET /p/{project}/logs", d.page(d.logsPage, viewer))
	mux.Handle("GET /p/{project}/tasks", d.page(d.tasksPage, viewer))
	mux.Handle("GET /p/{project}/usage", d.page(d.usagePage, viewer))
	mux.Handle("GET /p/{project}/settings", d.page(d.settingsPage, viewer))
	mux.Handle("GET /p/{project}/policy", d.page(d.policyPage, viewer))
	mux.Handle("GET /p/{project}/members", d.page(d.membersPage, viewer))
	mux.Handle("GET /p/{project}/audit", d.page(d.auditPage, viewer))

	d.apiMux(mux)
}

// notify publishes that a project's saved state changed.
func (d *Dashboard) notify(projectID int64) {
	d.changes.Publish(changes.Change{Project: projectID, Kind: changes.Settings})
}

// base returns the base URL clients use.
func (d *Dashboard) base(r *http.Request) string {
	if d.baseURL != nil {
		if u := d.baseURL(); u != "" {
			return u
		}
	}
	scheme := "http"
	if secureRequest(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// securityHeaders keeps pages out of frames and scripts to our own origin.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
		next.ServeHTTP(w, r)
	})
}

// favicon serves the dashboard's icon, embedded like the rest.
func favicon(w http.ResponseWriter, r *http.Request) {
	b, err := assets.ReadFile("static/favicon.ico")
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "image/x-icon")
	w.Header().Set("Cache-Control", "public, max-age=86400")
	w.Write(b)
}

func cacheStatic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		next.ServeHTTP(w, r)
	})
}
