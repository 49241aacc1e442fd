package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/store"
)

// upstreamFixture is a project with two bridged agent keys and a client
// key, another project with an agent key, and three people.
type upstreamFixture struct {
	p1, p2             store.Project
	jira, linear, p2a  string // agent key ids
	client             string // a client key id
	ann, bob, cat      store.User
	at                 time.Time
	access, refreshTok []byte
}

func newUpstreamFixture(t *testing.T, s store.Store) upstreamFixture {
	t.Helper()
	f := upstreamFixture{
		p1: mustProject(t, s, "acme"), p2: mustProject(t, s, "globex"),
		jira: "key_jira", linear: "key_linear", p2a: "key_p2agent", client: "key_client",
		at:     time.Now().UTC().Truncate(time.Millisecond).Add(-time.Hour),
		access: []byte{1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0xAA}, refreshTok: []byte{1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0xBB},
	}
	mustKey(t, s, store.Key{ID: f.jira, ProjectID: f.p1.ID, Kind: store.KindAgent}, "s-jira")
	mustKey(t, s, store.Key{ID: f.linear, ProjectID: f.p1.ID, Kind: store.KindAgent}, "s-linear")
	mustKey(t, s, store.Key{ID: f.p2a, ProjectID: f.p2.ID, Kind: store.KindAgent}, "s-p2")
	mustKey(t, s, store.Key{ID: f.client, ProjectID: f.p1.ID, Kind: store.KindClient}, "s-client")
	f.ann = mustUser(t, s, "ann@example.com", false)
	f.bob = mustUser(t, s, "bob@example.com", false)
	f.cat = mustUser(t, s, "cat@example.com", false)
	return f
}

// account is a full account of user for key in project p.
func (f upstreamFixture) account(p int64, key string, user int64) store.UpstreamAccount {
	return store.UpstreamAccount{
		ProjectID: p, AgentKeyID: key, UserID: user, Resource: "https://mcp.example.com/mcp",
		Access: f.access, Refresh: f.refreshTok, ExpiresAt: f.at.Add(2 * time.Hour), Scope: "read write",
		ClientID: "client-7", Subject: fmt.Sprintf("user-%d@upstream", user), CreatedAt: f.at, UpdatedAt: f.at,
		Flow: fmt.Sprintf("flow-%d", user),
	}
}

func mustPutAccount(t *testing.T, s store.Store, a store.UpstreamAccount) {
	t.Helper()
	if err := s.PutUpstreamAccount(t.Context(), a); err != nil {
		t.Fatalf("PutUpstreamAccount(%s, %d): %v", a.AgentKeyID, a.UserID, err)
	}
}

// accountKeys lists f's accounts as "key/user" strings, in the store's
// order.
func accountKeys(t *testing.T, s store.Store, f store.UpstreamFilter) []string {
	t.Helper()
	list, err := s.UpstreamAccounts(t.Context(), f)
	if err != nil {
		t.Fatalf("UpstreamAccounts(%+v): %v", f, err)
	}
	out := []string{}
	for _, a := range list {
		out = append(out, fmt.Sprintf("%s/%d", a.AgentKeyID, a.UserID))
	}
	return out
}

