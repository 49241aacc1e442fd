package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/spacefix/spacefix/internal/store"
)

// testIdPs: identity providers are added once per issuer, read back with
// every field, listed by issuer and removed with their subjects' links.
func testIdPs(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "orders")
	okta := store.IdP{Issuer: "https://acme.okta.com", AllowedClients: []string{"client_a", "https://app.example.com/client.json"},
		ProvisionProjectID: p.ID, ProvisionRole: store.RoleEditor}
	entra := store.IdP{Issuer: "https://login.microsoftonline.com/t/v2.0", JWKSURI: "https://login.microsoftonline.com/t/keys"}
	for _, in := range []store.IdP{okta, entra} {
		got, err := s.CreateIdP(ctx, in)
		if err != nil || got.CreatedAt.IsZero() {
			t.Fatalf("CreateIdP(%s) = %+v, %v", in.Issuer, got, err)
		}
	}
	_, err := s.CreateIdP(ctx, store.IdP{Issuer: okta.Issuer})
	wantErr(t, "CreateIdP twice", err, store.ErrExists)
	entra.AllowedClients = []string{}
	ignore := cmpopts.IgnoreFields(store.IdP{}, "CreatedAt")
	got, err := s.IdP(ctx, okta.Issuer)
	if diff := cmp.Diff(okta, got, ignore); err != nil || diff != "" {
		t.Errorf("IdP(okta): %v, -want +got:\n%s", err, diff)
	}
	all, err := s.IdPs(ctx)
	if diff := cmp.Diff([]store.IdP{okta, entra}, all, ignore); err != nil || diff != "" {
		t.Errorf("IdPs: %v, -want +got:\n%s", err, diff)
	}
	_, err = s.IdP(ctx, "https://unknown.example.com")
	wantErr(t, "IdP(unknown)", err, store.ErrNotFound)

	u := mustUser(t, s, "ada@example.com", false)
	v := mustUser(t, s, "bob@example.com", false)
	if err := s.LinkIdentity(ctx, okta.Issuer, "00u1", u.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.LinkIdentity(ctx, entra.Issuer, "00u1", v.ID); err != nil {
		t.Fatal(err)
	}
	if id, err := s.IdentityUser(ctx, okta.Issuer, "00u1"); err != nil || id != u.ID {
		t.Errorf("IdentityUser(okta, 00u1) = %d, %v; want %d", id, err, u.ID)
	}
	if err := s.LinkIdentity(ctx, okta.Issuer, "00u1", v.ID); err != nil {
		t.Fatal(err)
	}
	if id, err := s.IdentityUser(ctx, okta.Issuer, "00u1"); err != nil || id != v.ID {
		t.Errorf("IdentityUser after relinking = %d, %v; want %d", id, err, v.ID)
	}
	if err := s.DeleteIdP(ctx, okta.Issuer); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "DeleteIdP twice", s.DeleteIdP(ctx, okta.Issuer), store.ErrNotFound)
	_, err = s.IdentityUser(ctx, okta.Issuer, "00u1")
	wantErr(t, "IdentityUser after DeleteIdP", err, store.ErrNotFound)
	if id, err := s.IdentityUser(ctx, entra.Issuer, "00u1"); err != nil || id != v.ID {
		t.Errorf("the other IdP's link = %d, %v; want %d", id, err, v.ID)
	}
	if err := s.DeleteUser(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.IdentityUser(ctx, entra.Issuer, "00u1")
	wantErr(t, "IdentityUser after DeleteUser", err, store.ErrNotFound)
}

// testUsedOnce: a key is fresh once until it expires, then fresh again;
// of many concurrent uses exactly one wins; pruning deletes expired keys.
func testUsedOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	later := time.Now().Add(time.Hour)
	if ok, err := s.UseOnce(ctx, "jag:a", later); err != nil || !ok {
		t.Fatalf("first UseOnce = %v, %v; want true", ok, err)
	}
	if ok, err := s.UseOnce(ctx, "jag:a", later); err != nil || ok {
		t.Errorf("second UseOnce = %v, %v; want false", ok, err)
	}
	if ok, err := s.UseOnce(ctx, "dpop:a", later); err != nil || !ok {
		t.Errorf("another key = %v, %v; want true", ok, err)
	}
	past := time.Now().Add(-time.Minute)
	if ok, err := s.UseOnce(ctx, "old", past); err != nil || !ok {
		t.Fatalf("UseOnce(old) = %v, %v", ok, err)
	}
	if ok, err := s.UseOnce(ctx, "old", later); err != nil || !ok {
		t.Errorf("UseOnce of an expired key = %v, %v; want true", ok, err)
	}
	if ok, err := s.UseOnce(ctx, "gone", past); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if n, err := s.PruneUsedOnce(ctx, time.Now()); err != nil || n != 1 {
		t.Errorf("PruneUsedOnce = %d, %v; want 1 (the expired key)", n, err)
	}
	var (
		wins atomic.Int32
		wg   sync.WaitGroup
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.UseOnce(ctx, "race", later)
			if err != nil {
				t.Errorf("UseOnce %d: %v", i, err)
			}
			if ok {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Errorf("%d of 8 concurrent UseOnce won; want exactly 1", n)
	}
}
