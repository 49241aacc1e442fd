package mcpfront

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/spacefix/spacefix/internal/oauth"
)

// What a client reads when a DPoP-bound token and its proof do not match.
const (
	msgBoundNeedsProof = "This OAuth token is bound to a DPoP key: send it as Authorization: DPoP <token> with a DPoP proof (RFC 9449), not as a Bearer token."
	msgWrongProofKey   = "The DPoP proof is signed by a key this OAuth token is not bound to."
	msgUnboundAsDPoP   = "This OAuth token is not bound to a DPoP key: send it as Authorization: Bearer <token>."
)

// proofKey carries the thumbprint of the key whose DPoP proof came with the
// request, from dpopScheme to verifyOAuth (go-sdk's bearer check sits
// between them and knows only Bearer).
type proofKey struct{}

// dpopScheme accepts Authorization: DPoP <token> with a DPoP proof: it
// checks the proof (htm, htu of the MCP endpoint, ath of the token, jti
// once across gateways) and hands the request on with the token as a
// Bearer one and the proof's key beside it, for verifyOAuth to match with
// the key the token is bound to. A refused proof is a 401 with the DPoP
// challenge saying why.
func (f *Front) dpopScheme(next http.Handler) http.Handler {
	if f.oauth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "DPoP") {
			next.ServeHTTP(w, r)
			return
		}
		token = strings.TrimSpace(token)
		jkt, err := f.oauth.ResourceProof(r, token)
		var pe *oauth.ProofError
		switch {
		case errors.As(err, &pe):
			if cw, ok := w.(*challengeWriter); ok {
				w = cw.ResponseWriter // this 401 has its own challenge
			}
			if n := f.oauth.Nonce(); n != "" {
				w.Header().Set(oauth.DPoPNonceHeader, n)
			}
			w.Header().Set("WWW-Authenticate", f.oauth.DPoPChallenge(r, pe))
			refuse(w, http.StatusUnauthorized, pe.Description)
			return
		case err != nil:
			f.log.Error("check a DPoP proof", "err", err)
			refuse(w, http.StatusServiceUnavailable, "The gateway could not check the DPoP proof; try again.")
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), proofKey{}, jkt))
		r.Header = r.Header.Clone()
		r.Header.Set("Authorization", "Bearer "+token)
		next.ServeHTTP(w, r)
	})
}

// checkBinding matches a token's DPoP binding with the request's proof.
func checkBinding(r *http.Request, g oauth.Grant) error {
	jkt, proved := r.Context().Value(proofKey{}).(string)
	switch {
	case g.JKT == "" && proved:
		return keyError(msgUnboundAsDPoP)
	case g.JKT != "" && !proved:
		return keyError(msgBoundNeedsProof)
	case g.JKT != jkt:
		return keyError(msgWrongProofKey)
	}
	return nil
}
