package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// An RFC 8693 authorization server for the token exchange tests (issue
// 28), built on zitadel/oidc's op package with its in-memory storage
// example as the model: the grant, the client authentication and the JWT
// signing are the library's; this file only says whom it trusts and what
// it issues. It stands for a company's identity provider that trusts the
// gateway's identity tokens:
//   - token exchange: a subject token of type
//     urn:ietf:params:oauth:token-type:jwt signed by the gateway (checked
//     against the gateway's JWKS: signature, iss = the gateway's public
//     URL, aud = the AS's issuer URL, exp) becomes a JWT access token for
//     the audience upstream-test, with the subject token's sub and email;
//   - client_credentials: the bridge's own token (sub = the client id),
//     for listing the remote's tools.
//
// Its one client authenticates with client_secret_basic. Everything is in
// memory and on loopback; it counts what it issued, per subject.

const (
	exchangeClientID = "spacefix-bridge"
	upstreamAudience = "upstream-test"
	exchangeLifetime = 5 * time.Minute
)

type exchangeAS struct {
	t      *testing.T
	srv    *httptest.Server
	issuer string // also the audience it expects in subject tokens
	secret string // the client's secret

	gateway string // the gateway's public URL: the subject tokens' iss
	jwksURL string // where the gateway's keys are
	key     *ecdsa.PrivateKey
	keyID   string

	mu        sync.Mutex
	lifetime  time.Duration      // of the access tokens it issues
	gwKeys    jose.JSONWebKeySet // the gateway's JWKS, fetched on an unknown kid
	exchanged map[string]int     // subject → token exchanges granted
	refused   int                // token exchanges refused: subject token, audience or type
	clientCC  int                // client_credentials tokens issued
}

// newExchangeAS starts an AS that trusts the identity tokens of the gateway
// at gatewayURL (its public URL: the tokens' iss).
func newExchangeAS(t *testing.T, gatewayURL string) *exchangeAS {
	return newExchangeASFor(t, gatewayURL, gatewayURL)
}

// newExchangeASFor starts an AS that trusts identity tokens issued by
// issuer (a gateway's public URL), with the JWKS of the gateway at base.
func newExchangeASFor(t *testing.T, issuer, base string) *exchangeAS {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	a := &exchangeAS{t: t, gateway: issuer, jwksURL: base + "/.well-known/jwks.json", key: key, keyID: "as-key-1",
		secret: rand.Text() + "+/:=%", exchanged: map[string]int{}, lifetime: exchangeLifetime} // characters client_secret_basic must form-encode
	var handler http.Handler = http.NotFoundHandler()
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	a.issuer = "http://" + a.srv.Listener.Addr().String()
	cfg := &op.Config{SupportedScopes: []string{"mcp"}}
	rand.Read(cfg.CryptoKey[:]) // for opaque tokens, which this AS does not issue
	provider, err := op.NewProvider(cfg, &asStorage{as: a}, op.StaticIssuer(a.issuer), op.WithAllowInsecure())
	must(t, err)
	handler = provider
	a.srv.Start()
	t.Cleanup(a.srv.Close)
	return a
}

// setLifetime sets the life of the access tokens issued from now on.
func (a *exchangeAS) setLifetime(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lifetime = d
}

// tokenEndpoint is where the bridge exchanges: the op package's default path.
func (a *exchangeAS) tokenEndpoint() string { return a.issuer + "/oauth/token" }

// exchanges is how many token exchanges the AS granted for subject.
func (a *exchangeAS) exchanges(subject string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.exchanged[subject]
}

// totalExchanges is how many token exchanges the AS granted, for anyone.
func (a *exchangeAS) totalExchanges() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.exchanged {
		n += c
	}
	return n
}

// clientCredentials is how many client_credentials tokens the AS issued.
func (a *exchangeAS) clientCredentials() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.clientCC
}

// refusals is how many token exchanges the AS refused (a bad subject
// token, audience or token type).
func (a *exchangeAS) refusals() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refused
}

