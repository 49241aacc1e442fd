package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	_ "crypto/sha256" // the thumbprint's hash
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// stored is the JSON kept under [MetaKeys]. Three kinds of key: the
// current one signs; the next one is published already (so that a
// verifier's cached JWKS knows it when it takes over) and signs after the
// next rotation; retired ones stay published until their last token has
// expired.
type stored struct {
	Current storedKey   `json:"current"`
	Next    storedKey   `json:"next"`
	Retired []storedKey `json:"retired,omitempty"`
}

// storedKey is one key as the store keeps it.
type storedKey struct {
	ID string `json:"kid"`
	// Private is the key in PKCS #8 DER, base64: it never leaves the store
	// and this package (no log, no error, no String method shows it).
	Private []byte    `json:"private"`
	Created time.Time `json:"created"`
	Active  time.Time `json:"active,omitzero"`  // began to sign; zero for the next key
	Retired time.Time `json:"retired,omitzero"` // stopped signing; zero but for retired keys
}

// String keeps the private key out of any %v.
func (k storedKey) String() string { return "identity key " + k.ID }

// keySet is the stored keys, parsed and ready to sign with.
type keySet struct {
	raw     string // as stored: the compare in SwapMeta
	st      stored
	current *ecdsa.PrivateKey
	signer  jose.Signer
	public  []jose.JSONWebKey // current, next, retired: every key a verifier may meet
}

// newKey makes a P-256 key; its id is its RFC 7638 thumbprint, so the
// same key has the same id everywhere.
func newKey(now time.Time) (storedKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return storedKey{}, fmt.Errorf("make a signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return storedKey{}, fmt.Errorf("encode a signing key: %w", err)
	}
	kid, err := keyID(&priv.PublicKey)
	if err != nil {
		return storedKey{}, err
	}
	return storedKey{ID: kid, Private: der, Created: now}, nil
}

func keyID(pub *ecdsa.PublicKey) (string, error) {
	tp, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("key id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(tp), nil
}

// freshSet is the first keys of a store.
func freshSet(now time.Time) (stored, error) {
	cur, err := newKey(now)
	if err != nil {
		return stored{}, err
	}
	next, err := newKey(now)
	if err != nil {
		return stored{}, err
	}
	cur.Active = now
	return stored{Current: cur, Next: next}, nil
}

// rotated is st after a rotation at now: next signs, current retires, a
// new next is published, and retired keys whose tokens have all expired
// (publishedFor after they retired) are gone.
func (st stored) rotated(now time.Time, publishedFor time.Duration) (stored, error) {
	next, err := newKey(now)
	if err != nil {
		return stored{}, err
	}
	out := stored{Current: st.Next, Next: next}
	out.Current.Active = now
	old := st.Current
	old.Retired = now
	for _, k := range append(st.Retired, old) {
		if now.Before(k.Retired.Add(publishedFor)) {
			out.Retired = append(out.Retired, k)
		}
	}
	return out, nil
}

// errBadKeys says the stored value is not what this package wrote; the
// wrapped detail never quotes it.
var errBadKeys = errors.New("the identity signing keys in the store are unreadable")

// parse reads the stored JSON and readies the current key to sign.
func parse(raw string) (*keySet, error) {
	var st stored
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return nil, fmt.Errorf("%w (store meta %q is not their JSON)", errBadKeys, MetaKeys)
	}
	ks := &keySet{raw: raw, st: st}
	for i, k := range append([]storedKey{st.Current, st.Next}, st.Retired...) {
		p, err := x509.ParsePKCS8PrivateKey(k.Private)
		priv, ok := p.(*ecdsa.PrivateKey)
		if err != nil || !ok || priv.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%w (key %q is not a P-256 private key)", errBadKeys, k.ID)
		}
		if i == 0 {
			ks.current = priv
		}
		ks.public = append(ks.public, jose.JSONWebKey{Key: &priv.PublicKey, KeyID: k.ID, Algorithm: string(jose.ES256), Use: "sig"})
	}
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: ks.current, KeyID: st.Current.ID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, fmt.Errorf("ready the signing key %q: %w", st.Current.ID, err)
	}
	ks.signer = signer
	return ks, nil
}

// jwks is the published keys at now, and until when that answer holds
// (the first retired key's end; zero: until the keys change).
func (ks *keySet) jwks(now time.Time, publishedFor time.Duration) ([]byte, time.Time) {
	var set jose.JSONWebKeySet
	var until time.Time
	for i, k := range ks.public {
		if i >= 2 {
			end := ks.st.Retired[i-2].Retired.Add(publishedFor)
			if !now.Before(end) {
				continue
			}
			if until.IsZero() || end.Before(until) {
				until = end
			}
		}
		set.Keys = append(set.Keys, k)
	}
	b, err := json.Marshal(set)
	if err != nil { // public EC keys always marshal
		panic("identity: marshal JWKS: " + err.Error())
	}
	return b, until
}

// encode is st as stored.
func encode(st stored) (string, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("encode the identity keys: %w", err)
	}
	return string(b), nil
}
