// Package oauthclient is the client side of the MCP authorization spec, as
// both `spacefix bridge login` and the gateway's per-person upstream
// accounts (internal/upstream) run it: find a remote MCP server's
// authorization server (from its 401's WWW-Authenticate resource_metadata,
// or its protected resource metadata at the well-known paths), read that
// server's metadata (RFC 8414, through go-sdk's oauthex), register a
// client (a Client ID Metadata Document when the server takes one and a
// client id URL is given, else dynamic registration, RFC 7591), build the
// authorization URL with PKCE S256 and the resource indicator (RFC 8707),
// check the response's iss (RFC 9207), and exchange a code or refresh a
// token with golang.org/x/oauth2.
//
// Errors meant for people say which host refused and the OAuth error code,
// never a token and never a response body: see [Refused].
package oauthclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// Server is what discovery found about a remote MCP server's
// authorization server.
type Server struct {
	// Resource is the protected resource, the remote MCP URL as its
	// metadata names it: the RFC 8707 resource of authorization requests
	// and code exchanges.
	Resource string
	// Issuer, AuthURL, TokenURL and RegistrationURL are the authorization
	// server's; RegistrationURL is empty when it takes no dynamic
	// registration.
	Issuer, AuthURL, TokenURL, RegistrationURL string
	// Scopes are the scopes to ask for: the 401's scope, else the
	// resource's scopes_supported, with offline_access added when the
	// authorization server supports it (refresh tokens wanted).
	Scopes []string
	// CIMD says the authorization server takes a Client ID Metadata
	// Document's URL as a client id.
	CIMD bool
	// IssParameter says the authorization server sends iss in its
	// authorization responses (RFC 9207); [Server.CheckIssuer] then needs it.
	IssParameter bool
}

// Host is the remote's host, for messages.
func (s *Server) Host() string { return Host(s.Resource) }

// Host returns the host of rawURL (rawURL itself when it does not parse),
// for messages: never a path, query or userinfo.
func Host(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "the remote server"
	}
	return u.Host
}

// Refused is an error a person may see: the authorization server of Host
// refused (Code: the OAuth error code, or "HTTP <status>"), or could not
// be reached (Code empty; then the transport's reason follows). It never
// holds a token or a response body.
type Refused struct {
	Host string
	// Code is the OAuth error ("invalid_grant", …), "HTTP 503" when the
	// answer had none, or empty when the server was not reached.
	Code string
	// Err is the cause, kept for errors.Is/As; never shown by Error.
	Err error
}

func (e *Refused) Error() string {
	if e.Code == "" {
		if e.Err != nil {
			// A transport error or a discovery check: addresses and
			// reasons, never a body.
			return "could not reach the authorization server of " + e.Host + ": " + unwrapURL(e.Err).Error()
		}
		return "could not reach the authorization server of " + e.Host
	}
	return "the authorization server of " + e.Host + " refused: " + e.Code
}

func (e *Refused) Unwrap() error { return e.Err }

// InvalidGrant reports whether err says the authorization server refused
// a grant (a refresh token or code no longer good): the person must
// authorize again.
func InvalidGrant(err error) bool {
	var r *Refused
	return errors.As(err, &r) && r.Code == "invalid_grant"
}

// InvalidClient reports whether err is the authorization server's
// invalid_client: it no longer knows the client (or its secret).
func InvalidClient(err error) bool {
	var r *Refused
	return errors.As(err, &r) && r.Code == "invalid_client"
}

// refused turns an error of golang.org/x/oauth2 or of a request into a
// [Refused] for host.
func refused(host string, err error) error {
	if err == nil {
		return nil
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		code := re.ErrorCode
		if code == "" && re.Response != nil {
			code = fmt.Sprintf("HTTP %d", re.Response.StatusCode)
		}
		if code == "" {
			code = "an unreadable answer"
		}
		return &Refused{Host: host, Code: code, Err: errors.New(code)}
	}
	var rr *Refused
	if errors.As(err, &rr) {
		return err
	}
	var ce *oauthex.ClientRegistrationError
	if errors.As(err, &ce) {
		return &Refused{Host: host, Code: ce.ErrorCode, Err: errors.New(ce.ErrorCode)}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &Refused{Host: host, Err: err}
}

// Probe asks the remote MCP server at resourceURL, without a token, to
// initialize (as an MCP client's first request), and returns the
// WWW-Authenticate values of its answer when it is a 401; unauthorized is
// false when the server did not ask for authorization.
func Probe(ctx context.Context, hc *http.Client, resourceURL string) (challenges []string, unauthorized bool, err error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"spacefix","version":"1"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, resourceURL, bytes.NewReader([]byte(body)))
	if err != nil {
		return nil, false, fmt.Errorf("the remote URL %s: %w", Host(resourceURL), err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := client(hc).Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		return nil, false, fmt.Errorf("could not reach %s: %w", Host(resourceURL), unwrapURL(err))
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return nil, false, nil
	}
	return resp.Header.Values("WWW-Authenticate"), true, nil
}

// unwrapURL drops the *url.Error wrapper (which names the whole URL) and
// keeps its cause.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func client(hc *http.Client) *http.Client {
	if hc == nil {
		return http.DefaultClient
	}
	return hc
}