// verifySubject checks a gateway identity token as the AS's trust
// configuration says, and returns its claims.
func (a *exchangeAS) verifySubject(ctx context.Context, token string) (jwt.Claims, map[string]any, error) {
	var std jwt.Claims
	claims := map[string]any{}
	parsed, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(parsed.Headers) != 1 {
		return std, nil, fmt.Errorf("not a compact ES256 JWS: %v", err)
	}
	keys, err := a.gatewayKeys(ctx, parsed.Headers[0].KeyID)
	if err != nil {
		return std, nil, err
	}
	if err := parsed.Claims(keys, &std, &claims); err != nil {
		return std, nil, err
	}
	err = std.Validate(jwt.Expected{Issuer: a.gateway, AnyAudience: jwt.Audience{a.issuer}, Time: time.Now()})
	return std, claims, err
}

// gatewayKeys returns the gateway's JWKS, fetched again when it lacks kid.
func (a *exchangeAS) gatewayKeys(ctx context.Context, kid string) (jose.JSONWebKeySet, error) {
	a.mu.Lock()
	keys := a.gwKeys
	a.mu.Unlock()
	if len(keys.Key(kid)) > 0 {
		return keys, nil
	}
	req, err := http.NewRequestWithContext(ctx, "GET", a.jwksURL, nil)
	if err != nil {
		return keys, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return keys, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return keys, fmt.Errorf("the gateway's JWKS: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&keys); err != nil {
		return keys, err
	}
	a.mu.Lock()
	a.gwKeys = keys
	a.mu.Unlock()
	return keys, nil
}

// asStorage is the op.Storage of exchangeAS. The embedded op.Storage is
// nil: the authorization code, refresh, user info and introspection parts
// of the interface are never reached with this AS's one client (its grant
// types are token exchange and client_credentials only), and would panic.
type asStorage struct {
	op.Storage
	as *exchangeAS
}

var _ interface {
	op.Storage
	op.ClientCredentialsStorage
	op.TokenExchangeStorage
	op.TokenExchangeTokensVerifierStorage
} = (*asStorage)(nil)

var errNoClient = errors.New("unknown client or wrong secret")

func (s *asStorage) Health(context.Context) error { return nil }

// The client.

func (s *asStorage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	if id != exchangeClientID {
		return nil, errNoClient
	}
	return asClient{}, nil
}

func (s *asStorage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if id != exchangeClientID || subtle.ConstantTimeCompare([]byte(secret), []byte(s.as.secret)) != 1 {
		return errNoClient
	}
	return nil
}

func (s *asStorage) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	if err := s.AuthorizeClientIDSecret(ctx, id, secret); err != nil {
		return nil, err
	}
	return asClient{}, nil
}

// ccRequest is a client_credentials token request: the client acts as itself.
type ccRequest struct {
	clientID string
	scopes   []string
}

func (r ccRequest) GetSubject() string    { return r.clientID }
func (r ccRequest) GetAudience() []string { return []string{upstreamAudience} }
func (r ccRequest) GetScopes() []string   { return r.scopes }

func (s *asStorage) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	return ccRequest{clientID: id, scopes: scopes}, nil
}

// Token exchange.

func (s *asStorage) VerifyExchangeSubjectToken(ctx context.Context, token string, tokenType oidc.TokenType) (string, string, map[string]any, error) {
	if tokenType != oidc.JWTTokenType {
		return "", "", nil, fmt.Errorf("subject_token_type %s: this AS exchanges only %s", tokenType, oidc.JWTTokenType)
	}
	std, claims, err := s.as.verifySubject(ctx, token)
	if err != nil {
		s.as.t.Logf("exchange AS: subject token refused: %v", err) // the error, never the token
		s.as.mu.Lock()
		s.as.refused++
		s.as.mu.Unlock()
		return "", "", nil, err
	}
	return std.ID, std.Subject, claims, nil
}

func (s *asStorage) VerifyExchangeActorToken(context.Context, string, oidc.TokenType) (string, string, map[string]any, error) {
	return "", "", nil, errors.New("this AS takes no actor tokens")
}

func (s *asStorage) ValidateTokenExchangeRequest(_ context.Context, r op.TokenExchangeRequest) error {
	if r.GetRequestedTokenType() == "" {
		r.SetRequestedTokenType(oidc.AccessTokenType)
	}
	var err error
	switch {
	case r.GetRequestedTokenType() != oidc.AccessTokenType:
		err = oidc.ErrInvalidRequest().WithDescription("requested_token_type: only access tokens")
	case !slices.Equal(r.GetAudience(), []string{upstreamAudience}):
		err = oidc.ErrInvalidTarget().WithDescription("audience %q: this AS issues only for %s", r.GetAudience(), upstreamAudience)
	}
	if err != nil {
		s.as.mu.Lock()
		s.as.refused++
		s.as.mu.Unlock()
	}
	return err
}

