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
// use it. Its private keys are sealed in the store with the secret key
// file; a gateway with a key in memory only (an embedding program's store
// without a file) keeps them in the clear, as keys sealed with it would
// not open after a restart.
func (g *Gateway) newIdentity() *identity.Signer {
	opts := identity.Options{
		Store:  g.store,
		Issuer: func() string { return strings.TrimRight(g.URL(), "/") },
		Log:    g.log,
	}
	if g.boxFile {
		opts.Box = g.box
	}
	return identity.New(opts)
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
