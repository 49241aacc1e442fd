package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"

	"github.com/spacefix/spacefix/internal/store"
)

// AuthRequest is a checked authorization request: what the consent page
// shows and, once a person decides, where the answer goes.
type AuthRequest struct {
	ClientID    string
	ClientName  string // as the client gave it; unverified
	ClientURI   string // unverified
	LogoURI     string // unverified
	Document    bool   // the client named itself by a metadata document URL
	RedirectURI string
	State       string
	Challenge   string // PKCE S256 code challenge
	Scope       string // what may be granted: ScopeRead or ScopeAll
	Resource    string // the canonical MCP URL
	Issuer      string
	// Params are the request's parameters, for the consent form to post
	// back; the POST is checked again from them.
	Params url.Values
}

// RedirectHost is the host the answer goes to, for the consent page.
func (a *AuthRequest) RedirectHost() string {
	u, err := url.Parse(a.RedirectURI)
	if err != nil {
		return a.RedirectURI
	}
	if u.Host == "" {
		return u.Scheme + ":"
	}
	return u.Host
}

// PageError is an authorization request the gateway cannot send back to
// the client (no valid client or redirect URI): RFC 6749 section 4.1.2.1
// says to tell the person instead of redirecting, so an attacker cannot use
// the endpoint as an open redirect.
type PageError struct{ Message string }

func (e *PageError) Error() string { return e.Message }

// RedirectError is an authorization request that failed after its client
// and redirect URI were checked: the person's browser goes back to the
// client with the error.
type RedirectError struct{ URL string }

func (e *RedirectError) Error() string { return "redirect to " + e.URL }

var challengeRE = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// ParseAuthorize checks an authorization request (the query of a GET, or
// the consent form's POST). The error is a *PageError, a *RedirectError or
// a store failure.
func (s *Server) ParseAuthorize(r *http.Request) (*AuthRequest, error) {
	if ok, retry := s.limits.Allow(AuthorizePath+" "+clientAddr(r), authorizePerAddr); !ok {
		return nil, &PageError{fmt.Sprintf("Too many sign-in requests from this address. Try again in %d seconds.", int(retry.Seconds())+1)}
	}
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		q = r.PostForm
	}
	for k, v := range q {
		if len(v) > 1 {
			if k == "client_id" || k == "redirect_uri" {
				return nil, &PageError{fmt.Sprintf("The app's request has %s twice; the gateway cannot tell where to send you back.", k)}
			}
		}
	}
	c, err := s.lookup(r.Context(), q.Get("client_id"))
	var oe oauthError
	if errors.As(err, &oe) {
		return nil, &PageError{"The app that sent you here cannot sign in: " + oe.Description}
	}
	if err != nil {
		return nil, err
	}
	redirect, ok := c.redirectFor(q.Get("redirect_uri"))
	if !ok {
		if q.Get("redirect_uri") == "" {
			return nil, &PageError{"The app's request has no redirect_uri and the app registered several; the gateway cannot tell where to send you back."}
		}
		return nil, &PageError{fmt.Sprintf("The app asked to send you back to %s, which it did not register. The gateway will not send you there.", q.Get("redirect_uri"))}
	}
	a := &AuthRequest{
		ClientID: c.ID, ClientName: c.DisplayName(), ClientURI: c.URI, LogoURI: c.LogoURI, Document: c.document,
		RedirectURI: redirect, State: q.Get("state"), Issuer: s.Issuer(r), Params: url.Values{},
	}
	for _, k := range []string{"response_type", "client_id", "redirect_uri", "state", "scope", "code_challenge", "code_challenge_method", "resource"} {
		if v := q.Get(k); v != "" {
			a.Params.Set(k, v)
		}
	}
	fail := func(code, desc string) (*AuthRequest, error) {
		return nil, &RedirectError{a.answer(url.Values{"error": {code}, "error_description": {desc}})}
	}
	if q.Get("response_type") != "code" {
		return fail("unsupported_response_type", "response_type must be code.")
	}
	switch q.Get("code_challenge_method") {
	case "S256":
	case "", "plain":
		return fail("invalid_request", "PKCE is required with code_challenge_method S256; plain is not accepted.")
	default:
		return fail("invalid_request", "code_challenge_method must be S256.")
	}
	if !challengeRE.MatchString(q.Get("code_challenge")) {
		return fail("invalid_request", "code_challenge must be the base64url SHA-256 of the code verifier (43 characters).")
	}
	a.Challenge = q.Get("code_challenge")
	a.Resource = s.Resource(r)
	if res := q["resource"]; len(res) > 1 || (len(res) == 1 && res[0] != a.Resource) {
		return fail("invalid_target", fmt.Sprintf("This gateway issues tokens only for its MCP endpoint %s.", a.Resource))
	}
	a.Scope = normalScope(q.Get("scope"))
	return a, nil
}

// answer is the redirect URI with params added, the state and the issuer
// (RFC 9207) always among them.
func (a *AuthRequest) answer(params url.Values) string {
	u, _ := url.Parse(a.RedirectURI) // checked at registration
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	if a.State != "" {
		q.Set("state", a.State)
	}
	q.Set("iss", a.Issuer)
	u.RawQuery = q.Encode()
	return u.String()
}

// Deny is where the browser goes when the person says no.
func (a *AuthRequest) Deny() string {
	return a.answer(url.Values{"error": {"access_denied"}, "error_description": {"The person declined."}})
}

// codeData is what a code remembers of its request, for the exchange.
type codeData struct {
	ClientID    string `json:"client_id"`
	ClientName  string `json:"client_name"`
	RedirectURI string `json:"redirect_uri"`
	Challenge   string `json:"code_challenge"`
	Scope       string `json:"scope"`
	Resource    string `json:"resource"`
	ProjectID   int64  `json:"project_id"`
	UserID      int64  `json:"user_id"`
}

// Approve issues a code for a person's consent: the app may reach the
// project, reading only unless write. It returns where the browser goes.
func (s *Server) Approve(ctx context.Context, a *AuthRequest, userID, projectID int64, write bool) (string, error) {
	scope := ScopeRead
	if write && Writes(a.Scope) {
		scope = ScopeAll
	}
	data, _ := json.Marshal(codeData{
		ClientID: a.ClientID, ClientName: a.ClientName, RedirectURI: a.RedirectURI, Challenge: a.Challenge,
		Scope: scope, Resource: a.Resource, ProjectID: projectID, UserID: userID,
	})
	code := newSecret(codePrefix)
	tok := store.OAuthToken{Kind: store.OAuthCode, GrantID: newID("app_"), Data: data, ExpiresAt: s.now().Add(CodeTTL)}
	if err := s.st.CreateOAuthToken(ctx, tok, hash(code)); err != nil {
		return "", err
	}
	return a.answer(url.Values{"code": {code}}), nil
}
