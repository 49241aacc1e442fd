package storetest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

func oauthHash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func testOAuthClients(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.OAuthClient(ctx, "client_nope")
	wantErr(t, "OAuthClient of an unknown id", err, store.ErrNotFound)
	clk := startClock()
	meta := []byte(`{"client_name":"Claude","redirect_uris":["https://claude.ai/api/mcp/auth_callback"]}`)
	if err := s.CreateOAuthClient(ctx, store.OAuthClient{ID: "client_a", Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateOAuthClient(ctx, store.OAuthClient{ID: "client_b", Metadata: []byte(`{}`), SecretHash: oauthHash("s")}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "CreateOAuthClient of a taken id", s.CreateOAuthClient(ctx, store.OAuthClient{ID: "client_a", Metadata: meta}), store.ErrExists)
	a, err := s.OAuthClient(ctx, "client_a")
	if err != nil {
		t.Fatal(err)
	}
	clk.check(t, "CreatedAt", a.CreatedAt)
	if !bytes.Equal(a.Metadata, meta) || a.SecretHash != nil {
		t.Errorf("OAuthClient = %+v; want the metadata given and no secret", a)
	}
	b, err := s.OAuthClient(ctx, "client_b")
	if err != nil || !bytes.Equal(b.SecretHash, oauthHash("s")) {
		t.Errorf("OAuthClient(client_b) = %+v, %v; want its secret hash", b, err)
	}
}

func testOAuthGrants(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "shop")
	other := mustProject(t, s, "other")
	ada := mustUser(t, s, "ada@example.com", true)
	if err := s.SetUserName(ctx, ada.ID, "Ada"); err != nil {
		t.Fatal(err)
	}
	clk := startClock()
	g1, err := s.CreateOAuthGrant(ctx, store.OAuthGrant{ID: "app_1", ProjectID: p.ID, UserID: ada.ID, ClientID: "client_a",
		ClientName: "Claude", Scope: "mcp:read mcp:write", Resource: "https://gw.example/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	clk.check(t, "CreatedAt", g1.CreatedAt)
	if g1.ProjectName != "shop" || g1.UserEmail != "ada@example.com" || g1.UserName != "Ada" || g1.Scope != "mcp:read mcp:write" ||
		g1.Resource != "https://gw.example/mcp" || !g1.LastUsedAt.IsZero() || g1.Revoked() {
		t.Errorf("CreateOAuthGrant = %+v; want the fields given, names filled, unused and live", g1)
	}
	_, err = s.CreateOAuthGrant(ctx, store.OAuthGrant{ID: "app_1", ProjectID: p.ID})
	wantErr(t, "CreateOAuthGrant of a taken id", err, store.ErrExists)
	time.Sleep(2 * time.Millisecond) // distinct creation times order the list
	if _, err := s.CreateOAuthGrant(ctx, store.OAuthGrant{ID: "app_2", ProjectID: p.ID, UserID: ada.ID, ClientID: "https://app.example/client.json",
		ClientName: "Other", Scope: "mcp:read", Resource: "https://gw.example/mcp"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOAuthGrant(ctx, store.OAuthGrant{ID: "app_3", ProjectID: other.ID, UserID: ada.ID, ClientID: "c", ClientName: "c", Scope: "mcp:read"}); err != nil {
		t.Fatal(err)
	}
	gs, err := s.OAuthGrants(ctx, p.ID)
	if err != nil || len(gs) != 2 || gs[0].ID != "app_2" || gs[1].ID != "app_1" {
		t.Fatalf("OAuthGrants = %+v, %v; want app_2 then app_1 (newest first, this project only)", gs, err)
	}

	used := time.Now().Add(time.Minute).Truncate(time.Millisecond).UTC()
	if err := s.TouchOAuthGrant(ctx, "app_1", used); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchOAuthGrant(ctx, "app_1", used.Add(-time.Hour)); err != nil { // an older use does not move it back
		t.Fatal(err)
	}
	if g, _ := s.OAuthGrant(ctx, "app_1"); !g.LastUsedAt.Equal(used) {
		t.Errorf("LastUsedAt = %v; want %v", g.LastUsedAt, used)
	}

	if err := s.RevokeOAuthGrant(ctx, "app_1"); err != nil {
		t.Fatal(err)
	}
	g, _ := s.OAuthGrant(ctx, "app_1")
	if !g.Revoked() {
		t.Errorf("grant after RevokeOAuthGrant = %+v; want revoked", g)
	}
	if err := s.RevokeOAuthGrant(ctx, "app_1"); err != nil {
		t.Errorf("RevokeOAuthGrant twice: %v; want nil", err)
	}
	if again, _ := s.OAuthGrant(ctx, "app_1"); !again.RevokedAt.Equal(g.RevokedAt) {
		t.Errorf("revoking twice moved RevokedAt from %v to %v", g.RevokedAt, again.RevokedAt)
	}
	wantErr(t, "RevokeOAuthGrant of an unknown id", s.RevokeOAuthGrant(ctx, "app_nope"), store.ErrNotFound)
	_, err = s.OAuthGrant(ctx, "app_nope")
	wantErr(t, "OAuthGrant of an unknown id", err, store.ErrNotFound)
	if gs, _ := s.OAuthGrants(ctx, p.ID); len(gs) != 1 || gs[0].ID != "app_2" {
		t.Errorf("OAuthGrants after revoking app_1 = %+v; want only app_2", gs)
	}
}

func testOAuthTokens(t *testing.T, s store.Store) {
	ctx := t.Context()
	exp := time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
	err := s.CreateOAuthToken(ctx, store.OAuthToken{Kind: store.OAuthCode, GrantID: "app_1", Data: []byte(`{"a":1}`), ExpiresAt: exp}, oauthHash("code"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateOAuthToken(ctx, store.OAuthToken{Kind: store.OAuthAccess, GrantID: "app_1", ExpiresAt: exp}, oauthHash("at")); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "CreateOAuthToken of a taken hash",
		s.CreateOAuthToken(ctx, store.OAuthToken{Kind: store.OAuthAccess, GrantID: "app_2", ExpiresAt: exp}, oauthHash("at")), store.ErrExists)
	if err := s.CreateOAuthToken(ctx, store.OAuthToken{Kind: store.OAuthAccess, GrantID: "app_1"}, oauthHash("x")); err == nil {
		t.Error("CreateOAuthToken without an expiry succeeded")
	}
	code, err := s.OAuthToken(ctx, oauthHash("code"))
	if err != nil || code.Kind != store.OAuthCode || code.GrantID != "app_1" || string(code.Data) != `{"a":1}` ||
		!code.ExpiresAt.Equal(exp) || !code.UsedAt.IsZero() {
		t.Errorf("OAuthToken(code) = %+v, %v; want the code as stored, unused", code, err)
	}
	at, err := s.OAuthToken(ctx, oauthHash("at"))
	if err != nil || at.Kind != store.OAuthAccess || at.Data != nil {
		t.Errorf("OAuthToken(access) = %+v, %v; want an access token without data", at, err)
	}
	_, err = s.OAuthToken(ctx, oauthHash("nope"))
	wantErr(t, "OAuthToken of an unknown hash", err, store.ErrNotFound)
	// A DPoP-bound access or refresh token keeps its binding.
	for _, kind := range []string{store.OAuthAccess, store.OAuthRefresh} {
		if err := s.CreateOAuthToken(ctx, store.OAuthToken{Kind: kind, GrantID: "app_1", Data: []byte(`{"jkt":"abc"}`), ExpiresAt: exp}, oauthHash("bound "+kind)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.OAuthToken(ctx, oauthHash("bound "+kind)); err != nil || string(got.Data) != `{"jkt":"abc"}` {
			t.Errorf("OAuthToken(bound %s) = %+v, %v; want its binding", kind, got, err)
		}
	}

	// Pruning takes the expired only.
	if err := s.CreateOAuthToken(ctx, store.OAuthToken{Kind: store.OAuthRefresh, GrantID: "app_1", ExpiresAt: time.Now().Add(-time.Minute)}, oauthHash("old")); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneOAuthTokens(ctx, time.Now()); err != nil || n != 1 {
		t.Errorf("PruneOAuthTokens = %d, %v; want 1", n, err)
	}
	_, err = s.OAuthToken(ctx, oauthHash("old"))
	wantErr(t, "OAuthToken of a pruned token", err, store.ErrNotFound)
	if _, err := s.OAuthToken(ctx, oauthHash("at")); err != nil {
		t.Errorf("a live token was pruned: %v", err)
	}
}

// testOAuthTokenUsedOnce: of many concurrent uses of one code, exactly one
// succeeds and the rest see ErrUsed with the token, so the caller can
// revoke its grant.
func testOAuthTokenUsedOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	if err := s.CreateOAuthToken(ctx, store.OAuthToken{Kind: store.OAuthRefresh, GrantID: "app_9", ExpiresAt: time.Now().Add(time.Hour)}, oauthHash("rt")); err != nil {
		t.Fatal(err)
	}
	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		ok, used, errs int
	)
	for range 8 {
		wg.Go(func() {
			tok, err := s.UseOAuthToken(ctx, oauthHash("rt"))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && tok.GrantID == "app_9":
				ok++
			case errors.Is(err, store.ErrUsed) && tok.GrantID == "app_9" && !tok.UsedAt.IsZero():
				used++
			default:
				errs++
				t.Errorf("UseOAuthToken = %+v, %v", tok, err)
			}
		})
	}
	wg.Wait()
	if ok != 1 || used != 7 {
		t.Errorf("8 concurrent uses: %d succeeded, %d saw ErrUsed; want 1 and 7", ok, used)
	}
	_, err := s.UseOAuthToken(ctx, oauthHash("unknown"))
	wantErr(t, "UseOAuthToken of an unknown hash", err, store.ErrNotFound)
}

// testOAuthClientPrune: registered clients go when nothing uses them: at
// once past unused if no grant names them, past idle once their grants
// are all revoked or without tokens. A client with a live grant stays.
func testOAuthClientPrune(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "shop")
	for _, id := range []string{"c_unused", "c_live", "c_revoked", "c_tokenless", "c_touched", "c_mixed"} {
		if err := s.CreateOAuthClient(ctx, store.OAuthClient{ID: id, Metadata: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	grant := func(id, client string) {
		t.Helper()
		if _, err := s.CreateOAuthGrant(ctx, store.OAuthGrant{ID: id, ProjectID: p.ID, UserID: 1, ClientID: client, ClientName: client, Scope: "mcp:read"}); err != nil {
			t.Fatal(err)
		}
	}
	token := func(grantID string) {
		t.Helper()
		if err := s.CreateOAuthToken(ctx, store.OAuthToken{Kind: store.OAuthRefresh, GrantID: grantID, ExpiresAt: time.Now().Add(time.Hour)}, oauthHash(grantID)); err != nil {
			t.Fatal(err)
		}
	}
	grant("g_live", "c_live")
	token("g_live")
	grant("g_revoked", "c_revoked")
	token("g_revoked")
	if err := s.RevokeOAuthGrant(ctx, "g_revoked"); err != nil {
		t.Fatal(err)
	}
	grant("g_tokenless", "c_tokenless")
	grant("g_touched", "c_touched")
	later := time.Now().Add(time.Hour)
	if err := s.TouchOAuthGrant(ctx, "g_touched", later); err != nil {
		t.Fatal(err)
	}
	grant("g_mixed_old", "c_mixed")
	if err := s.RevokeOAuthGrant(ctx, "g_mixed_old"); err != nil {
		t.Fatal(err)
	}
	grant("g_mixed_live", "c_mixed")
	token("g_mixed_live")

	left := func(want ...string) {
		t.Helper()
		if n, err := s.CountOAuthClients(ctx); err != nil || n != int64(len(want)) {
			t.Errorf("CountOAuthClients = %d, %v; want %d", n, err, len(want))
		}
		for _, id := range []string{"c_unused", "c_live", "c_revoked", "c_tokenless", "c_touched", "c_mixed"} {
			_, err := s.OAuthClient(ctx, id)
			if kept := slices.Contains(want, id); kept && err != nil || !kept && !errors.Is(err, store.ErrNotFound) {
				t.Errorf("OAuthClient(%s): %v; want it kept: %v", id, err, kept)
			}
		}
	}
	prune := func(unused, idle time.Time, want int64) {
		t.Helper()
		if n, err := s.PruneOAuthClients(ctx, unused, idle); err != nil || n != want {
			t.Errorf("PruneOAuthClients(%v, %v) = %d, %v; want %d", unused, idle, n, err, want)
		}
	}
	left("c_unused", "c_live", "c_revoked", "c_tokenless", "c_touched", "c_mixed")
	now := time.Now()
	prune(now.Add(-time.Hour), now.Add(-30*24*time.Hour), 0) // all registered within the hour
	left("c_unused", "c_live", "c_revoked", "c_tokenless", "c_touched", "c_mixed")
	soon := time.Now().Add(time.Minute)
	prune(soon, now.Add(-30*24*time.Hour), 1) // never granted: goes; the rest were active lately
	left("c_live", "c_revoked", "c_tokenless", "c_touched", "c_mixed")
	prune(soon, soon, 2) // revoked, and without tokens, since before idle
	left("c_live", "c_touched", "c_mixed")
	prune(later.Add(time.Minute), later.Add(time.Minute), 1) // the last use is past idle too
	left("c_live", "c_mixed")
}
