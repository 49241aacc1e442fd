package identity_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/identity"
	"github.com/spacefix/spacefix/internal/store"
)

// rawKeys is the stored keys as the store's row holds them.
type rawKeys struct {
	Current rawKey   `json:"current"`
	Next    rawKey   `json:"next"`
	Retired []rawKey `json:"retired"`
}

type rawKey struct {
	ID      string `json:"kid"`
	Private []byte `json:"private"`
	Sealed  []byte `json:"sealed"`
	Public  []byte `json:"public"`
}

func readRaw(t *testing.T, st store.Meta) (string, rawKeys) {
	t.Helper()
	raw, err := st.Meta(t.Context(), identity.MetaKeys)
	if err != nil {
		t.Fatal(err)
	}
	var k rawKeys
	if err := json.Unmarshal([]byte(raw), &k); err != nil {
		t.Fatal(err)
	}
	return raw, k
}

// checkRetired fails unless the row's retired keys are exactly kids, each
// by its public half only.
func checkRetired(t *testing.T, k rawKeys, kids ...string) {
	t.Helper()
	if len(k.Retired) != len(kids) {
		t.Fatalf("the store holds %d retired keys, want %d", len(k.Retired), len(kids))
	}
	for i, r := range k.Retired {
		if r.ID != kids[i] || r.Private != nil || r.Sealed != nil || r.Public == nil {
			t.Errorf("retired key %d in the store: kid %s (want %s), private %v, sealed %v, public %v; want the public half only",
				i, r.ID, kids[i], r.Private != nil, r.Sealed != nil, r.Public != nil)
		}
	}
}

// Once a key retires it can no longer sign, and the store's row keeps only
// its public half, with a key file or without: a token it signed still
// verifies with the JWKS, here and on a gateway that starts afterwards,
// until the key leaves the JWKS.
func TestRetiredKeyKeepsOnlyItsPublicHalf(t *testing.T) {
	for _, c := range []struct {
		name string
		box  bool
	}{{"sealed", true}, {"in the clear", false}} {
		t.Run(c.name, func(t *testing.T) {
			clk := newClock()
			st := openSQLite(t)
			box := newBox(t)
			if !c.box {
				box = nil
			}
			s, err := startWith(t, st, clk, box)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := s.Sign(personClaims)
			if err != nil {
				t.Fatal(err)
			}
			old := s.KeyID()
			clk.Add(time.Minute)
			if err := s.Rotate(t.Context()); err != nil {
				t.Fatal(err)
			}
			_, k := readRaw(t, st)
			checkRetired(t, k, old)
			if c.box && (k.Current.Sealed == nil || k.Next.Sealed == nil || k.Current.Private != nil) {
				t.Error("the current and next keys are not sealed")
			}
			later, err := startWith(t, st, clk, box)
			if err != nil {
				t.Fatal(err)
			}
			for _, signer := range []*identity.Signer{s, later} {
				if _, err := verify(signer.JWKS(), tok, personClaims.Audience, clk.Now()); err != nil {
					t.Errorf("a token the retired key signed does not verify: %v", err)
				}
			}
		})
	}
}

// A store written before retired keys dropped their private half (each
// retired key sealed whole) is rewritten when read: the same keys, the
// retired ones by their public half only, and their tokens still verify.
func TestRetiredPrivateHalvesDroppedWhenRead(t *testing.T) {
	clk := newClock()
	box := newBox(t)
	elsewhere := openSQLite(t)
	old, err := startWith(t, elsewhere, clk, box)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := old.Sign(personClaims)
	if err != nil {
		t.Fatal(err)
	}
	_, oldKeys := readRaw(t, elsewhere)
	st := openSQLite(t)
	if _, err := startWith(t, st, clk, box); err != nil {
		t.Fatal(err)
	}
	raw, k := readRaw(t, st)
	var legacy map[string]any
	if err := json.Unmarshal([]byte(raw), &legacy); err != nil {
		t.Fatal(err)
	}
	legacy["retired"] = []any{map[string]any{"kid": oldKeys.Current.ID, "sealed": oldKeys.Current.Sealed,
		"created": clk.Now(), "active": clk.Now(), "retired": clk.Now()}}
	b, _ := json.Marshal(legacy)
	if won, err := st.SwapMeta(t.Context(), identity.MetaKeys, raw, string(b)); err != nil || !won {
		t.Fatalf("write the old form: %v %v", won, err)
	}

	s, err := startWith(t, st, clk, box)
	if err != nil {
		t.Fatal(err)
	}
	_, after := readRaw(t, st)
	checkRetired(t, after, old.KeyID())
	if after.Current.ID != k.Current.ID || s.KeyID() != k.Current.ID {
		t.Errorf("the rewrite changed the signing key: %s, was %s", after.Current.ID, k.Current.ID)
	}
	if _, err := verify(s.JWKS(), tok, personClaims.Audience, clk.Now()); err != nil {
		t.Errorf("a token the retired key signed does not verify after the rewrite: %v", err)
	}
}
