package oauth

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// DPoP (RFC 9449): a client proves, with every token request and every
// request to the MCP endpoint, that it holds the private key its tokens
// are bound to, so that a stolen token is useless without the key.

// DPoPHeader is the request header that carries a proof; DPoPNonceHeader
// the answer header that carries a nonce the next proof must include.
const (
	DPoPHeader      = "DPoP"
	DPoPNonceHeader = "DPoP-Nonce"
	typDPoP         = "dpop+jwt"
)

// DPoPAlgs are the proof algorithms accepted, as the metadata and the
// WWW-Authenticate challenge list them.
var DPoPAlgs = []jose.SignatureAlgorithm{jose.ES256, jose.ES384, jose.PS256, jose.RS256, jose.EdDSA}

// Proof lifetimes.
const (
	// proofWindow is how far a proof's iat may be from the gateway's clock
	// (either way), and how long its jti is remembered.
	proofWindow = 5 * time.Minute
	// nonceTTL is how long a nonce the gateway handed out is good for.
	nonceTTL = 5 * time.Minute
)

// dpopAlgsString is DPoPAlgs joined by spaces.
func dpopAlgsString() string {
	names := make([]string, len(DPoPAlgs))
	for i, a := range DPoPAlgs {
		names[i] = string(a)
	}
	return strings.Join(names, " ")
}

// ProofError is a DPoP proof that is refused. Nonce says the proof lacked
// a fresh nonce: the answer carries one (error use_dpop_nonce) so that the
// client can retry at once.
type ProofError struct {
	Description string
	Nonce       bool
}

func (e *ProofError) Error() string { return e.Description }

func badProof(format string, args ...any) error {
	return &ProofError{Description: fmt.Sprintf(format, args...)}
}

// proofRequest is what a proof must match.
type proofRequest struct {
	method, url string
	token       string // the access token it accompanies at the resource; "" at the token endpoint
}

type proofClaims struct {
	jwt.Claims
	Method string `json:"htm"`
	URL    string `json:"htu"`
	ATH    string `json:"ath"`
	Nonce  string `json:"nonce"`
}

// checkProof verifies the DPoP header of r for want and returns the JWK
// SHA-256 thumbprint (RFC 7638) of its key: what tokens are bound to. The
// proof's jti is recorded in the store, so no gateway accepts it again.
func (s *Server) checkProof(ctx context.Context, r *http.Request, want proofRequest) (string, error) {
	values := r.Header.Values(DPoPHeader)
	if len(values) != 1 {
		return "", badProof("Send exactly one DPoP header with a proof, not %d.", len(values))
	}
	tok, err := jwt.ParseSigned(values[0], DPoPAlgs)
	if err != nil || len(tok.Headers) != 1 {
		return "", badProof("The DPoP proof is not a JWT signed with one of %s.", dpopAlgsString())
	}
	h := tok.Headers[0]
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != typDPoP {
		return "", badProof("The DPoP proof's typ header is %q; it must be %q.", typ, typDPoP)
	}
	if h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() || !h.JSONWebKey.Valid() {
		return "", badProof("The DPoP proof's jwk header must hold the public key it is signed with.")
	}
	var cl proofClaims
	if err := tok.Claims(h.JSONWebKey.Key, &cl); err != nil {
		return "", badProof("The DPoP proof's signature does not verify with its own jwk.")
	}
	if cl.ID == "" || cl.IssuedAt == nil {
		return "", badProof("The DPoP proof lacks the jti or iat claim.")
	}
	if cl.Method != want.method {
		return "", badProof("The DPoP proof's htm is %q; this request is %s.", cl.Method, want.method)
	}
	if !sameURL(cl.URL, want.url) {
		return "", badProof("The DPoP proof's htu is %q; this request is to %s.", cl.URL, want.url)
	}
	now := s.now()
	if iat := cl.IssuedAt.Time(); iat.Before(now.Add(-proofWindow)) || iat.After(now.Add(proofWindow)) {
		return "", badProof("The DPoP proof's iat is more than 5 minutes from the gateway's clock; make a new proof (and check the client's clock).")
	}
	if want.token != "" {
		sum := sha256.Sum256([]byte(want.token))
		if subtle.ConstantTimeCompare([]byte(cl.ATH), []byte(base64.RawURLEncoding.EncodeToString(sum[:]))) != 1 {
			return "", badProof("The DPoP proof's ath is not the hash of the access token it comes with.")
		}
	}
	if s.nonces != nil && !s.nonceFresh(cl.Nonce) {
		return "", &ProofError{Description: "Make a new DPoP proof with the nonce in the DPoP-Nonce header.", Nonce: true}
	}
	thumb, err := h.JSONWebKey.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", badProof("The DPoP proof's jwk has no thumbprint.")
	}
	jkt := base64.RawURLEncoding.EncodeToString(thumb)
	fresh, err := s.st.UseOnce(ctx, "dpop "+jkt+" "+cl.ID, now.Add(2*proofWindow))
	if err != nil {
		return "", err
	}
	if !fresh {
		return "", badProof("The DPoP proof (jti %q) was used already; make a new proof for every request.", cl.ID)
	}
	return jkt, nil
}