// DiscoverOptions tune [Discover].
type DiscoverOptions struct {
	// RefreshTokens asks for offline_access when the authorization server
	// supports it.
	RefreshTokens bool
	// ScopeFilter, when set, picks the scopes to ask for from the ones
	// discovered (before offline_access is added).
	ScopeFilter func([]string) []string
}

// Discover finds the authorization server of the MCP server at
// resourceURL. challenges are the WWW-Authenticate values of its 401 (nil
// when there was none at hand; then only the well-known paths are asked).
// As the MCP spec says: the protected resource metadata named by the
// challenge, else at the well-known path of the MCP endpoint, else at the
// root; without any, the server's origin is its authorization server
// (2025-03-26). The authorization server's metadata comes from its
// well-known paths; without any, its /authorize, /token and /register.
func Discover(ctx context.Context, hc *http.Client, resourceURL string, challenges []string, o DiscoverOptions) (*Server, error) {
	host := Host(resourceURL)
	cs, err := oauthex.ParseWWWAuthenticate(challenges)
	if err != nil {
		return nil, fmt.Errorf("%s answered with a WWW-Authenticate header that does not parse", host)
	}
	prm, err := resourceMetadata(ctx, hc, cs, resourceURL)
	if err != nil {
		return nil, err
	}
	issuer := prm.AuthorizationServers[0]
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, hc)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Refused{Host: Host(issuer), Code: "", Err: err}
	}
	if asm == nil {
		asm = &oauthex.AuthServerMeta{Issuer: issuer, AuthorizationEndpoint: issuer + "/authorize",
			TokenEndpoint: issuer + "/token", RegistrationEndpoint: issuer + "/register"}
	}
	s := &Server{
		Resource: prm.Resource, Issuer: asm.Issuer, AuthURL: asm.AuthorizationEndpoint, TokenURL: asm.TokenEndpoint,
		RegistrationURL: asm.RegistrationEndpoint, CIMD: asm.ClientIDMetadataDocumentSupported,
		IssParameter: asm.AuthorizationResponseIssParameterSupported,
	}
	s.Scopes = challengeScopes(cs)
	if len(s.Scopes) == 0 {
		s.Scopes = slices.Clone(prm.ScopesSupported)
	}
	if o.ScopeFilter != nil {
		s.Scopes = o.ScopeFilter(s.Scopes)
	}
	if o.RefreshTokens && slices.Contains(asm.ScopesSupported, "offline_access") && !slices.Contains(s.Scopes, "offline_access") {
		s.Scopes = append(s.Scopes, "offline_access")
	}
	return s, nil
}

// resourceMetadata finds the protected resource metadata, or makes up the
// 2025-03-26 one (the origin is the authorization server).
func resourceMetadata(ctx context.Context, hc *http.Client, cs []oauthex.Challenge, resourceURL string) (*oauthex.ProtectedResourceMetadata, error) {
	ru, err := url.Parse(resourceURL)
	if err != nil || ru.Host == "" {
		return nil, fmt.Errorf("the remote URL does not parse")
	}
	type try struct{ url, resource string }
	var tries []try
	for _, c := range cs {
		if u := c.Params["resource_metadata"]; u != "" {
			tries = append(tries, try{u, resourceURL})
			break
		}
	}
	mu := *ru
	mu.RawQuery, mu.Fragment = "", ""
	mu.Path, mu.RawPath = "/.well-known/oauth-protected-resource/"+strings.TrimLeft(ru.Path, "/"), ""
	tries = append(tries, try{mu.String(), resourceURL})
	root := url.URL{Scheme: ru.Scheme, Host: ru.Host}
	mu.Path = "/.well-known/oauth-protected-resource"
	tries = append(tries, try{mu.String(), root.String()})
	for _, t := range tries {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, t.url, t.resource, hc)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil || prm == nil {
			continue
		}
		if len(prm.AuthorizationServers) == 0 {
			return nil, fmt.Errorf("the protected resource metadata of %s names no authorization server", ru.Host)
		}
		return prm, nil
	}
	return &oauthex.ProtectedResourceMetadata{Resource: resourceURL, AuthorizationServers: []string{root.String()}}, nil
}

func challengeScopes(cs []oauthex.Challenge) []string {
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params["scope"] != "" {
			return strings.Fields(c.Params["scope"])
		}
	}
	return nil
}

