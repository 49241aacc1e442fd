// Package oauth makes the gateway an OAuth 2.1 authorization server and
// protected resource for MCP clients, as the MCP authorization spec
// (2025-11-25; 2026-07-28 the same where it touches us) asks:
//
//   - discovery: Protected Resource Metadata (RFC 9728) and Authorization
//     Server Metadata (RFC 8414, and the OpenID path clients also try);
//   - clients named by a Client ID Metadata Document (an HTTPS URL the
//     gateway fetches, guarded against server-side request forgery) or by
//     dynamic client registration (RFC 7591);
//   - the authorization code grant with PKCE (S256 only), state, iss, and
//     the resource indicator (RFC 8707) bound into every token;
//   - short-lived access tokens and rotating refresh tokens with reuse
//     detection, revocation (RFC 7009).
//
// The consent page is the dashboard's (it has the people and their
// sessions); it calls [Server.ParseAuthorize] and [Server.Approve]. Every
// code, grant and token lives in the store, hashed, so any gateway sharing
// the store continues a flow another started. A token acts on the MCP
// endpoint as a client key of its grant's id, so one policy serves keys and
// tokens: a token without mcp:write is a read-only key.
//
// The metadata types and the client-side flow in the tests are go-sdk's
// (oauthex, auth); the endpoints are ours, small and close to the RFCs.
package oauth

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
)

// Scopes. mcp:write implies mcp:read.
const (
	ScopeRead  = "mcp:read"
	ScopeWrite = "mcp:write"
	// ScopeAll is what a client gets when it asks for no scope of ours.
	ScopeAll = ScopeRead + " " + ScopeWrite
)

// Lifetimes.
const (
	CodeTTL    = time.Minute
	AccessTTL  = time.Hour
	RefreshTTL = 30 * 24 * time.Hour
)

// Paths of the endpoints. The metadata paths are fixed by the RFCs.
const (
	AuthorizePath      = "/oauth/authorize"
	TokenPath          = "/oauth/token"
	RegisterPath       = "/oauth/register"
	RevokePath         = "/oauth/revoke"
	ResourceMetaPath   = "/.well-known/oauth-protected-resource"
	ServerMetaPath     = "/.well-known/oauth-authorization-server"
	OpenIDMetaPath     = "/.well-known/openid-configuration"
	mcpPath            = "/mcp"
	maxFormBytes       = 64 << 10
	maxRegistrationLen = 16 << 10
)

// Secret prefixes say what a secret is at a glance and let secret scanners
// find leaked ones.
const (
	accessPrefix  = "sfx_oat_"
	refreshPrefix = "sfx_ort_"
	codePrefix    = "sfx_oac_"
	secretPrefix  = "sfx_ocs_"
)

// Requests per minute per client address, by endpoint.
const (
	registersPerAddr = 10
	registersInAll   = 120 // a minute, from every address together
	tokensPerAddr    = 60
	authorizePerAddr = 60
	metadataPerAddr  = 300
)

