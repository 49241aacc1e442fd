package oauth

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/store"
)

// client is what the gateway knows of an app, from its registration or
// its metadata document. Nothing in it is verified: the consent page says
// so.
type client struct {
	ID            string   `json:"client_id"`
	Name          string   `json:"client_name,omitempty"`
	URI           string   `json:"client_uri,omitempty"`
	LogoURI       string   `json:"logo_uri,omitempty"`
	RedirectURIs  []string `json:"redirect_uris"`
	AuthMethod    string   `json:"token_endpoint_auth_method,omitempty"`
	GrantTypes    []string `json:"grant_types,omitempty"`
	ResponseTypes []string `json:"response_types,omitempty"`
	Scope         string   `json:"scope,omitempty"`
	// DPoPBound: the client's tokens must be DPoP-bound (RFC 9449
	// section 5.2); a token request without a proof is refused.
	DPoPBound bool `json:"dpop_bound_access_tokens,omitempty"`

	document   bool   // named by a metadata document
	secretHash []byte // registered confidential clients
}

// DisplayName is the client's name as it gave it, or its id.
func (c *client) DisplayName() string {
	if c.Name != "" {
		return c.Name
	}
	return c.ID
}

// isDocumentID reports whether a client_id is a Client ID Metadata Document
// URL rather than a registered id.
func isDocumentID(id string) bool {
	return strings.HasPrefix(id, "https://") || strings.HasPrefix(id, "http://")
}

// lookup finds a client by id: a registered one in the store, or a
// metadata document fetched (and cached) from its URL.
func (s *Server) lookup(ctx context.Context, id string) (*client, error) {
	if id == "" {
		return nil, oauthError{"invalid_request", "client_id is missing."}
	}
	if isDocumentID(id) {
		return s.docs.get(ctx, id)
	}
	rec, err := s.st.OAuthClient(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, oauthError{"invalid_client", "Unknown client_id. Register the client again (dynamic client registration) or use a Client ID Metadata Document URL."}
	}
	if err != nil {
		return nil, err
	}
	var c client
	if err := json.Unmarshal(rec.Metadata, &c); err != nil {
		return nil, fmt.Errorf("stored client %q: %w", id, err)
	}
	c.ID, c.secretHash = rec.ID, rec.SecretHash
	return &c, nil
}

// authenticate checks the client of a token or revocation request: its id
// (form or HTTP Basic) and, for a confidential client, its secret.
func (s *Server) authenticate(r *http.Request) (*client, error) {
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
	}
	c, err := s.lookup(r.Context(), id)
	var oe oauthError
	if errors.As(err, &oe) {
		return nil, oauthError{"invalid_client", oe.Description}
	}
	if err != nil {
		return nil, err
	}
	if c.secretHash != nil && subtle.ConstantTimeCompare(hash(secret), c.secretHash) != 1 {
		return nil, oauthError{"invalid_client", "The client secret is missing or wrong."}
	}
	return c, nil
}

// redirectFor returns the redirect URI an authorization request may use:
// the one given, if the client registered it (loopback URIs match on any
// port, RFC 8252 section 7.3), or the client's only one when none is given.
func (c *client) redirectFor(given string) (string, bool) {
	if given == "" {
		if len(c.RedirectURIs) == 1 {
			return c.RedirectURIs[0], true
		}
		return "", false
	}
	for _, reg := range c.RedirectURIs {
		if given == reg || loopbackMatch(reg, given) {
			return given, true
		}
	}
	return "", false
}

// loopbackMatch reports whether given is registered except for the port,
// both being http URIs on a loopback IP address or localhost.
func loopbackMatch(registered, given string) bool {
	r, err1 := url.Parse(registered)
	g, err2 := url.Parse(given)
	if err1 != nil || err2 != nil || r.Scheme != "http" || g.Scheme != "http" || !isLoopbackHost(r.Hostname()) {
		return false
	}
	return r.Hostname() == g.Hostname() && r.EscapedPath() == g.EscapedPath() && r.RawQuery == g.RawQuery && g.Fragment == "" && g.User == nil
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsLoopback()
}

// nativeRedirects are the exact redirect URIs of MCP clients named in the
// spec whose private-use scheme is not in reverse-domain form. Cursor
// registers its callback together with an https and a loopback one, and
// one refused URI refuses the registration, so without it Cursor could not
// sign in. PKCE (always S256 here) keeps a code another app intercepts
// useless.
var nativeRedirects = []string{"cursor://anysphere.cursor-mcp/oauth/callback"}

