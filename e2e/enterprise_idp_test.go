package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Token types of RFC 8693 and the ID-JAG draft.
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeIDJAG     = "urn:ietf:params:oauth:token-type:id-jag"
	tokenTypeIDToken   = "urn:ietf:params:oauth:token-type:id_token"
	grantJWTBearer     = "urn:ietf:params:oauth:grant-type:jwt-bearer"
)

// companyIdP is a company's identity provider on loopback, as Okta or
// Entra would be set up for enterprise-managed authorization: OpenID
// discovery and keys, ID tokens for its people (its sign-in), and a token
// endpoint that exchanges an ID token for an ID-JAG (RFC 8693) naming the
// app's client id at the gateway, which the IdP's admin configured.
type companyIdP struct {
	t   *testing.T
	srv *httptest.Server
	key *ecdsa.PrivateKey

	mu        sync.Mutex
	atGateway map[string]string // the app's client id at the IdP → its client id at the gateway
}

// idpClient is the app's client id at the company's IdP.
const idpClient = "wiki-app"

func newCompanyIdP(t *testing.T) *companyIdP {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	p := &companyIdP{t: t, key: key, atGateway: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": p.srv.URL, "jwks_uri": p.srv.URL + "/keys", "token_endpoint": p.srv.URL + "/token"})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "idp-1", Algorithm: "ES256", Use: "sig"}}})
	})
	mux.HandleFunc("POST /token", p.exchange)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// mapClient records the app's client id at the gateway.
func (p *companyIdP) mapClient(gatewayClient string) {
	p.mu.Lock()
	p.atGateway[idpClient] = gatewayClient
	p.mu.Unlock()
}

func (p *companyIdP) sign(typ string, claims map[string]any) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: p.key},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)).WithHeader("kid", "idp-1"))
	must(p.t, err)
	out, err := jwt.Signed(signer).Claims(claims).Serialize()
	must(p.t, err)
	return out
}

// idToken is what the person's sign-in at the IdP gives the app.
func (p *companyIdP) idToken(sub, email string) string {
	now := time.Now()
	return p.sign("JWT", map[string]any{"iss": p.srv.URL, "sub": sub, "aud": idpClient, "email": email, "email_verified": true,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
}

// exchange is the IdP's RFC 8693 token exchange: an ID token of its own
// for an ID-JAG for the audience (the gateway's issuer).
func (p *companyIdP) exchange(w http.ResponseWriter, r *http.Request) {
	fail := func(desc string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"error": "invalid_request", "error_description": desc})
	}
	if r.PostFormValue("grant_type") != grantTokenExchange || r.PostFormValue("requested_token_type") != tokenTypeIDJAG ||
		r.PostFormValue("subject_token_type") != tokenTypeIDToken {
		fail("not an ID-JAG token exchange")
		return
	}
	tok, err := jwt.ParseSigned(r.PostFormValue("subject_token"), []jose.SignatureAlgorithm{jose.ES256})
	var id jwt.Claims
	var extra struct {
		Email string `json:"email"`
	}
	if err != nil || tok.Claims(&p.key.PublicKey, &id, &extra) != nil || id.ValidateWithLeeway(jwt.Expected{Issuer: p.srv.URL, AnyAudience: jwt.Audience{idpClient}, Time: time.Now()}, time.Minute) != nil {
		fail("the subject token is not an ID token of this IdP for " + idpClient)
		return
	}
	p.mu.Lock()
	client, ok := p.atGateway[idpClient]
	p.mu.Unlock()
	if !ok {
		fail("no client id at " + r.PostFormValue("audience") + " is configured for " + idpClient)
		return
	}
	now := time.Now()
	claims := map[string]any{"iss": p.srv.URL, "sub": id.Subject, "aud": r.PostFormValue("audience"), "client_id": client,
		"jti": rand.Text(), "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "email": extra.Email, "email_verified": true}
	if res := r.PostFormValue("resource"); res != "" {
		claims["resource"] = res
	}
	if sc := r.PostFormValue("scope"); sc != "" {
		claims["scope"] = sc
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"issued_token_type": tokenTypeIDJAG, "access_token": p.sign("oauth-id-jag+jwt", claims),
		"token_type": "N_A", "expires_in": 300, "scope": claims["scope"]})
}

// dpopClientKey is an MCP client's DPoP key, making proofs (RFC 9449).
type dpopClientKey struct {
	t   *testing.T
	key *ecdsa.PrivateKey
}

func newDPoPClientKey(t *testing.T) dpopClientKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	return dpopClientKey{t, k}
}

// proof is a DPoP proof for htm and htu; with token, its ath.
func (k dpopClientKey) proof(htm, htu, token string) string { return k.proofNonce(htm, htu, token, "") }

// proofNonce is proof with the nonce the server handed out.
func (k dpopClientKey) proofNonce(htm, htu, token, nonce string) string {
	claims := map[string]any{"jti": rand.Text(), "htm": htm, "htu": htu, "iat": time.Now().Unix()}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		claims["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.key}, (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	must(k.t, err)
	out, err := jwt.Signed(signer).Claims(claims).Serialize()
	must(k.t, err)
	return out
}

// dpopTransport sends an access token with the DPoP scheme and a fresh
// proof on every request, as a DPoP-capable MCP client does.
type dpopTransport struct {
	token, endpoint string
	key             dpopClientKey
}

func (d dpopTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "DPoP "+d.token)
	r.Header.Set("DPoP", d.key.proof(r.Method, strings.TrimSuffix(d.endpoint, "/"), d.token))
	return http.DefaultTransport.RoundTrip(r)
}
