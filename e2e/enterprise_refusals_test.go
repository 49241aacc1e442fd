package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/spacefix/spacefix/internal/users"
)

// jagClaims are a valid ID-JAG's claims for the enterprise's app.
func (e *enterprise) jagClaims() map[string]any {
	now := time.Now()
	return map[string]any{"iss": e.idp.srv.URL, "sub": "00u-ann", "aud": e.issuer, "client_id": e.client, "resource": e.issuer + "/mcp",
		"jti": rand.Text(), "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "scope": "mcp:read mcp:write",
		"email": "ann@example.com", "email_verified": true}
}

// with returns a valid ID-JAG's claims with one changed (nil: removed).
func (e *enterprise) with(k string, v any) map[string]any {
	c := e.jagClaims()
	if v == nil {
		delete(c, k)
	} else {
		c[k] = v
	}
	return c
}

func signJAG(t *testing.T, k jose.SigningKey, typ string, claims map[string]any) string {
	signer, err := jose.NewSigner(k, (&jose.SignerOptions{}).WithType(jose.ContentType(typ)).WithHeader("kid", "idp-1"))
	must(t, err)
	out, err := jwt.Signed(signer).Claims(claims).Serialize()
	must(t, err)
	return out
}

// TestEnterpriseRefusals: against a real gateway, every check of an
// ID-JAG refuses with invalid_grant and its own description, and none
// leaves a connected app behind.
func TestEnterpriseRefusals(t *testing.T) {
	t.Parallel()
	e := newEnterprise(t)
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	old := time.Now().Add(-time.Hour).Unix()
	replayed := e.idJAG("00u-ann", "ann@example.com")
	if status, m := e.token(replayed, ""); status != http.StatusOK {
		t.Fatalf("a valid ID-JAG = %d %v", status, m)
	}
	mcpURL := e.issuer + "/mcp"
	for _, tc := range []struct{ what, jag, want string }{
		{"typ", e.idp.sign("JWT", e.jagClaims()), `The assertion's typ header is "JWT"; an Identity Assertion JWT Authorization Grant has "oauth-id-jag+jwt".`},
		{"a symmetric algorithm", signJAG(t, jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, "oauth-id-jag+jwt", e.jagClaims()),
			`The assertion is signed with "HS256"; the gateway accepts only asymmetric algorithms (RS256, PS256, ES256, EdDSA and their kin).`},
		{"an untrusted issuer", e.idp.sign("oauth-id-jag+jwt", e.with("iss", "https://idp.evil.example")),
			`The assertion's issuer "https://idp.evil.example" is not a trusted identity provider of this gateway. An admin adds it with: spacefix idp add --issuer URL`},
		{"another key", signJAG(t, jose.SigningKey{Algorithm: jose.ES256, Key: other}, "oauth-id-jag+jwt", e.jagClaims()),
			fmt.Sprintf(`The assertion's signature does not verify with the keys of %s (kid "idp-1").`, e.idp.srv.URL)},
		{"aud", e.idp.sign("oauth-id-jag+jwt", e.with("aud", "https://other-gateway.example")), "The assertion's aud must be this gateway's issuer " + e.issuer + "."},
		{"client_id", e.idp.sign("oauth-id-jag+jwt", e.with("client_id", "client_someone_else")),
			`The assertion was issued for client "client_someone_else", not for the client that presented it.`},
		{"resource", e.idp.sign("oauth-id-jag+jwt", e.with("resource", "https://other-gateway.example/mcp")), "The assertion's resource must be this gateway's MCP endpoint " + mcpURL + "."},
		{"exp", e.idp.sign("oauth-id-jag+jwt", e.with("exp", old)),
			"The assertion expired at " + time.Unix(old, 0).UTC().Format(time.RFC3339) + ". Get a new one from the identity provider."},
		{"iat", e.idp.sign("oauth-id-jag+jwt", e.with("iat", time.Now().Add(time.Hour).Unix())), "The assertion's iat is in the future; check the identity provider's clock."},
		{"no jti", e.idp.sign("oauth-id-jag+jwt", e.with("jti", nil)), "The assertion lacks the jti claim."},
		{"jti used", replayed, "was used already. Get a new one from the identity provider."},
	} {
		status, m := e.token(tc.jag, "")
		if desc, _ := m["error_description"].(string); status != http.StatusBadRequest || m["error"] != "invalid_grant" || !strings.HasSuffix(desc, tc.want) {
			t.Errorf("%s = %d %v;\nwant 400 invalid_grant %q", tc.what, status, m, tc.want)
		}
	}

	// An entry that lists other clients refuses this one.
	_, apiToken, err := users.CreateAPIToken(context.Background(), e.store, "e2e-idp", 0)
	must(t, err)
	for _, rq := range []struct{ method, path, body string }{
		{"DELETE", "/api/idps?issuer=" + e.idp.srv.URL, ""},
		{"POST", "/api/idps", `{"issuer":"` + e.idp.srv.URL + `","allowedClients":["client_someone_else"],"provisionProject":"default","provisionRole":"editor"}`},
	} {
		req, _ := http.NewRequest(rq.method, e.url+rq.path, strings.NewReader(rq.body))
		req.Header.Set("Authorization", "Bearer "+apiToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s = %d", rq.method, rq.path, resp.StatusCode)
		}
	}
	status, m := e.token(e.idJAG("00u-ann", "ann@example.com"), "")
	want := fmt.Sprintf(`The identity provider %s is not allowed to sign in client %q here. An admin allows it with --allowed-client.`, e.idp.srv.URL, e.client)
	if status != http.StatusBadRequest || m["error_description"] != want {
		t.Errorf("a client the entry does not list = %d %v;\nwant %q", status, m, want)
	}
	grants, err := e.store.OAuthGrants(context.Background(), e.project.ID)
	must(t, err)
	if len(grants) != 1 {
		t.Errorf("connected apps = %d; want only the one valid ID-JAG's", len(grants))
	}
}
