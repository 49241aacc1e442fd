package oauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// tokenResponse is RFC 6749 section 5.1's.
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope"`
}

// token is the token endpoint: authorization_code, refresh_token and the
// JWT bearer grant, each DPoP-bound when the request carries a proof.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if n := s.Nonce(); n != "" {
		w.Header().Set(DPoPNonceHeader, n)
	}
	c, ok := s.formClient(w, r)
	if !ok {
		return
	}
	jkt, err := s.tokenProof(r, c)
	if err != nil {
		s.tokenError(w, err)
		return
	}
	var resp *tokenResponse
	switch gt := r.PostFormValue("grant_type"); gt {
	case "authorization_code":
		resp, err = s.exchangeCode(r, c, jkt)
	case "refresh_token":
		resp, err = s.refresh(r, c, jkt)
	case GrantJWTBearer:
		resp, err = s.jwtBearer(r, c, jkt)
	case "":
		err = oauthError{"invalid_request", "grant_type is missing."}
	default:
		err = oauthError{"unsupported_grant_type", "grant_type must be authorization_code, refresh_token or " + GrantJWTBearer + "."}
	}
	if err != nil {
		s.tokenError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// formClient reads the form of a token or revocation request and
// authenticates its client; it answers the request itself when either
// fails.
func (s *Server) formClient(w http.ResponseWriter, r *http.Request) (*client, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request", "The body must be an application/x-www-form-urlencoded form."})
		return nil, false
	}
	c, err := s.authenticate(r)
	if err != nil {
		s.tokenError(w, err)
		return nil, false
	}
	return c, true
}

func (s *Server) tokenError(w http.ResponseWriter, err error) {
	var pe *ProofError
	if errors.As(err, &pe) {
		code := "invalid_dpop_proof"
		if pe.Nonce {
			code = "use_dpop_nonce"
		}
		err = oauthError{code, pe.Description}
	}
	var oe oauthError
	if !errors.As(err, &oe) {
		s.log.Error("OAuth token endpoint", "err", err)
		writeJSON(w, http.StatusInternalServerError, oauthError{"server_error", "The gateway could not answer; try again."})
		return
	}
	status := http.StatusBadRequest
	if oe.Code == "invalid_client" {
		status = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", `Basic realm="spacefix"`)
	}
	writeJSON(w, status, oe)
}

var (
	errBadCode    = oauthError{"invalid_grant", "The authorization code is unknown, expired or already used. Start the sign-in again."}
	errBadRefresh = oauthError{"invalid_grant", "The refresh token is unknown, expired, revoked or already used. Sign in again."}
)

func (s *Server) exchangeCode(r *http.Request, c *client, jkt string) (*tokenResponse, error) {
	code, verifier := r.PostFormValue("code"), r.PostFormValue("code_verifier")
	if code == "" {
		return nil, oauthError{"invalid_request", "code is missing."}
	}
	if verifier == "" {
		return nil, oauthError{"invalid_request", "code_verifier is missing; PKCE is required."}
	}
	tok, err := s.st.UseOAuthToken(r.Context(), hash(code))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, errBadCode
	case errors.Is(err, store.ErrUsed):
		// RFC 6749 section 4.1.2: a code used twice may have been stolen;
		// what it granted goes too.
		s.revokeGrant(r, tok.GrantID, "authorization code used twice")
		return nil, errBadCode
	case err != nil:
		return nil, err
	}
	var d codeData
	if tok.Kind != store.OAuthCode || json.Unmarshal(tok.Data, &d) != nil || !s.now().Before(tok.ExpiresAt) {
		return nil, errBadCode
	}
	if d.ClientID != c.ID {
		return nil, oauthError{"invalid_grant", "The authorization code was issued to another client."}
	}
	if ru := r.PostFormValue("redirect_uri"); ru != d.RedirectURI {
		return nil, oauthError{"invalid_grant", "redirect_uri does not match the authorization request's."}
	}
	if !pkceMatches(verifier, d.Challenge) {
		return nil, oauthError{"invalid_grant", "code_verifier does not match the code_challenge (PKCE S256)."}
	}
	if res := r.PostFormValue("resource"); res != "" && res != d.Resource {
		return nil, oauthError{"invalid_target", "resource does not match the authorization request's."}
	}
	g, err := s.st.CreateOAuthGrant(r.Context(), store.OAuthGrant{
		ID: tok.GrantID, ProjectID: d.ProjectID, UserID: d.UserID, ClientID: d.ClientID, ClientName: d.ClientName,
		Scope: d.Scope, Resource: d.Resource,
	})
	if err != nil {
		return nil, err
	}
	// The app signed in again (or stepped up): its older grant from this
	// person for this project goes, so Connected apps lists it once.
	if older, err := s.st.OAuthGrants(r.Context(), g.ProjectID); err == nil {
		for _, o := range older {
			if o.ID != g.ID && o.ClientID == g.ClientID && o.UserID == g.UserID {
				s.revokeGrant(r, o.ID, "replaced by a new sign-in")
			}
		}
	}
	s.log.Info("OAuth app connected", "grant", g.ID, "project", g.ProjectName, "client", g.ClientName, "user", g.UserEmail, "scope", g.Scope)
	return s.issue(r.Context(), g, c, jkt)
}

