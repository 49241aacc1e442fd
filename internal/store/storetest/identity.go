package storetest

import (
	"testing"

	"github.com/spacefix/spacefix/internal/store"
)

// testKeyIdentityAudience: an agent key's identity audience is stored on
// create, read back by every way of reading a key, changed and cleared by
// SetKeyIdentityAudience, and touches no other key or field.
func testKeyIdentityAudience(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "orders")
	meta := store.KeyMeta{DisplayName: "Orders", Author: "Shop team"}
	k := mustKey(t, s, store.Key{ID: "key_a", ProjectID: p.ID, Kind: store.KindAgent, KeyMeta: meta, IdentityAudience: "https://orders.example.com"}, "a")
	if k.IdentityAudience != "https://orders.example.com" {
		t.Errorf("CreateKey returned audience %q", k.IdentityAudience)
	}
	other := mustKey(t, s, store.Key{ID: "key_b", ProjectID: p.ID, Kind: store.KindAgent}, "b")
	for _, aud := range []string{"api://orders-backend", "ünïcode/aud", ""} {
		if err := s.SetKeyIdentityAudience(ctx, "key_a", aud); err != nil {
			t.Fatalf("SetKeyIdentityAudience(%q): %v", aud, err)
		}
		byID, err := s.Key(ctx, "key_a")
		if err != nil || byID.IdentityAudience != aud || byID.KeyMeta != meta {
			t.Errorf("Key after SetKeyIdentityAudience(%q) = audience %q, meta %+v, %v; want the audience and the meta unchanged", aud, byID.IdentityAudience, byID.KeyMeta, err)
		}
		byHash, err := s.KeyByHash(ctx, hash("a"))
		if err != nil || byHash.IdentityAudience != aud {
			t.Errorf("KeyByHash after SetKeyIdentityAudience(%q) = %q, %v", aud, byHash.IdentityAudience, err)
		}
	}
	if err := s.SetKeyIdentityAudience(ctx, "key_a", "https://orders.example.com"); err != nil {
		t.Fatal(err)
	}
	ks, err := s.Keys(ctx, p.ID)
	if err != nil || len(ks) != 2 || ks[0].IdentityAudience != "https://orders.example.com" || ks[1].IdentityAudience != "" {
		t.Errorf("Keys = %+v, %v; want key_a with its audience and key_b with none", ks, err)
	}
	if got, err := s.Key(ctx, other.ID); err != nil || got.IdentityAudience != "" {
		t.Errorf("untouched key's audience = %q, %v; want none", got.IdentityAudience, err)
	}
	wantErr(t, "SetKeyIdentityAudience(unknown)", s.SetKeyIdentityAudience(ctx, "key_unknown", "x"), store.ErrNotFound)
}
