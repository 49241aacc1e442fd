package oauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/spacefix/spacefix/internal/store"
)

// testIdP is an identity provider on loopback: OpenID discovery, a JWKS
// that can rotate, and ID-JAGs signed with its current key.
type testIdP struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	key     *ecdsa.PrivateKey
	kid     string
	fetches atomic.Int32 // JWKS fetches
}

func newTestIdP(t *testing.T) *testIdP {
	p := &testIdP{t: t}
	p.rotate("k1")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": p.srv.URL, "jwks_uri": p.srv.URL + "/jwks"})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		p.fetches.Add(1)
		p.mu.Lock()
		defer p.mu.Unlock()
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &p.key.PublicKey, KeyID: p.kid, Algorithm: "ES256", Use: "sig"}}})
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *testIdP) rotate(kid string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.key, p.kid = key, kid
	p.mu.Unlock()
}

// claims are an ID-JAG's claims for a client, valid now.
func (p *testIdP) claims(clientID string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": p.srv.URL, "sub": "00u-ada", "aud": base, "client_id": clientID, "resource": base + "/mcp",
		"jti": rand.Text(), "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "scope": "mcp:read mcp:write",
		"email": "ada@example.com", "email_verified": true,
	}
}

// sign makes a JWS of claims with the IdP's key, typ oauth-id-jag+jwt
// unless typ says otherwise.
func (p *testIdP) sign(claims map[string]any, typ string) string {
	p.mu.Lock()
	key, kid := p.key, p.kid
	p.mu.Unlock()
	return signWith(p.t, jose.SigningKey{Algorithm: jose.ES256, Key: key}, kid, typ, claims)
}