func (s *asStorage) CreateTokenExchangeRequest(context.Context, op.TokenExchangeRequest) error {
	return nil
}

// GetPrivateClaimsFromTokenExchangeRequest carries the person's email
// into the upstream token.
func (s *asStorage) GetPrivateClaimsFromTokenExchangeRequest(_ context.Context, r op.TokenExchangeRequest) (map[string]any, error) {
	if email, ok := r.GetExchangeSubjectTokenClaims()["email"].(string); ok {
		return map[string]any{"email": email}, nil
	}
	return nil, nil
}

func (s *asStorage) SetUserinfoFromTokenExchangeRequest(context.Context, *oidc.UserInfo, op.TokenExchangeRequest) error {
	return nil
}

func (s *asStorage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

// CreateAccessToken gives each access token (a JWT the op package signs)
// its id and expiry, and counts it.
func (s *asStorage) CreateAccessToken(_ context.Context, r op.TokenRequest) (string, time.Time, error) {
	s.as.mu.Lock()
	defer s.as.mu.Unlock()
	switch r.(type) {
	case op.TokenExchangeRequest:
		s.as.exchanged[r.GetSubject()]++
	case ccRequest:
		s.as.clientCC++
	default:
		return "", time.Time{}, fmt.Errorf("token request %T: not issued here", r)
	}
	return rand.Text(), time.Now().Add(s.as.lifetime), nil
}

// Keys.

type asKey struct{ as *exchangeAS }

func (k asKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.ES256 }
func (k asKey) Algorithm() jose.SignatureAlgorithm          { return jose.ES256 }
func (k asKey) ID() string                                  { return k.as.keyID }
func (k asKey) Use() string                                 { return "sig" }

// Key is the private key, to sign with; asPublicKey's is what the JWKS shows.
func (k asKey) Key() any { return k.as.key }

type asPublicKey struct{ asKey }

func (k asPublicKey) Key() any { return &k.as.key.PublicKey }

func (s *asStorage) SigningKey(context.Context) (op.SigningKey, error) { return asKey{s.as}, nil }
func (s *asStorage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{asPublicKey{asKey{s.as}}}, nil
}
func (s *asStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.ES256}, nil
}

// asClient is the bridge, a confidential client that may only exchange
// tokens and use its own credentials, and gets JWT access tokens.
type asClient struct{}

func (asClient) GetID() string                       { return exchangeClientID }
func (asClient) RedirectURIs() []string              { return nil }
func (asClient) PostLogoutRedirectURIs() []string    { return nil }
func (asClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (asClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (asClient) ResponseTypes() []oidc.ResponseType  { return nil }
func (asClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeTokenExchange, oidc.GrantTypeClientCredentials}
}
func (asClient) LoginURL(string) string              { return "" }
func (asClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (asClient) IDTokenLifetime() time.Duration      { return time.Minute }
func (asClient) DevMode() bool                       { return false }
func (asClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (asClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (asClient) IsScopeAllowed(string) bool           { return false }
func (asClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (asClient) ClockSkew() time.Duration             { return 0 }

// exchangeRemote is "the remote": an MCP server we do not own (go-sdk),
// which accepts only JWT access tokens of exchangeAS for the audience
// upstream-test, verified with the AS's published keys. Its whoami tool
// answers the token's email, or its sub when it has none (the bridge's own
// client_credentials token). It can be told to refuse the token it last
// saw for a subject, as a resource server does after a revocation: that
// token answers 401 from then on.
type exchangeRemote struct {
	srv *httptest.Server
	as  *exchangeAS

	mu       sync.Mutex
	keys     jose.JSONWebKeySet
	last     map[string]string // subject → id of the token it last accepted
	refused  map[string]bool   // token ids that answer 401
	shunned  map[string]bool   // subjects all of whose tokens answer 401
	unauth   int               // 401s answered for a refused token
	whoCalls map[string]int    // subject → whoami calls served
	tokens   []string          // every access token it accepted, to search logs for
}

// remoteClaims is what the remote reads of an access token.
type remoteClaims struct {
	jwt.Claims
	Email string `json:"email"`
}

func newExchangeRemote(t *testing.T, as *exchangeAS) *exchangeRemote {
	t.Helper()
	r := &exchangeRemote{as: as, last: map[string]string{}, refused: map[string]bool{}, shunned: map[string]bool{}, whoCalls: map[string]int{}}
	mux := http.NewServeMux()
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	server := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "Say whom the access token speaks for."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			ti := req.Extra.TokenInfo
			who, _ := ti.Extra["email"].(string)
			if who == "" {
				who = ti.UserID
			}
			r.mu.Lock()
			r.whoCalls[ti.UserID]++
			r.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: who}}}, nil, nil
		})
	t.Cleanup(func() {
		for ss := range server.Sessions() {
			ss.Close()
		}
	})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	mux.Handle("/mcp", auth.RequireBearerToken(r.verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: r.srv.URL + "/.well-known/oauth-protected-resource/mcp"})(handler))
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: r.srv.URL + "/mcp", AuthorizationServers: []string{as.issuer}, ScopesSupported: []string{"mcp"}}))
	return r
}

