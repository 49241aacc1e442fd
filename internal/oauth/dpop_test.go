package oauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/postgres"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/testenv"
)

// dpopKey is a client's DPoP key pair, making proofs as RFC 9449 says.
type dpopKey struct {
	t   testing.TB
	key *ecdsa.PrivateKey
}

func newDPoPKey(t testing.TB) dpopKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return dpopKey{t, k}
}

// jkt is the key's JWK SHA-256 thumbprint.
func (k dpopKey) jkt() string {
	jwk := jose.JSONWebKey{Key: &k.key.PublicKey}
	b, _ := jwk.Thumbprint(crypto.SHA256)
	return base64.RawURLEncoding.EncodeToString(b)
}

// proof makes a proof for a request; token, when set, is hashed into ath.
// edit may change the claims before signing.
func (k dpopKey) proof(htm, htu, token, nonce string, edit func(map[string]any)) string {
	claims := map[string]any{"jti": rand.Text(), "htm": htm, "htu": htu, "iat": time.Now().Unix()}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		claims["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	if edit != nil {
		edit(claims)
	}
	return k.sign(claims, "dpop+jwt", true)
}

func (k dpopKey) sign(claims map[string]any, typ string, embed bool) string {
	opts := (&jose.SignerOptions{EmbedJWK: embed}).WithType(jose.ContentType(typ))
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.key}, opts)
	if err != nil {
		k.t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		k.t.Fatal(err)
	}
	out, _ := jws.CompactSerialize()
	return out
}

// postDPoP posts a token request with a DPoP header (none when proof is "").
func (h *harness) postDPoP(form url.Values, proof string) (int, map[string]any, http.Header) {
	h.t.Helper()
	req, _ := http.NewRequest("POST", h.srv.URL+TokenPath, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if proof != "" {
		req.Header.Set(DPoPHeader, proof)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	status, m := decode(h.t, resp)
	return status, m, resp.Header
}

func (h *harness) codeForm(client string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "client_id": {client}, "code": {h.code(client, true)},
		"code_verifier": {verifier}, "redirect_uri": {"http://127.0.0.1:3000/callback"}}
}

func wantProofError(t *testing.T, what string, status int, m map[string]any, code, desc string) {
	t.Helper()
	if status != http.StatusBadRequest || m["error"] != code || m["error_description"] != desc {
		t.Errorf("%s = %d %v;\nwant 400 %s %q", what, status, m, code, desc)
	}
}

// TestDPoPTokens: a token request with a proof gets a DPoP token bound to
// the key, and a public client's refresh token works only with a proof by
// that key (a refusal does not spend it).
func TestDPoPTokens(t *testing.T) {
	h := newHarness(t)
	if m := getJSON(t, h.srv.URL+ServerMetaPath); !strings.Contains(fmt.Sprint(m["dpop_signing_alg_values_supported"]), "ES256") {
		t.Errorf("dpop_signing_alg_values_supported = %v; want ES256 among them", m["dpop_signing_alg_values_supported"])
	}
	client, key := h.publicClient(), newDPoPKey(t)
	htu := base + TokenPath
	status, m, _ := h.postDPoP(h.codeForm(client), key.proof("POST", htu, "", "", nil))
	if status != http.StatusOK || m["token_type"] != "DPoP" || m["refresh_token"] == nil {
		t.Fatalf("code exchange with a proof = %d %v; want a DPoP token", status, m)
	}
	g, err := h.s.Verify(t.Context(), m["access_token"].(string), base+"/mcp")
	if err != nil || g.JKT != key.jkt() {
		t.Errorf("Verify = %+v, %v; want bound to %s", g, err, key.jkt())
	}
	refresh := url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {m["refresh_token"].(string)}}
	status, m2, _ := h.postDPoP(refresh, "")
	wantProofError(t, "refresh without a proof", status, m2, "invalid_dpop_proof", "The refresh token is bound to a DPoP key; send a DPoP proof signed with that key.")
	status, m2, _ = h.postDPoP(refresh, newDPoPKey(t).proof("POST", htu, "", "", nil))
	wantProofError(t, "refresh with another key", status, m2, "invalid_dpop_proof", "The refresh token is bound to a DPoP key; send a DPoP proof signed with that key.")
	status, m2, _ = h.postDPoP(refresh, key.proof("POST", htu, "", "", nil))
	if status != http.StatusOK || m2["token_type"] != "DPoP" {
		t.Errorf("refresh with the key = %d %v; want a new DPoP token", status, m2)
	}
	status, bearer, _ := h.postDPoP(h.codeForm(h.publicClient()), "")
	if status != http.StatusOK || bearer["token_type"] != "Bearer" {
		t.Errorf("code exchange without a proof = %d %v; want a Bearer token", status, bearer)
	}
}

