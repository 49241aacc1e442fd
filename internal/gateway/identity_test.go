package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/spacefix/spacefix/internal/identity"
	"github.com/spacefix/spacefix/internal/oauth"
)

// A started gateway publishes its signing keys at /.well-known/jwks.json
// (public, cached five minutes), names them in the OAuth metadata, and a
// token its signer makes verifies against them with go-jose, iss being the
// gateway's URL.
func TestJWKS(t *testing.T) {
	g, err := New(Config{Addr: "127.0.0.1:0"}, openStore(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	resp, err := http.Get(g.URL() + JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "public, max-age=300" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET %s = %d, Cache-Control %q, Content-Type %q", JWKSPath, resp.StatusCode, resp.Header.Get("Cache-Control"), resp.Header.Get("Content-Type"))
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil || len(set.Keys) != 2 {
		t.Fatalf("JWKS = %s (%v); want the current and the next key", body, err)
	}

	resp, err = http.Get(g.URL() + oauth.ServerMetaPath)
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if want := g.URL() + JWKSPath; meta["jwks_uri"] != want {
		t.Errorf("jwks_uri = %v, want %s", meta["jwks_uri"], want)
	}

	token, err := g.Identity().Sign(identity.Claims{Subject: "key:k1", Audience: "https://orders.example.test", ID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	var claims jwt.Claims
	if err := tok.Claims(set, &claims); err != nil {
		t.Fatalf("token against the served JWKS: %v", err)
	}
	if err := claims.Validate(jwt.Expected{Issuer: g.URL(), AnyAudience: jwt.Audience{"https://orders.example.test"}}); err != nil {
		t.Errorf("claims %+v: %v", claims, err)
	}
}