// Options configure a [Server].
type Options struct {
	// Store keeps clients, grants, codes and tokens, and the audit log
	// an app's revocation is written to. Required.
	Store Store
	// BaseURL returns the gateway's public base URL (no trailing slash)
	// as a client reached it: --public-url, else from the request. It is
	// the issuer, and BaseURL+"/mcp" the protected resource. Required.
	BaseURL func(r *http.Request) string
	// Logger receives operator logs; nil means slog.Default(). Secrets
	// never reach it.
	Logger *slog.Logger
	// AllowPrivateClientIDs lets Client ID Metadata Documents live on
	// loopback, private and link-local addresses, and on plain http for
	// loopback hosts: for development only, never on a gateway reachable
	// from outside.
	AllowPrivateClientIDs bool
	// ClientIDRoots verifies the TLS certificates of metadata document
	// hosts; nil means the system's roots.
	ClientIDRoots *x509.CertPool
	// Revoked is told when a grant is revoked, so the MCP endpoint drops
	// its views and sessions at once; nil: they end within a second.
	Revoked func(projectID int64, grantID string)
	// JWKSPath is where the gateway publishes the public keys of its
	// identity assertions (internal/identity); the metadata names
	// BaseURL+JWKSPath as jwks_uri. Empty: no jwks_uri.
	JWKSPath string
	// MaxClients caps the dynamically registered clients the store keeps;
	// past it, registration is refused until [Server.Prune] deletes unused
	// ones. 0 means [DefaultMaxClients].
	MaxClients int
	// IdPClient fetches the metadata and signing keys of trusted identity
	// providers; nil means http.DefaultClient. The gateway passes one
	// under the egress rules of its other outbound fetches.
	IdPClient *http.Client
	// DPoPNonces, when set, makes every DPoP proof carry a nonce the
	// gateway handed out (RFC 9449 section 8), sealed with this box so
	// that every gateway sharing its key checks it; nil: no nonces.
	DPoPNonces *secrets.Box
	// HashPassword hashes the password a person provisioned by an identity
	// provider is created with (a random one nobody knows), as the
	// dashboard's sign-in checks it: users.HashPassword. Nil: people are
	// not provisioned (the grant answers server_error).
	HashPassword func(password string) string
}

// DefaultMaxClients is [Options.MaxClients]'s default: far more than the
// apps people connect, and at most ~7 KB each, ~70 MB in all.
const DefaultMaxClients = 10000

// How long [Server.Prune] keeps registered clients nothing uses.
const (
	// ClientUnusedTTL: a client no person has approved goes a day after it
	// registered.
	ClientUnusedTTL = 24 * time.Hour
	// ClientRetention: a client whose grants are all revoked, or have no
	// token left, goes once none was created, used or revoked for this
	// long (as long as a refresh token lives).
	ClientRetention = RefreshTTL
)

// Store is the part of [store.Store] the authorization server uses.
type Store interface {
	store.OAuth
	store.IdPs
	store.UsedOnce
	AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error)
	// People and their projects, for the JWT bearer grant: found by an
	// identity provider's subject or e-mail, or provisioned.
	UserByID(ctx context.Context, id int64) (store.User, error)
	UserByEmail(ctx context.Context, email string) (store.User, string, error)
	CreateUser(ctx context.Context, u store.User, passwordHash string) (store.User, error)
	Member(ctx context.Context, projectID, userID int64) (store.Member, error)
	Memberships(ctx context.Context, userID int64) ([]store.Member, error)
	SetMember(ctx context.Context, m store.Member) (store.Member, error)
}

// Server is the authorization server. Mount its endpoints with [Server.Mount].
type Server struct {
	st      Store
	base    func(r *http.Request) string
	log     *slog.Logger
	revoked func(projectID int64, grantID string)
	limits  *ratelimit.Limiter
	docs    *docCache
	now     func() time.Time
	jwks    string       // Options.JWKSPath
	nonces  *secrets.Box // Options.DPoPNonces

	hashPassword func(string) string // Options.HashPassword
	idpKeys      *idpKeys

	maxClients int
	full       atomic.Bool // registration is refused for MaxClients; logged once until it is not

	mu      sync.Mutex
	checked map[string]checkedToken // by hex hash: access tokens verified lately
	touched map[string]time.Time    // grant id → when its last use was recorded
}