// testUpstreamAccounts: an account comes back as put, with version 1; a
// second put replaces it, keeps CreatedAt and bumps the version; an
// update applies only at the version read; optional fields round-trip as
// nil and the zero time.
func testUpstreamAccounts(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := newUpstreamFixture(t, s)
	a := f.account(f.p1.ID, f.jira, f.ann.ID)
	mustPutAccount(t, s, a)
	got, err := s.UpstreamAccount(ctx, f.jira, f.ann.ID)
	if err != nil {
		t.Fatalf("UpstreamAccount: %v", err)
	}
	want := a
	want.Version = 1
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("account as put (-want +got):\n%s", diff)
	}
	checkUTC(t, "ExpiresAt", got.ExpiresAt)

	// A second put (the person connects again) replaces it.
	again := f.account(f.p1.ID, f.jira, f.ann.ID)
	again.Access, again.Refresh, again.ExpiresAt, again.Scope, again.Subject = []byte("sealed-2"), nil, time.Time{}, "", ""
	again.CreatedAt, again.UpdatedAt = f.at.Add(time.Minute), f.at.Add(time.Minute)
	again.Flow = "flow-again" // connected by another flow
	mustPutAccount(t, s, again)
	got, err = s.UpstreamAccount(ctx, f.jira, f.ann.ID)
	if err != nil {
		t.Fatalf("UpstreamAccount: %v", err)
	}
	want = again
	want.CreatedAt, want.Version = f.at, 2
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("account after a second put (-want +got):\n%s", diff)
	}

	// An update at the version read applies and bumps it; at an older one
	// it does not.
	upd := got
	upd.Access, upd.Refresh, upd.ExpiresAt, upd.UpdatedAt = []byte("sealed-3"), []byte("sealed-r3"), f.at.Add(3*time.Hour), f.at.Add(2*time.Minute)
	upd.ClaimedUntil = f.at.Add(15 * time.Second) // a refresh claimed: kept as written
	upd.Flow = "flow-of-a-refresh"                // not written: a refresh connects nothing
	if ok, err := s.UpdateUpstreamAccount(ctx, upd); err != nil || !ok {
		t.Fatalf("UpdateUpstreamAccount at version 2 = %v, %v; want applied", ok, err)
	}
	stale := upd
	stale.Access = []byte("sealed-lost")
	if ok, err := s.UpdateUpstreamAccount(ctx, stale); err != nil || ok {
		t.Errorf("UpdateUpstreamAccount at version 2 again = %v, %v; want not applied", ok, err)
	}
	got, err = s.UpstreamAccount(ctx, f.jira, f.ann.ID)
	if err != nil {
		t.Fatalf("UpstreamAccount: %v", err)
	}
	want = upd
	want.Version, want.Flow = 3, "flow-again"
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("account after the update (-want +got):\n%s", diff)
	}

	// A zero UpdatedAt is set by the store.
	c := startClock()
	now := got
	now.UpdatedAt = time.Time{}
	if ok, err := s.UpdateUpstreamAccount(ctx, now); err != nil || !ok {
		t.Fatalf("UpdateUpstreamAccount at version 3 = %v, %v; want applied", ok, err)
	}
	if got, err = s.UpstreamAccount(ctx, f.jira, f.ann.ID); err != nil {
		t.Fatalf("UpstreamAccount: %v", err)
	}
	c.check(t, "UpdatedAt set by the store", got.UpdatedAt)
	if got.Version != 4 || got.CreatedAt != f.at {
		t.Errorf("after an update: Version %d, CreatedAt %v; want 4, %v", got.Version, got.CreatedAt, f.at)
	}

	// A new account with zero times gets them from the store.
	c = startClock()
	fresh := f.account(f.p1.ID, f.linear, f.bob.ID)
	fresh.CreatedAt, fresh.UpdatedAt = time.Time{}, time.Time{}
	mustPutAccount(t, s, fresh)
	if got, err = s.UpstreamAccount(ctx, f.linear, f.bob.ID); err != nil {
		t.Fatalf("UpstreamAccount: %v", err)
	}
	c.check(t, "CreatedAt set by the store", got.CreatedAt)
	c.check(t, "UpdatedAt set by the store", got.UpdatedAt)

	if _, err := s.UpstreamAccount(ctx, f.jira, f.bob.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpstreamAccount of a person who did not connect = %v, want ErrNotFound", err)
	}
	gone := f.account(f.p1.ID, f.jira, f.cat.ID)
	gone.Version = 1
	if ok, err := s.UpdateUpstreamAccount(ctx, gone); err != nil || ok {
		t.Errorf("UpdateUpstreamAccount of no account = %v, %v; want not applied", ok, err)
	}
	if _, err := s.UpstreamAccount(ctx, f.jira, f.cat.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an update of no account stored one: %v", err)
	}
}

