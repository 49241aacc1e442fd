package oauth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/spacefix/spacefix/internal/store"
)

// GrantJWTBearer is RFC 7523's grant type, with which a client presents an
// Identity Assertion JWT Authorization Grant (ID-JAG) from a trusted
// identity provider (draft-ietf-oauth-identity-assertion-authz-grant; the
// MCP extension io.modelcontextprotocol/enterprise-managed-authorization).
const GrantJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// typIDJAG is the typ header an ID-JAG carries.
const typIDJAG = "oauth-id-jag+jwt"

// assertionSkew is how far the clocks of the gateway and an identity
// provider may differ.
const assertionSkew = time.Minute

// assertionAlgs are the signature algorithms accepted: asymmetric only, so
// that no shared secret (or "none") can forge a person.
var assertionAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// idJAGClaims are the claims of an ID-JAG the gateway reads.
type idJAGClaims struct {
	jwt.Claims
	ClientID      string          `json:"client_id"`
	Resource      json.RawMessage `json:"resource"` // a string or an array of strings
	Scope         string          `json:"scope"`
	Email         string          `json:"email"`
	EmailVerified any             `json:"email_verified"` // true or "true"
}

func badAssertion(format string, args ...any) error {
	return oauthError{"invalid_grant", fmt.Sprintf(format, args...)}
}

// jwtBearer is the JWT bearer grant with an ID-JAG: every check the draft
// and RFC 7521 section 5.2 ask for, then the person, their project and
// what they may, then an access token (no refresh token: the client asks
// the identity provider for a new ID-JAG instead, as the extension says).
func (s *Server) jwtBearer(r *http.Request, c *client, jkt string) (*tokenResponse, error) {
	raw := r.PostFormValue("assertion")
	if raw == "" {
		return nil, oauthError{"invalid_request", "assertion is missing: send the ID-JAG from your identity provider."}
	}
	tok, err := jwt.ParseSigned(raw, assertionAlgs)
	if err != nil {
		if alg := headerAlg(raw); alg != "" && !slices.Contains(assertionAlgs, jose.SignatureAlgorithm(alg)) {
			return nil, badAssertion("The assertion is signed with %q; the gateway accepts only asymmetric algorithms (RS256, PS256, ES256, EdDSA and their kin).", alg)
		}
		return nil, badAssertion("The assertion is not a signed JWT (JWS compact serialization).")
	}
	if len(tok.Headers) != 1 {
		return nil, badAssertion("The assertion must have exactly one signature.")
	}
	h := tok.Headers[0]
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); !strings.EqualFold(typ, typIDJAG) {
		return nil, badAssertion("The assertion's typ header is %q; an Identity Assertion JWT Authorization Grant has %q.", typ, typIDJAG)
	}
	var unverified idJAGClaims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, badAssertion("The assertion's claims are not a JSON object.")
	}
	p, err := s.st.IdP(r.Context(), unverified.Issuer)
	if errors.Is(err, store.ErrNotFound) {
		return nil, badAssertion("The assertion's issuer %q is not a trusted identity provider of this gateway. An admin adds it with: spacefix idp add --issuer URL", unverified.Issuer)
	}
	if err != nil {
		return nil, err
	}
	key, err := s.idpKeys.key(r.Context(), p, h.KeyID)
	if errors.Is(err, errIdPFetch) {
		s.log.Warn("identity provider keys not fetched", "issuer", p.Issuer, "err", err)
		return nil, badAssertion("The gateway could not fetch the signing keys of %s. Try again later; if it keeps failing, the gateway's log says why.", p.Issuer)
	}
	if err != nil {
		return nil, err
	}
	var cl idJAGClaims
	if key == nil || tok.Claims(key.Key, &cl) != nil {
		return nil, badAssertion("The assertion's signature does not verify with the keys of %s (kid %q).", p.Issuer, h.KeyID)
	}
	if err := s.checkIDJAG(r, c, p, &cl); err != nil {
		return nil, err
	}
	fresh, err := s.st.UseOnce(r.Context(), "id-jag "+p.Issuer+" "+cl.ID, cl.Expiry.Time().Add(assertionSkew))
	if err != nil {
		return nil, err
	}
	if !fresh {
		return nil, badAssertion("The assertion (jti %q) was used already. Get a new one from the identity provider.", cl.ID)
	}
	return s.enterpriseGrant(r, c, p, &cl, jkt)
}

// checkIDJAG checks the verified claims, one description per check.
func (s *Server) checkIDJAG(r *http.Request, c *client, p store.IdP, cl *idJAGClaims) error {
	for _, m := range []struct{ name, v string }{{"sub", cl.Subject}, {"jti", cl.ID}, {"client_id", cl.ClientID}} {
		if m.v == "" {
			return badAssertion("The assertion lacks the %s claim.", m.name)
		}
	}
	if cl.Expiry == nil || cl.IssuedAt == nil {
		return badAssertion("The assertion lacks the exp or iat claim.")
	}
	if iss := s.Issuer(r); !slices.Contains(cl.Audience, iss) {
		return badAssertion("The assertion's aud must be this gateway's issuer %s.", iss)
	}
	if cl.ClientID != c.ID {
		return badAssertion("The assertion was issued for client %q, not for the client that presented it.", cl.ClientID)
	}
	if len(p.AllowedClients) > 0 && !slices.Contains(p.AllowedClients, c.ID) {
		return badAssertion("The identity provider %s is not allowed to sign in client %q here. An admin allows it with --allowed-client.", p.Issuer, c.ID)
	}
	if res := s.Resource(r); !resourceIs(cl.Resource, res) {
		return badAssertion("The assertion's resource must be this gateway's MCP endpoint %s.", res)
	}
	now := s.now()
	if !now.Before(cl.Expiry.Time().Add(assertionSkew)) {
		return badAssertion("The assertion expired at %s. Get a new one from the identity provider.", cl.Expiry.Time().UTC().Format(time.RFC3339))
	}
	if cl.IssuedAt.Time().After(now.Add(assertionSkew)) {
		return badAssertion("The assertion's iat is in the future; check the identity provider's clock.")
	}
	if cl.NotBefore != nil && cl.NotBefore.Time().After(now.Add(assertionSkew)) {
		return badAssertion("The assertion is not valid yet (nbf).")
	}
	return nil
}

// resourceIs reports whether an ID-JAG's resource claim (absent, a string
// or an array of strings) names only the MCP endpoint.
func resourceIs(raw json.RawMessage, res string) bool {
	if len(raw) == 0 || string(raw) == "null" {
		return true
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one == res
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return !slices.ContainsFunc(many, func(v string) bool { return v != res })
	}
	return false
}

// headerAlg reads the alg of a JWS's protected header, only to say which
// algorithm was refused.
func headerAlg(raw string) string {
	head, _, ok := strings.Cut(raw, ".")
	if !ok {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return ""
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(b, &h) != nil {
		return ""
	}
	return h.Alg
}
