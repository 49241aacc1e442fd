package gateway

import (
	"net/http"
	"strings"

	"github.com/spacefix/spacefix/internal/identity"
)

// JWKSPath is where the public keys of the gateway's identity assertions
// are published, for any verifier (docs/identity.md).
const JWKSPath = "/.well-known/jwks.json"

// newIdentity builds the signer of per-call identity assertions; Start
// starts it. Its iss is the gateway's public URL as agents and clients
// use it.
func (g *Gateway) newIdentity() *identity.Signer {
	return identity.New(identity.Options{
		Store:  g.store,
		Issuer: func() string { return strings.TrimRight(g.URL(), "/") },
		Log:    g.log,
	})
}

// Identity returns the signer of per-call identity assertions.
func (g *Gateway) Identity() *identity.Signer { return g.identity }

// serveJWKS publishes the signing keys: public, cached five minutes (a
// key is published a whole rotation period before it signs, so a cached
// copy always knows the key of a fresh token).
func (g *Gateway) serveJWKS(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Write(g.identity.JWKS())
}