// url is the remote's MCP endpoint.
func (r *exchangeRemote) url() string { return r.srv.URL + "/mcp" }

// verify is the remote's bearer token check: an ES256 JWT of the AS, for
// upstream-test, not expired, not refused.
func (r *exchangeRemote) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	parsed, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(parsed.Headers) != 1 {
		return nil, auth.ErrInvalidToken
	}
	keys, err := r.asKeys(ctx, parsed.Headers[0].KeyID)
	if err != nil {
		return nil, err
	}
	var c remoteClaims
	if err := parsed.Claims(keys, &c); err != nil {
		return nil, auth.ErrInvalidToken
	}
	if err := c.Validate(jwt.Expected{Issuer: r.as.issuer, AnyAudience: jwt.Audience{upstreamAudience}, Time: time.Now()}); err != nil {
		return nil, auth.ErrInvalidToken
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refused[c.ID] || r.shunned[c.Subject] {
		r.unauth++
		return nil, auth.ErrInvalidToken
	}
	r.last[c.Subject] = c.ID
	if !slices.Contains(r.tokens, token) {
		r.tokens = append(r.tokens, token)
	}
	info := &auth.TokenInfo{UserID: c.Subject, Expiration: c.Expiry.Time(), Extra: map[string]any{}}
	if c.Email != "" {
		info.Extra["email"] = c.Email
	}
	return info, nil
}

// asKeys returns the AS's JWKS (its discovery document's jwks_uri),
// fetched again when it lacks kid.
func (r *exchangeRemote) asKeys(ctx context.Context, kid string) (jose.JSONWebKeySet, error) {
	r.mu.Lock()
	keys := r.keys
	r.mu.Unlock()
	if len(keys.Key(kid)) > 0 {
		return keys, nil
	}
	var disc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := getJSON(ctx, r.as.issuer+"/.well-known/openid-configuration", &disc); err != nil {
		return keys, err
	}
	if err := getJSON(ctx, disc.JWKSURI, &keys); err != nil {
		return keys, err
	}
	r.mu.Lock()
	r.keys = keys
	r.mu.Unlock()
	return keys, nil
}

func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// refuseCurrent makes the token the remote last accepted for subject
// answer 401 from now on, and returns false when it has seen none.
func (r *exchangeRemote) refuseCurrent(subject string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.last[subject]
	if ok {
		r.refused[id] = true
	}
	return ok
}

// whoamiCalls is how many whoami calls the remote served, for anyone.
func (r *exchangeRemote) whoamiCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.whoCalls {
		n += c
	}
	return n
}

// shun makes every token for subject answer 401 while on is true, as
// for a person the remote has locked out.
func (r *exchangeRemote) shun(subject string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shunned[subject] = on
}

// accepted is every access token the remote accepted.
func (r *exchangeRemote) accepted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.tokens)
}

// unauthorized is how many requests the remote answered 401 for a
// refused token (or a shunned subject's).
func (r *exchangeRemote) unauthorized() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unauth
}