// checkRedirectURI says what is wrong with a redirect URI a client
// registers, or nil. Only three kinds may receive codes: https anywhere,
// http on a loopback host (127.0.0.1, [::1], localhost: a native app's
// listener, RFC 8252 section 7.3), and a native app's private-use scheme
// in reverse-domain form (com.example.app:/callback, RFC 8252 section
// 7.1), or one of [nativeRedirects]. Any other scheme (ftp:, ws:, view-source:, javascript:, …) is a
// place a browser should not take a code to. Never a fragment.
func checkRedirectURI(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return fmt.Errorf("%q is not an absolute URI", s)
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return fmt.Errorf("%q has a fragment; redirect URIs may not", s)
	}
	switch scheme := strings.ToLower(u.Scheme); {
	case scheme == "https":
		if u.Host == "" {
			return fmt.Errorf("%q has no host", s)
		}
	case scheme == "http":
		if !isLoopbackHost(u.Hostname()) {
			return fmt.Errorf("%q uses plain http on a host that is not loopback; use https", s)
		}
	case strings.Contains(scheme, ".") && !strings.HasPrefix(scheme, ".") && !strings.HasSuffix(scheme, ".") && !strings.Contains(scheme, ".."):
		// A private-use scheme: url.Parse has checked its characters.
	case slices.Contains(nativeRedirects, s):
	default:
		return fmt.Errorf("%q uses the %s: scheme; a redirect URI must be https, http on 127.0.0.1, [::1] or localhost, or an app's own scheme in reverse-domain form such as com.example.app:/callback", s, u.Scheme)
	}
	return nil
}

// Limits of a client's metadata, registered or fetched, so that a
// registration is a small record (at most about 7 KB stored).
const (
	maxRedirectURIs = 10
	maxURILen       = 512 // bytes, of each redirect URI, client_uri and logo_uri
	maxNameLen      = 100 // characters of client_name
	maxScopeLen     = 256 // bytes; ours are "mcp:read mcp:write"
	maxTypes        = 4   // entries of grant_types and of response_types
)

// assertionOnly reports whether a client registered for the JWT bearer
// grant alone: it never sends a browser anywhere, so it needs no redirect
// URI.
func (c *client) assertionOnly() bool {
	return slices.Contains(c.GrantTypes, GrantJWTBearer) && !slices.Contains(c.GrantTypes, "authorization_code")
}

// validate checks a client's metadata, registered or fetched.
func (c *client) validate() error {
	if len(c.RedirectURIs) == 0 && !c.assertionOnly() {
		return oauthError{"invalid_redirect_uri", "redirect_uris must list at least one URI."}
	}
	if err := c.checkSizes(); err != nil {
		return err
	}
	for _, u := range c.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return oauthError{"invalid_redirect_uri", err.Error()}
		}
	}
	for _, u := range []string{c.URI, c.LogoURI} {
		if u != "" && !strings.HasPrefix(u, "https://") {
			return oauthError{"invalid_client_metadata", fmt.Sprintf("%q must be an https URL.", u)}
		}
	}
	for _, g := range c.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" && g != GrantJWTBearer {
			return oauthError{"invalid_client_metadata", fmt.Sprintf("grant type %q is not supported; use authorization_code, refresh_token or %s.", g, GrantJWTBearer)}
		}
	}
	for _, rt := range c.ResponseTypes {
		if rt != "code" {
			return oauthError{"invalid_client_metadata", fmt.Sprintf("response type %q is not supported; use code.", rt)}
		}
	}
	return nil
}

// checkSizes refuses metadata over the limits, naming the field and the
// limit.
func (c *client) checkSizes() error {
	over := func(format string, args ...any) error {
		return oauthError{"invalid_client_metadata", fmt.Sprintf(format, args...)}
	}
	switch {
	case len(c.RedirectURIs) > maxRedirectURIs:
		return over("redirect_uris lists %d URIs; at most %d are allowed.", len(c.RedirectURIs), maxRedirectURIs)
	case utf8.RuneCountInString(c.Name) > maxNameLen:
		return over("client_name is longer than %d characters.", maxNameLen)
	case len(c.Scope) > maxScopeLen:
		return over("scope is longer than %d bytes.", maxScopeLen)
	case len(c.URI) > maxURILen:
		return over("client_uri is longer than %d bytes.", maxURILen)
	case len(c.LogoURI) > maxURILen:
		return over("logo_uri is longer than %d bytes.", maxURILen)
	case len(c.GrantTypes) > maxTypes:
		return over("grant_types lists %d values; at most %d are allowed.", len(c.GrantTypes), maxTypes)
	case len(c.ResponseTypes) > maxTypes:
		return over("response_types lists %d values; at most %d are allowed.", len(c.ResponseTypes), maxTypes)
	}
	for _, u := range c.RedirectURIs {
		if len(u) > maxURILen {
			return over("a URI in redirect_uris is longer than %d bytes.", maxURILen)
		}
	}
	return nil
}

