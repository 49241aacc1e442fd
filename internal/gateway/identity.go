package gateway

import (
	"context"
	"errors"
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

// startIdentity starts the signer. On SQLite, when this start made the
// secret key file because there was none, keys sealed with the lost one
// cannot be read by anyone: new keys are made, with a WARN, rather than
// stopping a single gateway whose file was deleted. Anywhere else a key
// file that does not open the keys stops the start (another gateway may
// hold the right file).
func (g *Gateway) startIdentity(ctx context.Context) error {
	err := g.identity.Start(ctx)
	if !errors.Is(err, identity.ErrSealed) || !g.boxCreated {
		return err
	}
	g.log.Warn("the identity signing keys were sealed with a secret key file that is gone (a new one was made at this start): made new keys; tokens signed with the old ones no longer verify")
	if err := g.identity.Reset(ctx); err != nil {
		return err
	}
	return g.identity.Start(ctx)
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