// testUpstreamAccountRefs: an account is only put for a live agent key of
// its project and a user that exists.
func testUpstreamAccountRefs(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := newUpstreamFixture(t, s)
	revoked := "key_revoked"
	mustKey(t, s, store.Key{ID: revoked, ProjectID: f.p1.ID, Kind: store.KindAgent}, "s-revoked")
	if err := s.RevokeKey(ctx, revoked); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		a    store.UpstreamAccount
	}{
		{"an unknown agent key", f.account(f.p1.ID, "key_nope", f.ann.ID)},
		{"a revoked agent key", f.account(f.p1.ID, revoked, f.ann.ID)},
		{"a client key", f.account(f.p1.ID, f.client, f.ann.ID)},
		{"another project's agent key", f.account(f.p1.ID, f.p2a, f.ann.ID)},
		{"an unknown user", f.account(f.p1.ID, f.jira, f.cat.ID+1000)},
	} {
		wantErr(t, "PutUpstreamAccount for "+tc.what, s.PutUpstreamAccount(ctx, tc.a), store.ErrNotFound)
	}
	if got := accountKeys(t, s, store.UpstreamFilter{ProjectID: f.p1.ID}); len(got) != 0 {
		t.Errorf("accounts after refused puts = %v, want none", got)
	}
}

// testUpstreamFilters: lists come by agent key, then user; zero fields of
// a filter match all; a delete says how many went, and a zero filter
// deletes nothing.
func testUpstreamFilters(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := newUpstreamFixture(t, s)
	for _, a := range []store.UpstreamAccount{
		f.account(f.p1.ID, f.linear, f.cat.ID),
		f.account(f.p1.ID, f.jira, f.bob.ID),
		f.account(f.p1.ID, f.linear, f.ann.ID),
		f.account(f.p1.ID, f.jira, f.ann.ID),
		f.account(f.p2.ID, f.p2a, f.ann.ID),
	} {
		mustPutAccount(t, s, a)
	}
	ann, bob, cat := f.ann.ID, f.bob.ID, f.cat.ID
	k := func(key string, user int64) string { return fmt.Sprintf("%s/%d", key, user) }
	for _, tc := range []struct {
		f    store.UpstreamFilter
		want []string
	}{
		{store.UpstreamFilter{}, []string{k(f.jira, ann), k(f.jira, bob), k(f.linear, ann), k(f.linear, cat), k(f.p2a, ann)}},
		{store.UpstreamFilter{ProjectID: f.p1.ID}, []string{k(f.jira, ann), k(f.jira, bob), k(f.linear, ann), k(f.linear, cat)}},
		{store.UpstreamFilter{ProjectID: f.p2.ID}, []string{k(f.p2a, ann)}},
		{store.UpstreamFilter{AgentKeyID: f.linear}, []string{k(f.linear, ann), k(f.linear, cat)}},
		{store.UpstreamFilter{UserID: ann}, []string{k(f.jira, ann), k(f.linear, ann), k(f.p2a, ann)}},
		{store.UpstreamFilter{ProjectID: f.p1.ID, UserID: ann}, []string{k(f.jira, ann), k(f.linear, ann)}},
		{store.UpstreamFilter{AgentKeyID: f.jira, UserID: bob}, []string{k(f.jira, bob)}},
		{store.UpstreamFilter{ProjectID: f.p2.ID, AgentKeyID: f.jira}, []string{}},
		{store.UpstreamFilter{UserID: cat + 1000}, []string{}},
	} {
		if diff := gocmp.Diff(tc.want, accountKeys(t, s, tc.f)); diff != "" {
			t.Errorf("UpstreamAccounts(%+v) (-want +got):\n%s", tc.f, diff)
		}
	}

	if n, err := s.DeleteUpstreamAccounts(ctx, store.UpstreamFilter{}); err != nil || n != 0 {
		t.Errorf("DeleteUpstreamAccounts(zero filter) = %d, %v; want 0, nil", n, err)
	}
	if got := accountKeys(t, s, store.UpstreamFilter{}); len(got) != 5 {
		t.Errorf("a zero filter's delete left %d accounts, want all 5", len(got))
	}
	if n, err := s.DeleteUpstreamAccounts(ctx, store.UpstreamFilter{AgentKeyID: f.jira, UserID: bob}); err != nil || n != 1 {
		t.Errorf("DeleteUpstreamAccounts(jira, bob) = %d, %v; want 1, nil", n, err)
	}
	if n, err := s.DeleteUpstreamAccounts(ctx, store.UpstreamFilter{AgentKeyID: f.jira, UserID: bob}); err != nil || n != 0 {
		t.Errorf("DeleteUpstreamAccounts(jira, bob) again = %d, %v; want 0, nil", n, err)
	}
	if n, err := s.DeleteUpstreamAccounts(ctx, store.UpstreamFilter{ProjectID: f.p1.ID, UserID: ann}); err != nil || n != 2 {
		t.Errorf("DeleteUpstreamAccounts(acme, ann) = %d, %v; want 2, nil", n, err)
	}
	want := []string{k(f.linear, cat), k(f.p2a, ann)}
	if diff := gocmp.Diff(want, accountKeys(t, s, store.UpstreamFilter{})); diff != "" {
		t.Errorf("accounts left (-want +got):\n%s", diff)
	}
}