// CheckIssuer checks the iss of an authorization response (RFC 9207):
// required and equal to the issuer when the authorization server says it
// sends one; when it does not, an iss that is there must still be equal.
func (s *Server) CheckIssuer(iss string) error {
	if iss == "" {
		if s.IssParameter {
			return fmt.Errorf("the authorization server of %s sends its issuer with each answer, and this answer has none", s.Host())
		}
		return nil
	}
	if iss != s.Issuer {
		return fmt.Errorf("the answer came from another authorization server than the one of %s", s.Host())
	}
	return nil
}

// Client is a registered client at an authorization server, with what it
// needs to authorize and exchange tokens.
type Client struct {
	ID, Secret  string
	AuthURL     string
	TokenURL    string
	RedirectURI string
	Scopes      []string
	// Resource is the MCP server the tokens are for (RFC 8707), sent with
	// every refresh as with the authorization and the code exchange (the
	// MCP spec wants it in every token request); "" sends none.
	Resource string
	// Host is the remote's host, for messages.
	Host string
}

// RegisterOptions say how to register a client.
type RegisterOptions struct {
	// RedirectURI is where the authorization server sends the person back.
	RedirectURI string
	// ClientName is how the authorization server shows the client.
	ClientName string
	// ClientIDMetadataURL, when set and the authorization server takes
	// Client ID Metadata Documents, is the client id (no registration).
	ClientIDMetadataURL string
}

// Register gets a client at s's authorization server: the Client ID
// Metadata Document's URL when the server takes one and o names it, else a
// dynamic registration (a public client: authorization code and refresh
// tokens, PKCE).
func Register(ctx context.Context, hc *http.Client, s *Server, o RegisterOptions) (Client, error) {
	c := Client{AuthURL: s.AuthURL, TokenURL: s.TokenURL, RedirectURI: o.RedirectURI, Scopes: slices.Clone(s.Scopes), Host: s.Host(), Resource: s.Resource}
	if o.ClientIDMetadataURL != "" {
		if u, err := url.Parse(o.ClientIDMetadataURL); err != nil || u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") == "" {
			return Client{}, fmt.Errorf("the client id metadata document URL %q must be an https URL with a path", o.ClientIDMetadataURL)
		}
	}
	if o.ClientIDMetadataURL != "" && s.CIMD {
		c.ID = o.ClientIDMetadataURL
		return c, nil
	}
	if s.RegistrationURL == "" {
		return Client{}, fmt.Errorf("the authorization server of %s takes no dynamic client registration", s.Host())
	}
	meta := &oauthex.ClientRegistrationMetadata{
		RedirectURIs: []string{o.RedirectURI}, ClientName: o.ClientName, TokenEndpointAuthMethod: "none",
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		ApplicationType: applicationType(o.RedirectURI),
	}
	r, err := oauthex.RegisterClient(ctx, s.RegistrationURL, meta, client(hc))
	if err != nil {
		if ctx.Err() != nil {
			return Client{}, ctx.Err()
		}
		var ce *oauthex.ClientRegistrationError
		if errors.As(err, &ce) {
			return Client{}, &Refused{Host: s.Host(), Code: ce.ErrorCode, Err: errors.New(ce.ErrorCode)}
		}
		return Client{}, &Refused{Host: s.Host(), Code: "the client registration", Err: errors.New("registration failed")}
	}
	c.ID, c.Secret = r.ClientID, r.ClientSecret
	return c, nil
}

// applicationType is "native" for a loopback redirect, else "web".
func applicationType(redirect string) string {
	u, err := url.Parse(redirect)
	if err != nil {
		return ""
	}
	switch h := u.Hostname(); {
	case h == "localhost", strings.HasPrefix(h, "127."), h == "::1":
		return "native"
	}
	return "web"
}

// Config is the golang.org/x/oauth2 configuration of c: a public client
// sends its id in the form; a confidential one its secret by HTTP Basic
// (client_secret_basic, RFC 7591's default; see [Client.token] for the
// other way).
func (c Client) Config() *oauth2.Config {
	return c.config(oauth2.AuthStyleInHeader)
}

func (c Client) config(style oauth2.AuthStyle) *oauth2.Config {
	if c.Secret == "" {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{
		ClientID: c.ID, ClientSecret: c.Secret, RedirectURL: c.RedirectURI, Scopes: c.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: c.AuthURL, TokenURL: c.TokenURL, AuthStyle: style},
	}
}