// roomForClient refuses a registration, answering it, when the store
// holds MaxClients registered clients already. Gateways sharing a store
// may together go a few over.
func (s *Server) roomForClient(w http.ResponseWriter, r *http.Request) bool {
	n, err := s.st.CountOAuthClients(r.Context())
	if err != nil {
		s.log.Error("count OAuth clients", "err", err)
		writeJSON(w, http.StatusInternalServerError, oauthError{"server_error", "The gateway could not save the registration; try again."})
		return false
	}
	if n < int64(s.maxClients) {
		if s.full.Swap(false) {
			s.log.Info("OAuth client registration open again", "clients", n, "max", s.maxClients)
		}
		return true
	}
	if !s.full.Swap(true) {
		s.log.Warn("OAuth client registration refused: the store holds as many registered clients as it keeps; unused ones are deleted a day after they registered",
			"clients", n, "max", s.maxClients)
	}
	w.Header().Set("Retry-After", "3600")
	writeJSON(w, http.StatusServiceUnavailable, oauthError{"temporarily_unavailable", fmt.Sprintf(
		"This gateway has as many registered OAuth clients as it keeps (%d) and registers no more until unused ones are deleted. Try again in an hour, or name the client by a Client ID Metadata Document URL instead of registering.", s.maxClients)})
	return false
}

// register is dynamic client registration (RFC 7591).
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	// Per address (see Mount), and in all: many addresses together must
	// not fill the store either.
	if ok, retry := s.limits.Allow("register:all", registersInAll); !ok {
		w.Header().Set("Retry-After", fmt.Sprint(ratelimit.Seconds(retry)))
		writeJSON(w, http.StatusTooManyRequests, oauthError{"slow_down",
			fmt.Sprintf("Too many client registrations on this gateway. Try again in %d seconds.", ratelimit.Seconds(retry))})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRegistrationLen+1))
	if err != nil || len(body) > maxRegistrationLen {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_client_metadata", fmt.Sprintf("The registration must be a JSON object of at most %d bytes.", maxRegistrationLen)})
		return
	}
	var c client
	if err := json.Unmarshal(body, &c); err != nil {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_client_metadata", "The registration is not a JSON object of client metadata: " + err.Error()})
		return
	}
	switch c.AuthMethod {
	case "":
		c.AuthMethod = "client_secret_basic" // RFC 7591's default
	case "none", "client_secret_basic", "client_secret_post":
	default:
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_client_metadata", fmt.Sprintf("token_endpoint_auth_method %q is not supported; use none, client_secret_basic or client_secret_post.", c.AuthMethod)})
		return
	}
	if err := c.validate(); err != nil {
		writeJSON(w, http.StatusBadRequest, err)
		return
	}
	if !s.roomForClient(w, r) {
		return
	}
	c.ID = newID("client_")
	var secret string
	rec := store.OAuthClient{ID: c.ID}
	if c.AuthMethod != "none" {
		secret = newSecret(secretPrefix)
		rec.SecretHash = hash(secret)
	}
	rec.Metadata, _ = json.Marshal(&c)
	if err := s.st.CreateOAuthClient(r.Context(), rec); err != nil {
		s.log.Error("register OAuth client", "err", err)
		writeJSON(w, http.StatusInternalServerError, oauthError{"server_error", "The gateway could not save the registration; try again."})
		return
	}
	s.log.Info("OAuth client registered", "client", c.ID, "name", c.Name, "addr", clientAddr(r))
	resp := map[string]any{}
	json.Unmarshal(rec.Metadata, &resp)
	resp["client_id_issued_at"] = s.now().Unix()
	if secret != "" {
		resp["client_secret"] = secret
		resp["client_secret_expires_at"] = 0
	}
	writeJSON(w, http.StatusCreated, resp)
}