// testUpstreamCascades: deleting a user, removing a member from a project
// and revoking an agent key delete the matching accounts, and only those.
func testUpstreamCascades(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := newUpstreamFixture(t, s)
	ann, bob, cat := f.ann.ID, f.bob.ID, f.cat.ID
	for _, u := range []int64{ann, bob, cat} {
		for _, p := range []int64{f.p1.ID, f.p2.ID} {
			if _, err := s.SetMember(ctx, store.Member{ProjectID: p, UserID: u, Role: store.RoleViewer}); err != nil {
				t.Fatalf("SetMember: %v", err)
			}
		}
		mustPutAccount(t, s, f.account(f.p1.ID, f.jira, u))
		mustPutAccount(t, s, f.account(f.p1.ID, f.linear, u))
		mustPutAccount(t, s, f.account(f.p2.ID, f.p2a, u))
	}
	k := func(key string, user int64) string { return fmt.Sprintf("%s/%d", key, user) }
	check := func(what string, want []string) {
		t.Helper()
		if diff := gocmp.Diff(want, accountKeys(t, s, store.UpstreamFilter{})); diff != "" {
			t.Errorf("accounts after %s (-want +got):\n%s", what, diff)
		}
	}

	if err := s.DeleteUser(ctx, bob); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	check("deleting bob", []string{k(f.jira, ann), k(f.jira, cat), k(f.linear, ann), k(f.linear, cat), k(f.p2a, ann), k(f.p2a, cat)})

	if err := s.RemoveMember(ctx, f.p1.ID, cat); err != nil {
		t.Fatalf("RemoveMember: %v", err)
	}
	check("removing cat from acme", []string{k(f.jira, ann), k(f.linear, ann), k(f.p2a, ann), k(f.p2a, cat)})
	wantErr(t, "RemoveMember of no member", s.RemoveMember(ctx, f.p1.ID, cat), store.ErrNotFound)

	if err := s.RevokeKey(ctx, f.jira); err != nil {
		t.Fatalf("RevokeKey: %v", err)
	}
	check("revoking the jira key", []string{k(f.linear, ann), k(f.p2a, ann), k(f.p2a, cat)})
	if err := s.RevokeKey(ctx, f.jira); err != nil {
		t.Errorf("second RevokeKey: %v", err)
	}
	wantErr(t, "RevokeKey of an unknown key", s.RevokeKey(ctx, "key_nope"), store.ErrNotFound)
	wantErr(t, "PutUpstreamAccount for the revoked key", s.PutUpstreamAccount(ctx, f.account(f.p1.ID, f.jira, ann)), store.ErrNotFound)
	check("putting an account for the revoked key", []string{k(f.linear, ann), k(f.p2a, ann), k(f.p2a, cat)})
}