func signWith(t *testing.T, k jose.SigningKey, kid, typ string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType(jose.ContentType(typ))
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	signer, err := jose.NewSigner(k, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// enterprise is a harness with the IdP trusted and ada an editor of shop.
func enterprise(t *testing.T, entry func(*store.IdP)) (*harness, *testIdP, string) {
	h := newHarness(t)
	idp := newTestIdP(t)
	e := store.IdP{Issuer: idp.srv.URL}
	if entry != nil {
		entry(&e)
	}
	if _, err := h.st.CreateIdP(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.SetMember(t.Context(), store.Member{ProjectID: h.project.ID, UserID: h.user.ID, Role: store.RoleEditor}); err != nil {
		t.Fatal(err)
	}
	return h, idp, h.publicClient()
}

func (h *harness) jwtBearer(clientID, assertion string) (int, map[string]any) {
	h.t.Helper()
	return h.post(TokenPath, url.Values{"grant_type": {GrantJWTBearer}, "client_id": {clientID}, "assertion": {assertion}})
}

// TestJWTBearerGrant: an ID-JAG of a trusted IdP gets an access token (no
// refresh token) bound to the MCP endpoint, for the person found by the
// verified e-mail, audited; the same ID-JAG again is refused.
func TestJWTBearerGrant(t *testing.T) {
	h, idp, client := enterprise(t, nil)
	if m := getJSON(t, h.srv.URL+ServerMetaPath); !strings.Contains(fmt.Sprint(m["grant_types_supported"]), GrantJWTBearer) {
		t.Errorf("grant_types_supported = %v; want it to list %s", m["grant_types_supported"], GrantJWTBearer)
	}
	assertion := idp.sign(idp.claims(client), typIDJAG)
	status, m := h.jwtBearer(client, assertion)
	if status != http.StatusOK || m["token_type"] != "Bearer" || m["scope"] != ScopeAll || m["refresh_token"] != nil || m["expires_in"] != 3600.0 {
		t.Fatalf("jwt-bearer = %d %v; want 200, a Bearer token for mcp:read mcp:write, no refresh token", status, m)
	}
	g, err := h.s.Verify(t.Context(), m["access_token"].(string), base+"/mcp")
	if err != nil || g.ProjectID != h.project.ID || !g.Write || g.Client != "Test app" {
		t.Errorf("Verify = %+v, %v; want a writing grant of shop for Test app", g, err)
	}
	grant, err := h.st.OAuthGrant(t.Context(), g.ID)
	if err != nil || grant.UserID != h.user.ID {
		t.Errorf("grant = %+v, %v; want ada's", grant, err)
	}
	if id, err := h.st.IdentityUser(t.Context(), idp.srv.URL, "00u-ada"); err != nil || id != h.user.ID {
		t.Errorf("the subject is linked to %d, %v; want ada (%d)", id, err, h.user.ID)
	}
	es, err := h.st.Audit(t.Context(), store.AuditFilter{ProjectID: h.project.ID})
	if err != nil || len(es) != 1 || es[0].Action != "oauth.jwt_bearer" || es[0].Actor != "ada@example.com" || es[0].Target != "Test app" {
		t.Errorf("audit = %+v, %v; want one oauth.jwt_bearer entry by ada for Test app", es, err)
	}
	if strings.Contains(fmt.Sprint(es), assertion) || strings.Contains(h.logs.String(), assertion) {
		t.Error("the assertion reached the audit log or the log")
	}
	status, m = h.jwtBearer(client, assertion)
	wantDescription(t, "the same ID-JAG again", status, m, fmt.Sprintf("The assertion (jti %q) was used already. Get a new one from the identity provider.", jti(t, assertion)))
}

func jti(t *testing.T, assertion string) string {
	var c struct{ JTI string }
	parts := strings.Split(assertion, ".")
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	json.Unmarshal(b, &c)
	return c.JTI
}

func wantDescription(t *testing.T, what string, status int, m map[string]any, want string) {
	t.Helper()
	if status != http.StatusBadRequest || m["error"] != "invalid_grant" || m["error_description"] != want {
		t.Errorf("%s = %d %v;\nwant 400 invalid_grant %q", what, status, m, want)
	}
}

// TestJWTBearerChecks: each check of an ID-JAG refuses with its own
// description.
func TestJWTBearerChecks(t *testing.T) {
	h, idp, client := enterprise(t, func(e *store.IdP) { e.AllowedClients = nil })
	other := h.publicClient()
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	stranger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	with := func(k string, v any) map[string]any {
		c := idp.claims(client)
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	hour := time.Now().Add(-time.Hour).Unix()
	tests := []struct {
		name, assertion, want string
	}{
		{"typ", idp.sign(idp.claims(client), "JWT"), `The assertion's typ header is "JWT"; an Identity Assertion JWT Authorization Grant has "oauth-id-jag+jwt".`},
		{"HS256", signWith(t, jose.SigningKey{Algorithm: jose.HS256, Key: []byte("a-shared-secret-of-32-bytes-long!")}, "k1", typIDJAG, idp.claims(client)),
			`The assertion is signed with "HS256"; the gateway accepts only asymmetric algorithms (RS256, PS256, ES256, EdDSA and their kin).`},
		{"not a JWT", "not-a-jwt", "The assertion is not a signed JWT (JWS compact serialization)."},
		{"unknown issuer", idp.sign(with("iss", "https://evil.example"), typIDJAG),
			`The assertion's issuer "https://evil.example" is not a trusted identity provider of this gateway. An admin adds it with: spacefix idp add --issuer URL`},
		{"signature", signWith(t, jose.SigningKey{Algorithm: jose.ES256, Key: stranger}, "k1", typIDJAG, idp.claims(client)),
			fmt.Sprintf(`The assertion's signature does not verify with the keys of %s (kid "k1").`, idp.srv.URL)},
		{"unknown kid", signWith(t, jose.SigningKey{Algorithm: jose.RS256, Key: rsaKey}, "k9", typIDJAG, idp.claims(client)),
			fmt.Sprintf(`The assertion's signature does not verify with the keys of %s (kid "k9").`, idp.srv.URL)},
		{"aud", idp.sign(with("aud", "https://other.example"), typIDJAG), "The assertion's aud must be this gateway's issuer https://gw.example."},
		{"client_id", idp.sign(idp.claims(other), typIDJAG), fmt.Sprintf(`The assertion was issued for client %q, not for the client that presented it.`, other)},
		{"resource", idp.sign(with("resource", "https://other.example/mcp"), typIDJAG), "The assertion's resource must be this gateway's MCP endpoint https://gw.example/mcp."},
		{"resource array", idp.sign(with("resource", []string{base + "/mcp", "https://other.example/mcp"}), typIDJAG), "The assertion's resource must be this gateway's MCP endpoint https://gw.example/mcp."},
		{"expired", idp.sign(with("exp", hour), typIDJAG), fmt.Sprintf("The assertion expired at %s. Get a new one from the identity provider.", time.Unix(hour, 0).UTC().Format(time.RFC3339))},
		{"iat in the future", idp.sign(with("iat", time.Now().Add(10*time.Minute).Unix()), typIDJAG), "The assertion's iat is in the future; check the identity provider's clock."},
		{"no iat", idp.sign(with("iat", nil), typIDJAG), "The assertion lacks the exp or iat claim."},
		{"no jti", idp.sign(with("jti", nil), typIDJAG), "The assertion lacks the jti claim."},
		{"no sub", idp.sign(with("sub", nil), typIDJAG), "The assertion lacks the sub claim."},
	}
	for _, tt := range tests {
		status, m := h.jwtBearer(client, tt.assertion)
		wantDescription(t, tt.name, status, m, tt.want)
	}
	status, m := h.jwtBearer(client, "")
	wantError(t, "no assertion", status, m, http.StatusBadRequest, "invalid_request")
	if es, _ := h.st.Audit(t.Context(), store.AuditFilter{ProjectID: h.project.ID}); len(es) != 0 {
		t.Errorf("refused grants were audited as connections: %+v", es)
	}
}

// TestJWTBearerAllowedClients: an IdP entry that lists clients refuses
// the others.
func TestJWTBearerAllowedClients(t *testing.T) {
	h, idp, client := enterprise(t, func(e *store.IdP) { e.AllowedClients = []string{"client_someone_else"} })
	status, m := h.jwtBearer(client, idp.sign(idp.claims(client), typIDJAG))
	wantDescription(t, "a client the IdP entry does not list", status, m,
		fmt.Sprintf(`The identity provider %s is not allowed to sign in client %q here. An admin allows it with --allowed-client.`, idp.srv.URL, client))
}

// TestJWTBearerKeyRotation: an ID-JAG signed with a key the cached set
// lacks makes the gateway fetch the set again, at most every ten seconds.
func TestJWTBearerKeyRotation(t *testing.T) {
	h, idp, client := enterprise(t, nil)
	if status, m := h.jwtBearer(client, idp.sign(idp.claims(client), typIDJAG)); status != http.StatusOK {
		t.Fatalf("first grant = %d %v", status, m)
	}
	idp.rotate("k2")
	frozen := h.s.now()
	h.s.now = func() time.Time { return frozen.Add(idpRefetchAfter) }
	if status, m := h.jwtBearer(client, idp.sign(idp.claims(client), typIDJAG)); status != http.StatusOK {
		t.Fatalf("after rotation = %d %v; want the new key fetched", status, m)
	}
	idp.rotate("k3")
	before := idp.fetches.Load()
	status, m := h.jwtBearer(client, idp.sign(idp.claims(client), typIDJAG))
	wantDescription(t, "a new kid within ten seconds", status, m, fmt.Sprintf(`The assertion's signature does not verify with the keys of %s (kid "k3").`, idp.srv.URL))
	if n := idp.fetches.Load() - before; n != 0 {
		t.Errorf("%d JWKS fetches for an unknown kid within ten seconds of the last; want 0", n)
	}
}

// TestJWTBearerPeople: unknown people are refused unless the entry
// provisions them; a provisioned viewer gets mcp:read; an unverified
// e-mail never reaches an existing person; several projects need a
// provisioning project.
func TestJWTBearerPeople(t *testing.T) {
	h, idp, client := enterprise(t, nil)
	stranger := func() map[string]any {
		c := idp.claims(client)
		maps.Copy(c, map[string]any{"sub": "00u-bob", "email": "bob@example.com"})
		return c
	}
	status, m := h.jwtBearer(client, idp.sign(stranger(), typIDJAG))
	wantDescription(t, "an unknown person", status, m, fmt.Sprintf(`The person "00u-bob" of %s is not known to this gateway. Invite them to a project with the e-mail address the identity provider sends (as a verified email claim), or let the identity provider's entry provision people: spacefix idp add --provision PROJECT:ROLE.`, idp.srv.URL))

	unverified := idp.claims(client)
	unverified["sub"], unverified["email_verified"] = "00u-mallory", false
	status, m = h.jwtBearer(client, idp.sign(unverified, typIDJAG))
	wantDescription(t, "an unverified e-mail of a known person", status, m, fmt.Sprintf(`The person "00u-mallory" of %s is not known to this gateway. Invite them to a project with the e-mail address the identity provider sends (as a verified email claim), or let the identity provider's entry provision people: spacefix idp add --provision PROJECT:ROLE.`, idp.srv.URL))

	second, _ := h.st.CreateProject(t.Context(), "billing")
	h.st.SetMember(t.Context(), store.Member{ProjectID: second.ID, UserID: h.user.ID, Role: store.RoleViewer})
	status, m = h.jwtBearer(client, idp.sign(idp.claims(client), typIDJAG))
	wantDescription(t, "a person in two projects", status, m, "ada@example.com is a member of 2 projects, and the identity provider's entry names none; the gateway cannot tell which one the app should reach. Give the entry a project: spacefix idp add --provision PROJECT:ROLE.")

	if err := h.st.DeleteIdP(t.Context(), idp.srv.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.CreateIdP(t.Context(), store.IdP{Issuer: idp.srv.URL, ProvisionProjectID: second.ID, ProvisionRole: store.RoleViewer}); err != nil {
		t.Fatal(err)
	}
	status, m = h.jwtBearer(client, idp.sign(stranger(), typIDJAG))
	if status != http.StatusOK || m["scope"] != ScopeRead {
		t.Fatalf("a provisioned viewer = %d %v; want 200 with mcp:read only", status, m)
	}
	bob, _, err := h.st.UserByEmail(t.Context(), "bob@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if mem, err := h.st.Member(t.Context(), second.ID, bob.ID); err != nil || mem.Role != store.RoleViewer {
		t.Errorf("bob's membership of billing = %+v, %v; want viewer", mem, err)
	}
	g, err := h.s.Verify(t.Context(), m["access_token"].(string), base+"/mcp")
	if err != nil || g.ProjectID != second.ID || g.Write {
		t.Errorf("bob's token = %+v, %v; want read-only in billing", g, err)
	}
	unverified["jti"] = rand.Text()
	status, m = h.jwtBearer(client, idp.sign(unverified, typIDJAG))
	wantDescription(t, "provisioning over an existing address", status, m, `A person with the e-mail "ada@example.com" exists already, and the identity provider does not mark the address verified, so the gateway will not treat them as one. Mark email_verified at the identity provider.`)
}

// TestRegisterAssertionOnly: a client registered for the JWT bearer grant
// alone needs no redirect URI; one for the code grant still does.
func TestRegisterAssertionOnly(t *testing.T) {
	h := newHarness(t)
	code, m := h.register(`{"client_name":"Agent","grant_types":["` + GrantJWTBearer + `"],"token_endpoint_auth_method":"client_secret_basic"}`)
	if code != http.StatusCreated || m["client_secret"] == nil {
		t.Errorf("register a jwt-bearer client = %d %v; want 201 with a secret", code, m)
	}
	code, m = h.register(`{"client_name":"Agent","grant_types":["authorization_code","` + GrantJWTBearer + `"]}`)
	if code != http.StatusBadRequest || m["error_description"] != "redirect_uris must list at least one URI." {
		t.Errorf("register a code client without redirect URIs = %d %v", code, m)
	}
}

// TestJWTBearerJWKSURI: an entry with its own jwks_uri is fetched there,
// without the IdP's metadata; a metadata document naming another issuer is
// not trusted for keys.
func TestJWTBearerJWKSURI(t *testing.T) {
	h, idp, client := enterprise(t, func(e *store.IdP) { e.JWKSURI = "" })
	if err := h.st.DeleteIdP(t.Context(), idp.srv.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.CreateIdP(t.Context(), store.IdP{Issuer: idp.srv.URL, JWKSURI: idp.srv.URL + "/jwks"}); err != nil {
		t.Fatal(err)
	}
	if status, m := h.jwtBearer(client, idp.sign(idp.claims(client), typIDJAG)); status != http.StatusOK {
		t.Errorf("with a jwks_uri = %d %v", status, m)
	}

	// An issuer whose metadata names the first IdP as its issuer.
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": idp.srv.URL, "jwks_uri": idp.srv.URL + "/jwks"})
	}))
	t.Cleanup(liar.Close)
	if _, err := h.st.CreateIdP(t.Context(), store.IdP{Issuer: liar.URL}); err != nil {
		t.Fatal(err)
	}
	c := idp.claims(client)
	c["iss"] = liar.URL
	status, m := h.jwtBearer(client, idp.sign(c, typIDJAG))
	wantDescription(t, "metadata of another issuer", status, m, fmt.Sprintf("The gateway could not fetch the signing keys of %s. Try again later; if it keeps failing, the gateway's log says why.", liar.URL))
	if !strings.Contains(h.logs.String(), "identity provider keys not fetched") || !strings.Contains(h.logs.String(), "names issuer") {
		t.Errorf("the log does not say why:\n%s", h.logs.String())
	}
}

// TestJWTBearerScope: the token's scope is the ID-JAG's, narrowed by the
// request's scope parameter, never widened by it.
func TestJWTBearerScope(t *testing.T) {
	h, idp, client := enterprise(t, nil)
	for _, tc := range []struct{ claim, asked, want string }{
		{"mcp:read mcp:write", "", ScopeAll},
		{"mcp:read mcp:write", "mcp:read", ScopeRead},
		{"mcp:read", "mcp:read mcp:write", ScopeRead},
		{"openid profile", "", ScopeAll},
	} {
		c := idp.claims(client)
		c["scope"] = tc.claim
		form := url.Values{"grant_type": {GrantJWTBearer}, "client_id": {client}, "assertion": {idp.sign(c, typIDJAG)}}
		if tc.asked != "" {
			form.Set("scope", tc.asked)
		}
		if status, m := h.post(TokenPath, form); status != http.StatusOK || m["scope"] != tc.want {
			t.Errorf("ID-JAG scope %q, asked %q = %d %v; want scope %q", tc.claim, tc.asked, status, m, tc.want)
		}
	}
}