// token runs one token request with c's credentials; a confidential
// client the server refuses as invalid_client by HTTP Basic tries once
// more with its secret in the form (client_secret_post). golang.org/x/oauth2's
// auto-detection would also retry a refused grant, spending a rotated
// refresh token twice.
func (c Client) token(ctx context.Context, hc *http.Client, get func(ctx context.Context, cfg *oauth2.Config) (*oauth2.Token, error)) (*oauth2.Token, error) {
	ctx = context.WithValue(ctx, oauth2.HTTPClient, c.tokenClient(hc))
	t, err := get(ctx, c.config(oauth2.AuthStyleInHeader))
	var re *oauth2.RetrieveError
	if err != nil && c.Secret != "" && errors.As(err, &re) &&
		(re.ErrorCode == "invalid_client" || (re.ErrorCode == "" && re.Response != nil && re.Response.StatusCode == http.StatusUnauthorized)) {
		t, err = get(ctx, c.config(oauth2.AuthStyleInParams))
	}
	if err != nil {
		return nil, refused(c.Host, err)
	}
	return t, nil
}

// NewVerifier returns a new PKCE code verifier.
func NewVerifier() string { return oauth2.GenerateVerifier() }

// AuthorizeURL is where the person's browser goes: the authorization code
// flow with PKCE S256, state, and the resource (RFC 8707).
func (c Client) AuthorizeURL(state, verifier, resource string) string {
	return c.Config().AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", resource))
}

// Exchange trades an authorization code for tokens (PKCE verifier and
// resource sent).
func (c Client) Exchange(ctx context.Context, hc *http.Client, code, verifier, resource string) (*oauth2.Token, error) {
	return c.token(ctx, hc, func(ctx context.Context, cfg *oauth2.Config) (*oauth2.Token, error) {
		return cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", resource))
	})
}

// Refresh trades a refresh token for new tokens, naming c.Resource. A new
// token without a refresh token keeps the old refresh token.
func (c Client) Refresh(ctx context.Context, hc *http.Client, refreshToken string) (*oauth2.Token, error) {
	return c.token(ctx, hc, func(ctx context.Context, cfg *oauth2.Config) (*oauth2.Token, error) {
		return cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: refreshToken}).Token()
	})
}

// TokenSource is a token source for c that starts at t and refreshes
// through hc as [Client.Refresh] does.
func (c Client) TokenSource(hc *http.Client, t *oauth2.Token) oauth2.TokenSource {
	return oauth2.ReuseTokenSource(t, &refresher{c: c, hc: hc, rt: t.RefreshToken})
}

// ErrNoRefreshToken is what a [Client.TokenSource] returns once its token
// has expired when the authorization server gave no refresh token: the
// person must authorize again.
var ErrNoRefreshToken = errors.New("the token expired and the authorization server gave no refresh token")

// refreshTimeout bounds a TokenSource's refresh: a token source has no
// context, and a hung authorization server must not hold every request
// waiting for the token.
const refreshTimeout = 30 * time.Second

// refresher refreshes with the newest refresh token it was given;
// oauth2.ReuseTokenSource calls it one at a time.
type refresher struct {
	c  Client
	hc *http.Client
	rt string
}

func (r *refresher) Token() (*oauth2.Token, error) {
	if r.rt == "" {
		return nil, ErrNoRefreshToken
	}
	ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
	defer cancel()
	t, err := r.c.Refresh(ctx, r.hc, r.rt)
	if err != nil {
		return nil, err
	}
	r.rt = t.RefreshToken
	return t, nil
}

// tokenClient is hc for c's token requests: golang.org/x/oauth2 refreshes
// with grant_type and refresh_token alone, so a refresh grant it posts
// gets c.Resource added on the way.
func (c Client) tokenClient(hc *http.Client) *http.Client {
	hc = client(hc)
	if c.Resource == "" {
		return hc
	}
	out := *hc
	out.Transport = resourceTransport{base: hc.Transport, resource: c.Resource}
	return &out
}

// resourceTransport adds resource to the refresh grants it carries.
type resourceTransport struct {
	base     http.RoundTripper // nil: http.DefaultTransport
	resource string
}

// maxTokenRequest bounds the token request body resourceTransport reads:
// golang.org/x/oauth2's are a few hundred bytes.
const maxTokenRequest = 64 << 10

func (t resourceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	if req.Method != http.MethodPost || req.Body == nil || req.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		return base.RoundTrip(req)
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxTokenRequest+1))
	if err != nil {
		req.Body.Close()
		return nil, err
	}
	if len(body) > maxTokenRequest { // not golang.org/x/oauth2's: sent as it is
		out := req.Clone(req.Context())
		out.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), req.Body), req.Body}
		return base.RoundTrip(out)
	}
	req.Body.Close()
	if form, err := url.ParseQuery(string(body)); err == nil && form.Get("grant_type") == "refresh_token" && !form.Has("resource") {
		form.Set("resource", t.resource)
		body = []byte(form.Encode())
	}
	out := req.Clone(req.Context())
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return base.RoundTrip(out)
}