// testUpstreamUpdateRace: of many updates of one account at the same
// version at once, exactly one applies.
func testUpstreamUpdateRace(t *testing.T, s store.Store) {
	f := newUpstreamFixture(t, s)
	mustPutAccount(t, s, f.account(f.p1.ID, f.jira, f.ann.ID))
	var (
		wg  sync.WaitGroup
		won atomic.Int32
	)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := f.account(f.p1.ID, f.jira, f.ann.ID)
			a.Version, a.Access = 1, fmt.Appendf(nil, "sealed-%d", i)
			ok, err := s.UpdateUpstreamAccount(context.Background(), a)
			if err != nil {
				t.Errorf("UpdateUpstreamAccount: %v", err)
			}
			if ok {
				won.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := won.Load(); n != 1 {
		t.Errorf("%d updates applied, want exactly 1", n)
	}
	got, err := s.UpstreamAccount(t.Context(), f.jira, f.ann.ID)
	if err != nil || got.Version != 2 {
		t.Errorf("after the race: version %d, %v; want 2", got.Version, err)
	}
}

// testUpstreamClients: a client comes back as put, a second put for the
// same resource and redirect replaces it, a public client has no secret,
// and the list is by resource then redirect.
func testUpstreamClients(t *testing.T, s store.Store) {
	ctx := t.Context()
	at := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Hour)
	c := store.UpstreamClient{
		Resource: "https://mcp.example.com/mcp", RedirectURI: "https://gw.example.com/upstream/callback",
		Issuer: "https://auth.example.com", AuthURL: "https://auth.example.com/authorize", TokenURL: "https://auth.example.com/token",
		ClientID: "dcr-1", Secret: []byte{1, 9, 9, 0, 7}, Scopes: []string{"read", "write"}, CreatedAt: at,
		Indicator: "https://mcp.example.com/",
	}
	if _, err := s.UpstreamClient(ctx, c.Resource, c.RedirectURI); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpstreamClient before any = %v, want ErrNotFound", err)
	}
	if err := s.PutUpstreamClient(ctx, c); err != nil {
		t.Fatalf("PutUpstreamClient: %v", err)
	}
	got, err := s.UpstreamClient(ctx, c.Resource, c.RedirectURI)
	if err != nil {
		t.Fatalf("UpstreamClient: %v", err)
	}
	if diff := gocmp.Diff(c, got); diff != "" {
		t.Errorf("client as put (-want +got):\n%s", diff)
	}
	if _, err := s.UpstreamClient(ctx, c.Resource, "http://127.0.0.1:1/upstream/callback"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpstreamClient of another redirect = %v, want ErrNotFound", err)
	}

	public := c
	public.ClientID, public.Secret, public.Scopes, public.CreatedAt = "https://gw.example.com/client.json", nil, nil, time.Time{}
	public.Indicator = "https://mcp.example.com/mcp"
	clk := startClock()
	if err := s.PutUpstreamClient(ctx, public); err != nil {
		t.Fatalf("PutUpstreamClient (replace): %v", err)
	}
	if got, err = s.UpstreamClient(ctx, c.Resource, c.RedirectURI); err != nil {
		t.Fatalf("UpstreamClient: %v", err)
	}
	clk.check(t, "CreatedAt set by the store", got.CreatedAt)
	public.CreatedAt = got.CreatedAt
	if diff := gocmp.Diff(public, got); diff != "" {
		t.Errorf("replaced client (-want +got):\n%s", diff)
	}

	other := c
	other.Resource = "https://a.example.com/mcp"
	second := c
	second.RedirectURI = "https://gw2.example.com/upstream/callback"
	for _, x := range []store.UpstreamClient{second, other} {
		if err := s.PutUpstreamClient(ctx, x); err != nil {
			t.Fatalf("PutUpstreamClient: %v", err)
		}
	}
	list, err := s.UpstreamClients(ctx)
	if err != nil {
		t.Fatalf("UpstreamClients: %v", err)
	}
	var keys []string
	for _, x := range list {
		keys = append(keys, x.Resource+" "+x.RedirectURI)
	}
	want := []string{
		"https://a.example.com/mcp https://gw.example.com/upstream/callback",
		"https://mcp.example.com/mcp https://gw.example.com/upstream/callback",
		"https://mcp.example.com/mcp https://gw2.example.com/upstream/callback",
	}
	if diff := gocmp.Diff(want, keys); diff != "" {
		t.Errorf("UpstreamClients (-want +got):\n%s", diff)
	}
}

// testUpstreamPutRevokeRace: puts of accounts for an agent key racing its
// revocation leave none behind: each put lands wholly before the revoke
// (whose cascade deletes it) or finds the key revoked.
func testUpstreamPutRevokeRace(t *testing.T, s store.Store) {
	f := newUpstreamFixture(t, s)
	users := []store.User{f.ann, f.bob, f.cat}
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.PutUpstreamAccount(context.Background(), f.account(f.p1.ID, f.jira, users[i%3].ID))
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Errorf("PutUpstreamAccount: %v", err)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.RevokeKey(context.Background(), f.jira); err != nil {
			t.Errorf("RevokeKey: %v", err)
		}
	}()
	wg.Wait()
	if got := accountKeys(t, s, store.UpstreamFilter{AgentKeyID: f.jira}); len(got) != 0 {
		t.Errorf("accounts of the revoked key = %v, want none", got)
	}
}