// pkceMatches checks a code verifier against an S256 challenge (RFC 7636).
func pkceMatches(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	return subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) == 1
}

func (s *Server) refresh(r *http.Request, c *client, jkt string) (*tokenResponse, error) {
	rt := r.PostFormValue("refresh_token")
	if rt == "" {
		return nil, oauthError{"invalid_request", "refresh_token is missing."}
	}
	// RFC 9449 section 5: a bound refresh token works only with a proof by
	// its key. Checked before the token is spent, so that someone who
	// stole it without the key cannot use it up for the app.
	if t, err := s.st.OAuthToken(r.Context(), hash(rt)); err == nil && t.Kind == store.OAuthRefresh {
		if bound := boundTo(t.Data); bound != "" && bound != jkt {
			return nil, oauthError{"invalid_dpop_proof", "The refresh token is bound to a DPoP key; send a DPoP proof signed with that key."}
		}
	}
	tok, err := s.st.UseOAuthToken(r.Context(), hash(rt))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, errBadRefresh
	case errors.Is(err, store.ErrUsed):
		// A rotated refresh token presented again: one of two holders is
		// not the app. The whole family goes (OAuth 2.1 section 4.3.1).
		if tok.Kind == store.OAuthRefresh {
			s.revokeGrant(r, tok.GrantID, "refresh token used twice")
		}
		return nil, errBadRefresh
	case err != nil:
		return nil, err
	}
	if tok.Kind != store.OAuthRefresh || !s.now().Before(tok.ExpiresAt) {
		return nil, errBadRefresh
	}
	g, err := s.st.OAuthGrant(r.Context(), tok.GrantID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && g.Revoked()) {
		return nil, errBadRefresh
	}
	if err != nil {
		return nil, err
	}
	if g.ClientID != c.ID {
		return nil, oauthError{"invalid_grant", "The refresh token was issued to another client."}
	}
	if res := r.PostFormValue("resource"); res != "" && res != g.Resource {
		return nil, oauthError{"invalid_target", "resource does not match the grant's."}
	}
	if sc := r.PostFormValue("scope"); sc != "" && Writes(normalScope(sc)) && !Writes(g.Scope) {
		return nil, oauthError{"invalid_scope", "The grant allows only mcp:read. Sign in again to allow read and write."}
	}
	return s.issue(r.Context(), g, c, jkt)
}

// issueAccess makes an access token alone for a grant: the JWT bearer
// grant's answer, refreshed by a new assertion rather than a refresh token.
func (s *Server) issueAccess(ctx context.Context, g store.OAuthGrant, jkt string) (*tokenResponse, error) {
	access := newSecret(accessPrefix)
	tok := store.OAuthToken{Kind: store.OAuthAccess, GrantID: g.ID, Data: bindingData(jkt), ExpiresAt: s.now().Add(AccessTTL)}
	if err := s.st.CreateOAuthToken(ctx, tok, hash(access)); err != nil {
		return nil, err
	}
	return &tokenResponse{AccessToken: access, TokenType: tokenType(jkt), ExpiresIn: int(AccessTTL.Seconds()), Scope: g.Scope}, nil
}

// tokenType is the token_type of an answer: DPoP for a bound token.
func tokenType(jkt string) string {
	if jkt != "" {
		return "DPoP"
	}
	return "Bearer"
}

// issue makes an access token and a refresh token for a grant, bound to
// the key of thumbprint jkt when it is set: the access token always, the
// refresh token for a public client (RFC 9449 section 5; a confidential
// client's refresh token is bound by its secret already).
func (s *Server) issue(ctx context.Context, g store.OAuthGrant, c *client, jkt string) (*tokenResponse, error) {
	resp, err := s.issueAccess(ctx, g, jkt)
	if err != nil {
		return nil, err
	}
	refresh := newSecret(refreshPrefix)
	tok := store.OAuthToken{Kind: store.OAuthRefresh, GrantID: g.ID, ExpiresAt: s.now().Add(RefreshTTL)}
	if c.secretHash == nil {
		tok.Data = bindingData(jkt)
	}
	if err := s.st.CreateOAuthToken(ctx, tok, hash(refresh)); err != nil {
		return nil, err
	}
	resp.RefreshToken = refresh
	return resp, nil
}

