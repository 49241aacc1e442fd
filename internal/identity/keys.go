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

	"github.com/spacefix/spacefix/internal/secrets"
)

// stored is the JSON kept under [MetaKeys]. Three kinds of key: the
// current one signs; the next one is published already (so that a
// verifier's cached JWKS knows it when it takes over) and signs after the
// next rotation; retired ones stay published until their last token has
// expired, by their public half only: a retired key never signs again (a
// gateway that has not re-read the store yet signs with the copy in its
// memory), so its private half is dropped when it retires.
type stored struct {
	Current storedKey   `json:"current"`
	Next    storedKey   `json:"next"`
	Retired []storedKey `json:"retired,omitempty"`
}

// storedKey is one key as the store keeps it.
type storedKey struct {
	ID string `json:"kid"`
	// Private is the key in PKCS #8 DER, base64: it never leaves the store
	// and this package (no log, no error, no String method shows it). In
	// memory it is set for the current and next keys; in the store only
	// when the Signer has no secret box (an embedding program without a
	// key file, and the keys of gateways before they were sealed).
	// Retired keys have none (stores written before that are rewritten).
	Private []byte `json:"private,omitempty"`
	// Sealed is Private sealed with the secret key file's box, under the
	// context sealContext(ID): what the store keeps when there is a box.
	Sealed []byte `json:"sealed,omitempty"`
	// Public is the public half in PKIX DER, base64: all a retired key
	// keeps, to stay in the JWKS until its last token has expired.
	Public  []byte    `json:"public,omitempty"`
	Created time.Time `json:"created"`
	Active  time.Time `json:"active,omitzero"`  // began to sign; zero for the next key
	Retired time.Time `json:"retired,omitzero"` // stopped signing; zero but for retired keys
}

// String keeps the private key out of any %v.
func (k storedKey) String() string { return "identity key " + k.ID }

// sealContext is the context a key's private half is sealed under: a
// sealed key copied under another id does not open.
func sealContext(kid string) string { return "identity-key:" + kid }

// keySet is the stored keys, parsed and ready to sign with.
type keySet struct {
	raw string // as stored: the compare in SwapMeta
	st  stored // current and next with Private set, retired with Public only; no Sealed
	// reseal says the store holds a key in the clear, or sealed with a
	// key file's key that no longer seals, though the Signer has a box,
	// or a retired key's private half: the keys are written again, sealed
	// with its current key, retired ones by their public half only.
	reseal  bool
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
	old, err := retire(st.Current)
	if err != nil {
		return stored{}, err
	}
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

// ErrSealed is why keys sealed with a secret key file cannot be read: the
// Signer has no box, or its box has none of the key file's keys that
// sealed them. The error wrapping it says what to do.
var ErrSealed = errors.New("the identity signing keys in the store are sealed with a secret key file this process does not have")

// parse reads the stored JSON, opens sealed keys with box (nil: there is
// none), and readies the current key to sign.
func parse(raw string, box *secrets.Box) (*keySet, error) {
	var st stored
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return nil, fmt.Errorf("%w (store meta %q is not their JSON)", errBadKeys, MetaKeys)
	}
	ks := &keySet{raw: raw}
	for _, k := range []*storedKey{&st.Current, &st.Next} {
		if err := ks.open(k, box); err != nil {
			return nil, err
		}
	}
	for i, k := range st.Retired {
		if k.Private == nil && k.Sealed == nil {
			continue
		}
		// Written before retired keys dropped their private half.
		if err := ks.open(&k, box); err != nil {
			return nil, err
		}
		r, err := retire(k)
		if err != nil {
			return nil, err
		}
		st.Retired[i], ks.reseal = r, true
	}
	ks.st = st
	for i, k := range []storedKey{st.Current, st.Next} {
		priv, err := privateKey(k)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			ks.current = priv
		}
		ks.public = append(ks.public, jose.JSONWebKey{Key: &priv.PublicKey, KeyID: k.ID, Algorithm: string(jose.ES256), Use: "sig"})
	}
	for _, k := range st.Retired {
		p, err := x509.ParsePKIXPublicKey(k.Public)
		pub, ok := p.(*ecdsa.PublicKey)
		if err != nil || !ok || pub.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%w (retired key %q is not a P-256 public key)", errBadKeys, k.ID)
		}
		ks.public = append(ks.public, jose.JSONWebKey{Key: pub, KeyID: k.ID, Algorithm: string(jose.ES256), Use: "sig"})
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

// privateKey parses k's private half, a P-256 key.
func privateKey(k storedKey) (*ecdsa.PrivateKey, error) {
	p, err := x509.ParsePKCS8PrivateKey(k.Private)
	priv, ok := p.(*ecdsa.PrivateKey)
	if err != nil || !ok || priv.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w (key %q is not a P-256 private key)", errBadKeys, k.ID)
	}
	return priv, nil
}

// retire returns k (opened: Private set) with only its public half.
func retire(k storedKey) (storedKey, error) {
	priv, err := privateKey(k)
	if err != nil {
		return storedKey{}, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		return storedKey{}, fmt.Errorf("encode the public half of key %q: %w", k.ID, err)
	}
	k.Private, k.Sealed, k.Public = nil, nil, pub
	return k, nil
}

// open sets k.Private from k.Sealed with box, and notes in ks whether the
// store's copy of k must be sealed again.
func (ks *keySet) open(k *storedKey, box *secrets.Box) error {
	if k.Sealed == nil {
		ks.reseal = ks.reseal || box != nil
		return nil
	}
	if box == nil {
		return fmt.Errorf("%w: give it the gateways' --secret-key-file (or SPACEFIX_SECRET_KEY_FILE)", ErrSealed)
	}
	der, err := box.Open(k.Sealed, sealContext(k.ID))
	if err != nil {
		return fmt.Errorf("%w (key %q does not open with the key file given): give it the file the other gateways use; if that file is lost, run spacefix identity reset to make new keys", ErrSealed, k.ID)
	}
	ks.reseal = ks.reseal || !box.Current(k.Sealed)
	k.Private, k.Sealed = der, nil
	return nil
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

// encode is st as stored: with a box, each private key (current and
// next; retired keys have none) sealed with its current key and none in
// the clear.
func encode(st stored, box *secrets.Box) (string, error) {
	if box != nil {
		seal := func(k storedKey) storedKey {
			k.Sealed, k.Private = box.Seal(k.Private, sealContext(k.ID)), nil
			return k
		}
		st.Current, st.Next = seal(st.Current), seal(st.Next)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("encode the identity keys: %w", err)
	}
	return string(b), nil
}
