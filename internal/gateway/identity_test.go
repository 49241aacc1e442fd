package gateway

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/spacefix/spacefix/internal/identity"
	"github.com/spacefix/spacefix/internal/oauth"
	"github.com/spacefix/spacefix/internal/secrets"
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

// A gateway on SQLite seals its identity signing keys with the secret key
// file beside the database: the store holds none in the clear, the next
// start signs with the same key, and a start with another key file stops
// with what to do.
func TestIdentityKeysSealed(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "spacefix.db")
	g, _, err := newOn(t, Config{}, openSQLite(t, db)) // Close closes the store
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	kid := g.Identity().KeyID()
	g.Close()
	st := openSQLite(t, db)
	raw, err := st.Meta(t.Context(), identity.MetaKeys)
	if err != nil || strings.Contains(raw, `"private"`) || strings.Count(raw, `"sealed"`) != 2 {
		t.Fatalf("stored identity keys (%v): want the current and next key sealed, none in the clear", err)
	}

	g2, _, err := newOn(t, Config{}, openSQLite(t, db))
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Start(); err != nil {
		t.Fatalf("second start: %v", err)
	}
	if g2.Identity().KeyID() != kid {
		t.Errorf("second start signs with %s, want %s", g2.Identity().KeyID(), kid)
	}
	g2.Close()

	other := filepath.Join(dir, "other.key")
	if err := os.WriteFile(other, []byte(secrets.NewKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g3, _, err := newOn(t, Config{SecretKeyFile: other}, openSQLite(t, db))
	if err != nil {
		t.Fatal(err)
	}
	err = g3.Start()
	if !errors.Is(err, identity.ErrSealed) || !strings.Contains(err.Error(), "give it the file the other gateways use; if that file is lost, run spacefix identity reset") {
		t.Errorf("start with another key file: %v; want ErrSealed and what to do", err)
	}

	// The default file deleted: the next start makes a new one, and new
	// keys, with a WARN, rather than not starting.
	if err := os.Remove(filepath.Join(dir, "secret.key")); err != nil {
		t.Fatal(err)
	}
	g4, logs, err := newOn(t, Config{}, openSQLite(t, db))
	if err != nil {
		t.Fatal(err)
	}
	if err := g4.Start(); err != nil {
		t.Fatalf("start after the key file was deleted: %v", err)
	}
	if g4.Identity().KeyID() == kid || g4.Identity().KeyID() == "" {
		t.Errorf("after the key file was deleted the key is %q (was %s); want a new one", g4.Identity().KeyID(), kid)
	}
	if want := `level=WARN msg="the identity signing keys were sealed with a secret key file that is gone (a new one was made at this start): made new keys; tokens signed with the old ones no longer verify"`; !strings.Contains(logs.String(), want) {
		t.Errorf("log:\n%s\nwant: %s", logs.String(), want)
	}
}