// revoke is RFC 7009's endpoint. Revoking either token of a grant revokes
// the grant: the app is disconnected, as from the dashboard. It answers 200
// for unknown tokens too, as the RFC says.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	c, ok := s.formClient(w, r)
	if !ok {
		return
	}
	secret := r.PostFormValue("token")
	if secret == "" {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request", "token is missing."})
		return
	}
	tok, err := s.st.OAuthToken(r.Context(), hash(secret))
	if err == nil && tok.Kind != store.OAuthCode {
		if g, err := s.st.OAuthGrant(r.Context(), tok.GrantID); err == nil && g.ClientID == c.ID {
			s.revokeGrant(r, g.ID, "revoked by the app")
		}
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.tokenError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// ErrInvalidToken means an access token is unknown, expired, revoked or
// for another resource.
var ErrInvalidToken = errors.New("unknown, expired or revoked OAuth access token, or one for another URL")

// Grant is what an access token is good for.
type Grant struct {
	ID        string // the grant's id: the MCP endpoint treats it as a client key id
	ProjectID int64
	Client    string // the app's name
	Write     bool   // mcp:write: tools that change things too
	// JKT is the thumbprint of the DPoP key the token is bound to; "" for
	// a bearer token. The MCP endpoint refuses a bound token without a
	// proof by that key.
	JKT string
}

type checkedToken struct {
	grant    store.OAuthGrant
	err      error
	expires  time.Time // of the cache entry
	tokenExp time.Time
	jkt      string
}

// verifyTTL bounds how long a revoked token keeps working on a gateway
// that did not hear of the revocation.
const verifyTTL = 500 * time.Millisecond

// Verify checks an access token presented to the MCP endpoint whose
// canonical URL is resource.
func (s *Server) Verify(ctx context.Context, token, resource string) (Grant, error) {
	h := hash(token)
	hk := hex.EncodeToString(h)
	now := s.now()
	s.mu.Lock()
	c, ok := s.checked[hk]
	s.mu.Unlock()
	if !ok || !now.Before(c.expires) {
		c = checkedToken{expires: now.Add(verifyTTL)}
		tok, err := s.st.OAuthToken(ctx, h)
		if err == nil && tok.Kind == store.OAuthAccess {
			c.tokenExp, c.jkt = tok.ExpiresAt, boundTo(tok.Data)
			c.grant, err = s.st.OAuthGrant(ctx, tok.GrantID)
		}
		switch {
		case err == nil && tok.Kind == store.OAuthAccess && !c.grant.Revoked():
		case err == nil, errors.Is(err, store.ErrNotFound):
			c.err = ErrInvalidToken
		default:
			return Grant{}, err // not cached: the store may recover
		}
		s.mu.Lock()
		if len(s.checked) > 10000 {
			clear(s.checked)
		}
		s.checked[hk] = c
		s.mu.Unlock()
	}
	if c.err != nil {
		return Grant{}, c.err
	}
	if !now.Before(c.tokenExp) || c.grant.Resource != resource {
		return Grant{}, ErrInvalidToken
	}
	s.touch(c.grant.ID, now)
	return Grant{ID: c.grant.ID, ProjectID: c.grant.ProjectID, Client: c.grant.ClientName, Write: Writes(c.grant.Scope), JKT: c.jkt}, nil
}

// touch records a grant's last use, at most once a minute per grant, off
// the request's path.
func (s *Server) touch(grantID string, now time.Time) {
	s.mu.Lock()
	last, ok := s.touched[grantID]
	if ok && now.Sub(last) < time.Minute {
		s.mu.Unlock()
		return
	}
	if len(s.touched) > 10000 {
		clear(s.touched)
	}
	s.touched[grantID] = now
	s.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.st.TouchOAuthGrant(ctx, grantID, now); err != nil {
			s.log.Warn("record an OAuth app's last use", "grant", grantID, "err", err)
		}
	}()
}

// Forget drops what the server remembers of a grant's tokens, so that a
// grant revoked in this process stops working at once.
func (s *Server) Forget(grantID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for hk, c := range s.checked {
		if c.grant.ID == grantID {
			delete(s.checked, hk)
		}
	}
}

// Prune deletes codes and tokens that expired over a day ago, the jti
// values of assertions and proofs that expired, and the
// registered clients nothing uses ([ClientUnusedTTL], [ClientRetention]).
// It returns how many codes and tokens went, and logs how many clients.
// The gateway calls it with the call log's pruning.
func (s *Server) Prune(ctx context.Context) (int64, error) {
	now := s.now()
	n, err := s.st.PruneOAuthTokens(ctx, now.Add(-24*time.Hour))
	if err != nil {
		return n, err
	}
	if _, err := s.st.PruneUsedOnce(ctx, now); err != nil {
		return n, err
	}
	clients, err := s.st.PruneOAuthClients(ctx, now.Add(-ClientUnusedTTL), now.Add(-ClientRetention))
	if err != nil {
		return n, err
	}
	if clients > 0 {
		s.log.Info("pruned unused OAuth clients", "clients", clients)
	}
	return n, nil
}