// sameURL compares an htu with the request's URL as RFC 9449 section 4.3
// says: without query and fragment, scheme and host without regard to case.
func sameURL(htu, want string) bool {
	a, err1 := url.Parse(htu)
	b, err2 := url.Parse(want)
	if err1 != nil || err2 != nil {
		return false
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host) && a.EscapedPath() == b.EscapedPath()
}

// Nonces are the gateway's clock sealed by the key every gateway shares:
// any gateway checks one another handed out, and none is stored.
const nonceContext = "spacefix dpop nonce"

// Nonce returns a fresh nonce for the DPoP-Nonce header, or "" when the
// server asks for none.
func (s *Server) Nonce() string {
	if s.nonces == nil {
		return ""
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(s.now().Unix()))
	return base64.RawURLEncoding.EncodeToString(s.nonces.Seal(b[:], nonceContext))
}

func (s *Server) nonceFresh(nonce string) bool {
	raw, err := base64.RawURLEncoding.DecodeString(nonce)
	if err != nil || nonce == "" {
		return false
	}
	b, err := s.nonces.Open(raw, nonceContext)
	if err != nil || len(b) != 8 {
		return false
	}
	at := time.Unix(int64(binary.BigEndian.Uint64(b)), 0)
	now := s.now()
	return !at.After(now.Add(time.Minute)) && now.Sub(at) <= nonceTTL
}

// binding is what an access or refresh token bound to a key keeps in its
// store record's Data.
type binding struct {
	JKT string `json:"jkt"`
}

func bindingData(jkt string) []byte {
	if jkt == "" {
		return nil
	}
	b, _ := json.Marshal(binding{jkt})
	return b
}

func boundTo(data []byte) string {
	var b binding
	if len(data) == 0 || json.Unmarshal(data, &b) != nil {
		return ""
	}
	return b.JKT
}

// tokenProof checks the DPoP proof of a token request, if any: it returns
// the key's thumbprint, or "" for a request without a proof from a client
// that may send none.
func (s *Server) tokenProof(r *http.Request, c *client) (string, error) {
	if len(r.Header.Values(DPoPHeader)) == 0 {
		if c.DPoPBound {
			return "", badProof("This client registered dpop_bound_access_tokens: send a DPoP proof with the token request.")
		}
		return "", nil
	}
	return s.checkProof(r.Context(), r, proofRequest{method: http.MethodPost, url: s.Issuer(r) + TokenPath})
}

// ResourceProof checks the DPoP proof of a request to the MCP endpoint
// that presents token with the DPoP scheme, and returns its key's
// thumbprint. The error is a *ProofError or a store failure.
func (s *Server) ResourceProof(r *http.Request, token string) (string, error) {
	return s.checkProof(r.Context(), r, proofRequest{method: r.Method, url: s.Resource(r), token: token})
}

// DPoPChallenge is the WWW-Authenticate value of the DPoP scheme for a 401
// from the MCP endpoint: the algorithms a proof may use and, after a
// refused proof, why (RFC 9449 section 7.1).
func (s *Server) DPoPChallenge(r *http.Request, pe *ProofError) string {
	v := fmt.Sprintf(`DPoP algs=%q, resource_metadata=%q`, dpopAlgsString(), s.ResourceMetadataURL(r))
	switch {
	case pe == nil:
	case pe.Nonce:
		v += fmt.Sprintf(`, error="use_dpop_nonce", error_description=%q`, pe.Description)
	default:
		v += fmt.Sprintf(`, error="invalid_dpop_proof", error_description=%q`, pe.Description)
	}
	return v
}
