package identity_test

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/identity"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
)

// newBox is a secret key file's box of the given keys (each 32 bytes);
// none makes one key.
func newBox(t *testing.T, keys ...[]byte) *secrets.Box {
	t.Helper()
	if len(keys) == 0 {
		keys = [][]byte{newBoxKey()}
	}
	b, err := secrets.New(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newBoxKey() []byte {
	k := make([]byte, secrets.KeySize)
	rand.Read(k)
	return k
}

// startWith starts a Signer on st with box (nil: none); the error of Start.
func startWith(t *testing.T, st store.Meta, clk *clock, box *secrets.Box) (*identity.Signer, error) {
	t.Helper()
	s := identity.New(identity.Options{Store: st, Issuer: func() string { return issuer }, Now: clk.Now, ReloadEvery: time.Hour, Box: box})
	if err := s.Start(t.Context()); err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close() })
	return s, nil
}

// storedForm reads how the keys sit in the store: whether any private
// key is there in the clear, and whether every one is sealed.
func storedForm(t *testing.T, st store.Meta) (clear, sealed bool) {
	t.Helper()
	raw, err := st.Meta(t.Context(), identity.MetaKeys)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(raw, `"private"`), strings.Count(raw, `"sealed"`) >= 2 && !strings.Contains(raw, `"private"`)
}

// With the secret key file's box, the store holds no private key in the
// clear: a process without the file, or with another one, cannot read
// them and is told what to do; one with the file signs tokens that
// verify.
func TestKeysSealedAtRest(t *testing.T) {
	clk := newClock()
	st := openSQLite(t)
	box := newBox(t)
	s, err := startWith(t, st, clk, box)
	if err != nil {
		t.Fatal(err)
	}
	if clear, sealed := storedForm(t, st); clear || !sealed {
		t.Fatalf("stored keys: clear %v, sealed %v; want every key sealed", clear, sealed)
	}
	tok, err := s.Sign(personClaims)
	if err != nil {
		t.Fatal(err)
	}

	_, err = startWith(t, st, clk, nil)
	if !errors.Is(err, identity.ErrSealed) || !strings.Contains(err.Error(), "give it the gateways' --secret-key-file (or SPACEFIX_SECRET_KEY_FILE)") {
		t.Errorf("Start without the key file: %v; want ErrSealed naming --secret-key-file", err)
	}
	_, err = startWith(t, st, clk, newBox(t))
	if !errors.Is(err, identity.ErrSealed) || !strings.Contains(err.Error(), "give it the file the other gateways use; if that file is lost, run spacefix identity reset to make new keys") {
		t.Errorf("Start with another key file: %v; want ErrSealed naming the fix", err)
	}

	again, err := startWith(t, st, clk, box)
	if err != nil {
		t.Fatal(err)
	}
	if again.KeyID() != s.KeyID() {
		t.Errorf("a second Signer with the same file signs with %s, want %s", again.KeyID(), s.KeyID())
	}
	if _, err := verify(again.JWKS(), tok, personClaims.Audience, clk.Now()); err != nil {
		t.Errorf("a token of the first Signer does not verify with the second's JWKS: %v", err)
	}
}

// Keys a store holds in the clear (gateways before they were sealed, or
// before a key file) are sealed when a Signer with a box reads them: the
// same keys, so tokens signed before still verify.
func TestClearKeysSealedWhenRead(t *testing.T) {
	clk := newClock()
	st := openSQLite(t)
	old, err := startWith(t, st, clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := old.Sign(personClaims)
	if clear, _ := storedForm(t, st); !clear {
		t.Fatal("a Signer without a box did not keep its keys in the clear")
	}
	s, err := startWith(t, st, clk, newBox(t))
	if err != nil {
		t.Fatal(err)
	}
	if clear, sealed := storedForm(t, st); clear || !sealed {
		t.Errorf("after a Signer with a box read them: clear %v, sealed %v; want every key sealed", clear, sealed)
	}
	if s.KeyID() != old.KeyID() {
		t.Errorf("sealing changed the signing key: %s, was %s", s.KeyID(), old.KeyID())
	}
	if _, err := verify(s.JWKS(), tok, personClaims.Audience, clk.Now()); err != nil {
		t.Errorf("a token signed before the sealing does not verify: %v", err)
	}
}

// After the key file is rotated (a new key on its first line, the old one
// below), the keys are sealed again with the new key, so the old line can
// go.
func TestKeysResealedAfterKeyFileRotation(t *testing.T) {
	clk := newClock()
	st := openSQLite(t)
	oldKey, newKey := newBoxKey(), newBoxKey()
	first, err := startWith(t, st, clk, newBox(t, oldKey))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startWith(t, st, clk, newBox(t, newKey, oldKey)); err != nil {
		t.Fatal(err)
	}
	s, err := startWith(t, st, clk, newBox(t, newKey))
	if err != nil {
		t.Fatalf("with the new key alone after a start with both: %v", err)
	}
	if s.KeyID() != first.KeyID() {
		t.Errorf("resealing changed the signing key: %s, was %s", s.KeyID(), first.KeyID())
	}
}

// Reset makes new keys when the old ones cannot be read: they are sealed
// with the box given, and gateways with that file start on them.
func TestReset(t *testing.T) {
	clk := newClock()
	st := openSQLite(t)
	lost, err := startWith(t, st, clk, newBox(t))
	if err != nil {
		t.Fatal(err)
	}
	box := newBox(t)
	r := identity.New(identity.Options{Store: st, Issuer: func() string { return issuer }, Now: clk.Now, Box: box})
	if err := r.Reset(t.Context()); err != nil {
		t.Fatal(err)
	}
	s, err := startWith(t, st, clk, box)
	if err != nil {
		t.Fatalf("Start after Reset: %v", err)
	}
	if s.KeyID() == lost.KeyID() || s.KeyID() != r.KeyID() {
		t.Errorf("after Reset the key is %s (reset made %s, lost was %s); want the new one", s.KeyID(), r.KeyID(), lost.KeyID())
	}
	if clear, sealed := storedForm(t, st); clear || !sealed {
		t.Errorf("reset keys: clear %v, sealed %v; want sealed", clear, sealed)
	}
}