// New returns the server.
func New(opts Options) *Server {
	if opts.Store == nil || opts.BaseURL == nil {
		panic("oauth.New: Store and BaseURL are required")
	}
	s := &Server{
		st: opts.Store, base: opts.BaseURL, log: opts.Logger, revoked: opts.Revoked,
		limits: ratelimit.New(), now: time.Now, jwks: opts.JWKSPath, nonces: opts.DPoPNonces, hashPassword: opts.HashPassword, maxClients: cmp.Or(opts.MaxClients, DefaultMaxClients),
		checked: make(map[string]checkedToken), touched: make(map[string]time.Time),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.docs = newDocCache(opts.AllowPrivateClientIDs, opts.ClientIDRoots, s.log)
	s.idpKeys = newIdPKeys(cmp.Or(opts.IdPClient, http.DefaultClient), func() time.Time { return s.now() })
	return s
}

// Mount adds the metadata, registration, token and revocation endpoints
// to mux. The authorization endpoint is the dashboard's.
func (s *Server) Mount(mux *http.ServeMux) {
	prm := s.limited(metadataPerAddr, s.resourceMeta)
	mux.Handle("GET "+ResourceMetaPath, prm)
	mux.Handle("GET "+ResourceMetaPath+mcpPath, prm)
	asm := s.limited(metadataPerAddr, s.serverMeta)
	mux.Handle("GET "+ServerMetaPath, asm)
	mux.Handle("GET "+OpenIDMetaPath, asm)
	for _, p := range []string{ResourceMetaPath, ResourceMetaPath + mcpPath, ServerMetaPath, OpenIDMetaPath, TokenPath, RegisterPath, RevokePath} {
		mux.HandleFunc("OPTIONS "+p, preflight)
	}
	mux.Handle("POST "+RegisterPath, s.limited(registersPerAddr, s.register))
	mux.Handle("POST "+TokenPath, s.limited(tokensPerAddr, s.token))
	mux.Handle("POST "+RevokePath, s.limited(tokensPerAddr, s.revoke))
}

// Issuer returns the issuer identifier for a request: the base URL.
func (s *Server) Issuer(r *http.Request) string { return s.base(r) }

// Resource returns the canonical URL of the MCP endpoint for a request,
// which tokens are bound to.
func (s *Server) Resource(r *http.Request) string { return s.base(r) + mcpPath }

// ResourceMetadataURL returns where the protected resource metadata of the
// MCP endpoint is, for the WWW-Authenticate challenge.
func (s *Server) ResourceMetadataURL(r *http.Request) string {
	return s.base(r) + ResourceMetaPath + mcpPath
}

// Challenge is the WWW-Authenticate value of a 401 from the MCP endpoint.
func (s *Server) Challenge(r *http.Request) string {
	return fmt.Sprintf(`Bearer resource_metadata=%q, scope=%q`, s.ResourceMetadataURL(r), ScopeAll)
}

// InsufficientScope is the WWW-Authenticate value of a 403 for a call that
// needs mcp:write, so that a client can step up.
func (s *Server) InsufficientScope(r *http.Request) string {
	return fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q, resource_metadata=%q, error_description="This tool changes things; the token has only mcp:read. Sign in again and allow read and write."`,
		ScopeWrite, s.ResourceMetadataURL(r))
}

func (s *Server) resourceMeta(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, &oauthex.ProtectedResourceMetadata{
		Resource:               s.Resource(r),
		AuthorizationServers:   []string{s.Issuer(r)},
		ScopesSupported:        []string{ScopeRead, ScopeWrite},
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Spacefix MCP gateway",
	})
}

// serverMeta is RFC 8414's document. The go-sdk type has no field for
// every member we announce, so it is a map.
func (s *Server) serverMeta(w http.ResponseWriter, r *http.Request) {
	iss := s.Issuer(r)
	meta := map[string]any{
		"issuer":                                         iss,
		"authorization_endpoint":                         iss + AuthorizePath,
		"token_endpoint":                                 iss + TokenPath,
		"registration_endpoint":                          iss + RegisterPath,
		"revocation_endpoint":                            iss + RevokePath,
		"scopes_supported":                               []string{ScopeRead, ScopeWrite},
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token", GrantJWTBearer},
		"token_endpoint_auth_methods_supported":          authMethods,
		"revocation_endpoint_auth_methods_supported":     authMethods,
		"code_challenge_methods_supported":               []string{"S256"},
		"dpop_signing_alg_values_supported":              DPoPAlgs,
		"client_id_metadata_document_supported":          true,
		"authorization_response_iss_parameter_supported": true,
		"service_documentation":                          "https://github.com/spacefix/spacefix/blob/main/docs/oauth.md",
	}
	if s.jwks != "" {
		meta["jwks_uri"] = iss + s.jwks
	}
	writeJSON(w, http.StatusOK, meta)
}

var authMethods = []string{"none", "client_secret_basic", "client_secret_post"}

// limited counts requests per client address and answers 429 over n a
// minute, with OAuth's error shape.
func (s *Server) limited(n int, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cors(w)
		if ok, retry := s.limits.Allow(r.URL.Path+" "+clientAddr(r), n); !ok {
			w.Header().Set("Retry-After", fmt.Sprint(ratelimit.Seconds(retry)))
			writeJSON(w, http.StatusTooManyRequests, oauthError{"slow_down",
				fmt.Sprintf("Too many requests from this address. Try again in %d seconds.", ratelimit.Seconds(retry))})
			return
		}
		h(w, r)
	})
}

// cors lets browser-based MCP clients read the metadata and use the token
// endpoint: none of them relies on cookies, so any origin may.
func cors(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, MCP-Protocol-Version, DPoP")
	h.Set("Access-Control-Expose-Headers", "DPoP-Nonce, WWW-Authenticate")
}

func preflight(w http.ResponseWriter, _ *http.Request) {
	cors(w)
	w.WriteHeader(http.StatusNoContent)
}

// oauthError is the error body of RFC 6749 section 5.2 (and RFC 7591's).
type oauthError struct {
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func (e oauthError) Error() string { return e.Code + ": " + e.Description }

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// newSecret returns a fresh secret with prefix: 130 bits of randomness.
func newSecret(prefix string) string { return prefix + rand.Text() }

// newID returns a fresh public id with prefix.
func newID(prefix string) string { return prefix + strings.ToLower(rand.Text()[:16]) }

// hash is what the store keeps of a secret. Secrets are random, so a fast
// hash is safe.
func hash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// normalScope turns a requested scope into what may be granted: mcp:write
// brings mcp:read; other scopes are ignored (RFC 6749 lets a server grant
// less); none of ours means both.
func normalScope(requested string) string {
	fields := strings.Fields(requested)
	switch {
	case slices.Contains(fields, ScopeWrite):
		return ScopeAll
	case slices.Contains(fields, ScopeRead):
		return ScopeRead
	}
	return ScopeAll
}

// Writes reports whether a granted scope allows calls to tools that write.
func Writes(scope string) bool { return slices.Contains(strings.Fields(scope), ScopeWrite) }

// IsAccessToken reports whether a bearer token is one of ours (and not a
// client key).
func IsAccessToken(token string) bool { return strings.HasPrefix(token, accessPrefix) }

// revokeGrant revokes a grant, says so to the MCP endpoint and writes the
// project's audit log: the app disconnected itself, or the gateway did
// (a code or refresh token used twice, a newer sign-in of the same app).
func (s *Server) revokeGrant(r *http.Request, id, why string) {
	ctx := r.Context()
	g, err := s.st.OAuthGrant(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return
	}
	if err == nil {
		err = s.st.RevokeOAuthGrant(ctx, id)
	}
	if err != nil {
		s.log.Error("revoke OAuth grant", "grant", id, "err", err)
		return
	}
	s.log.Info("OAuth grant revoked", "grant", id, "project", g.ProjectName, "client", g.ClientName, "why", why)
	actor := "gateway"
	if why == "revoked by the app" {
		actor = "app " + g.ClientName
	}
	if _, err := s.st.AppendAudit(ctx, store.NewAuditEntry(g.ProjectID, actor, clientAddr(r), "app.revoke", g.ClientName,
		map[string]any{"id": id, "client": g.ClientName, "clientId": g.ClientID}, map[string]any{"id": id, "revoked": true, "why": why})); err != nil {
		s.log.Error("audit log: entry not saved", "action", "app.revoke", "grant", id, "why", why, "err", err)
	}
	s.Forget(id)
	if s.revoked != nil {
		s.revoked(g.ProjectID, id)
	}
}