// TestDPoPProofChecks: each check of a proof refuses with its own
// description, and a client registered with dpop_bound_access_tokens must
// send one.
func TestDPoPProofChecks(t *testing.T) {
	h := newHarness(t)
	client, key := h.publicClient(), newDPoPKey(t)
	htu := base + TokenPath
	replayed := key.proof("POST", htu, "", "", nil)
	if status, m, _ := h.postDPoP(h.codeForm(client), replayed); status != http.StatusOK {
		t.Fatalf("first use = %d %v", status, m)
	}
	old := time.Now().Add(-6 * time.Minute).Unix()
	for _, tt := range []struct{ name, proof, want string }{
		{"replayed", replayed, fmt.Sprintf("The DPoP proof (jti %q) was used already; make a new proof for every request.", jtiOf(replayed))},
		{"typ", key.sign(map[string]any{"jti": "a", "htm": "POST", "htu": htu, "iat": time.Now().Unix()}, "JWT", true), `The DPoP proof's typ header is "JWT"; it must be "dpop+jwt".`},
		{"no jwk", key.sign(map[string]any{"jti": "b", "htm": "POST", "htu": htu, "iat": time.Now().Unix()}, "dpop+jwt", false), "The DPoP proof's jwk header must hold the public key it is signed with."},
		{"htm", key.proof("GET", htu, "", "", nil), `The DPoP proof's htm is "GET"; this request is POST.`},
		{"htu", key.proof("POST", "https://other.example/oauth/token", "", "", nil), `The DPoP proof's htu is "https://other.example/oauth/token"; this request is to https://gw.example/oauth/token.`},
		{"iat", key.proof("POST", htu, "", "", func(c map[string]any) { c["iat"] = old }), "The DPoP proof's iat is more than 5 minutes from the gateway's clock; make a new proof (and check the client's clock)."},
		{"no jti", key.proof("POST", htu, "", "", func(c map[string]any) { delete(c, "jti") }), "The DPoP proof lacks the jti or iat claim."},
		{"not a JWT", "nope", "The DPoP proof is not a JWT signed with one of ES256 ES384 PS256 RS256 EdDSA."},
		{"foreign signature", foreignSigned(t, key, htu), "The DPoP proof's signature does not verify with its own jwk."},
	} {
		status, m, _ := h.postDPoP(h.codeForm(client), tt.proof)
		wantProofError(t, tt.name, status, m, "invalid_dpop_proof", tt.want)
	}
	code, reg := h.register(`{"client_name":"Bound","redirect_uris":["http://127.0.0.1:3000/callback"],"token_endpoint_auth_method":"none","dpop_bound_access_tokens":true}`)
	if code != http.StatusCreated {
		t.Fatalf("register = %d %v", code, reg)
	}
	bound := reg["client_id"].(string)
	status, m, _ := h.postDPoP(h.codeForm(bound), "")
	wantProofError(t, "a dpop_bound_access_tokens client without a proof", status, m, "invalid_dpop_proof",
		"This client registered dpop_bound_access_tokens: send a DPoP proof with the token request.")
}

// foreignSigned is a proof whose jwk header is key's but whose signature
// is another key's.
func foreignSigned(t *testing.T, key dpopKey, htu string) string {
	other := newDPoPKey(t)
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: other.key},
		(&jose.SignerOptions{ExtraHeaders: map[jose.HeaderKey]any{"jwk": jose.JSONWebKey{Key: &key.key.PublicKey}}}).WithType("dpop+jwt"))
	payload, _ := json.Marshal(map[string]any{"jti": "c", "htm": "POST", "htu": htu, "iat": time.Now().Unix()})
	jws, _ := signer.Sign(payload)
	out, _ := jws.CompactSerialize()
	return out
}

func jtiOf(jws string) string {
	parts := strings.Split(jws, ".")
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var c struct{ JTI string }
	json.Unmarshal(b, &c)
	return c.JTI
}

// TestDPoPNonce: with nonces on, a proof without one gets use_dpop_nonce
// and a DPoP-Nonce header; the retry with it succeeds.
func TestDPoPNonce(t *testing.T) {
	box, err := secrets.New(make([]byte, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(o *Options) { o.DPoPNonces = box })
	client, key := h.publicClient(), newDPoPKey(t)
	form := h.codeForm(client)
	status, m, hdr := h.postDPoP(form, key.proof("POST", base+TokenPath, "", "", nil))
	wantProofError(t, "a proof without a nonce", status, m, "use_dpop_nonce", "Make a new DPoP proof with the nonce in the DPoP-Nonce header.")
	nonce := hdr.Get(DPoPNonceHeader)
	if nonce == "" {
		t.Fatal("no DPoP-Nonce header")
	}
	status, m, _ = h.postDPoP(form, key.proof("POST", base+TokenPath, "", "made-up", nil))
	wantProofError(t, "a made-up nonce", status, m, "use_dpop_nonce", "Make a new DPoP proof with the nonce in the DPoP-Nonce header.")
	if status, m, _ := h.postDPoP(form, key.proof("POST", base+TokenPath, "", nonce, nil)); status != http.StatusOK || m["token_type"] != "DPoP" {
		t.Errorf("with the nonce = %d %v", status, m)
	}
}

// TestDPoPReplayAcrossGateways: a proof one gateway accepted is refused by
// another on the same store (two connections to one SQLite file, and to
// one PostgreSQL schema when SPACEFIX_TEST_DATABASE_URL is set).
func TestDPoPReplayAcrossGateways(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s.db")
		testReplayAcross(t, func() store.Store {
			st, err := sqlite.Open(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			return st
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.Postgres(t)
		testReplayAcross(t, func() store.Store {
			st, err := postgres.Open(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			return st
		})
	})
}

func testReplayAcross(t *testing.T, open func() store.Store) {
	var gws [2]*Server
	for i := range gws {
		st := open()
		t.Cleanup(func() { st.Close() })
		gws[i] = New(Options{Store: st, BaseURL: func(*http.Request) string { return base }})
	}
	key := newDPoPKey(t)
	proof := key.proof("POST", base+TokenPath, "", "", nil)
	check := func(s *Server) error {
		r, _ := http.NewRequestWithContext(context.Background(), "POST", base+TokenPath, nil)
		r.Header.Set(DPoPHeader, proof)
		_, err := s.checkProof(r.Context(), r, proofRequest{method: "POST", url: base + TokenPath})
		return err
	}
	if err := check(gws[0]); err != nil {
		t.Fatalf("first gateway: %v", err)
	}
	want := fmt.Sprintf("The DPoP proof (jti %q) was used already; make a new proof for every request.", jtiOf(proof))
	if err := check(gws[1]); err == nil || err.Error() != want {
		t.Errorf("second gateway: %v; want %q", err, want)
	}
}
