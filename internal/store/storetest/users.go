package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/store"
)

func mustUser(t *testing.T, s store.Store, email string, admin bool) store.User {
	t.Helper()
	u, err := s.CreateUser(t.Context(), store.User{Email: email, Admin: admin}, "$argon2id$"+email)
	if err != nil {
		t.Fatalf("CreateUser(%q): %v", email, err)
	}
	return u
}

func testUsers(t *testing.T, s store.Store) {
	ctx := t.Context()
	if us, err := s.Users(ctx); err != nil || len(us) != 0 {
		t.Fatalf("Users on an empty store = %v, %v; want none", us, err)
	}
	clk := startClock()
	ada := mustUser(t, s, "Ada@Example.com", true)
	clk.check(t, "CreatedAt", ada.CreatedAt)
	bob := mustUser(t, s, "bob@example.com", false)
	if ada.ID == 0 || ada.ID == bob.ID || !ada.Admin || bob.Admin {
		t.Errorf("CreateUser = %+v, %+v; want distinct ids and the admin flags given", ada, bob)
	}
	_, err := s.CreateUser(ctx, store.User{Email: "ada@example.COM"}, "h")
	wantErr(t, "CreateUser of a taken email in other case", err, store.ErrExists)

	got, pw, err := s.UserByEmail(ctx, "ADA@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ada, got); diff != "" || pw != "$argon2id$Ada@Example.com" {
		t.Errorf("UserByEmail mismatch, password hash %q (-want +got):\n%s", pw, diff)
	}
	if got, err := s.UserByID(ctx, bob.ID); err != nil || got != bob {
		t.Errorf("UserByID = %+v, %v; want %+v", got, err, bob)
	}
	if us, err := s.Users(ctx); err != nil || !cmp.Equal(us, []store.User{ada, bob}) {
		t.Errorf("Users = %+v, %v; want ada then bob", us, err)
	}
	_, _, err = s.UserByEmail(ctx, "nobody@example.com")
	wantErr(t, "UserByEmail(unknown)", err, store.ErrNotFound)
	_, err = s.UserByID(ctx, bob.ID+1000)
	wantErr(t, "UserByID(unknown)", err, store.ErrNotFound)

	// A new password ends the user's sessions, not others'.
	sa := mustSession(t, s, ada.ID, "ada-session")
	mustSession(t, s, bob.ID, "bob-session")
	if err := s.SetPassword(ctx, ada.ID, "new-hash"); err != nil {
		t.Fatal(err)
	}
	if _, pw, _ := s.UserByEmail(ctx, ada.Email); pw != "new-hash" {
		t.Errorf("password hash after SetPassword = %q, want new-hash", pw)
	}
	_, err = s.SessionByHash(ctx, hash(sa))
	wantErr(t, "session after SetPassword", err, store.ErrNotFound)
	if _, err := s.SessionByHash(ctx, hash("bob-session")); err != nil {
		t.Errorf("another user's session after SetPassword: %v", err)
	}
	wantErr(t, "SetPassword(unknown)", s.SetPassword(ctx, bob.ID+1000, "x"), store.ErrNotFound)

	// A name, as given; "" takes it away; only that user's.
	if ada.Name != "" {
		t.Errorf("a new user's name = %q, want none", ada.Name)
	}
	if err := s.SetUserName(ctx, ada.ID, "Ada Lovelace"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.UserByID(ctx, ada.ID); err != nil || got.Name != "Ada Lovelace" {
		t.Errorf("UserByID after SetUserName = %+v, %v; want the name", got, err)
	}
	if got, _, err := s.UserByEmail(ctx, ada.Email); err != nil || got.Name != "Ada Lovelace" {
		t.Errorf("UserByEmail after SetUserName = %+v, %v; want the name", got, err)
	}
	if got, _ := s.UserByID(ctx, bob.ID); got.Name != "" {
		t.Errorf("another user's name = %q, want none", got.Name)
	}
	if err := s.SetUserName(ctx, ada.ID, ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.UserByID(ctx, ada.ID); got.Name != "" {
		t.Errorf("name after SetUserName(\"\") = %q, want none", got.Name)
	}
	wantErr(t, "SetUserName(unknown)", s.SetUserName(ctx, bob.ID+1000, "x"), store.ErrNotFound)
}

func mustSession(t *testing.T, s store.Store, userID int64, token string) string {
	t.Helper()
	if _, err := s.CreateSession(t.Context(), store.Session{UserID: userID, ExpiresAt: time.Now().Add(time.Hour)}, hash(token)); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return token
}

func testSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := mustUser(t, s, "ada@example.com", true)
	exp := time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
	clk := startClock()
	sess, err := s.CreateSession(ctx, store.Session{UserID: u.ID, ExpiresAt: exp}, hash("tok"))
	if err != nil {
		t.Fatal(err)
	}
	clk.check(t, "CreatedAt", sess.CreatedAt)
	got, err := s.SessionByHash(ctx, hash("tok"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sess, got); diff != "" || !got.ExpiresAt.Equal(exp) {
		t.Errorf("SessionByHash mismatch (-want +got):\n%s", diff)
	}
	_, err = s.CreateSession(ctx, store.Session{UserID: u.ID + 1000, ExpiresAt: exp}, hash("x"))
	wantErr(t, "CreateSession for a missing user", err, store.ErrNotFound)
	if _, err := s.CreateSession(ctx, store.Session{UserID: u.ID}, hash("y")); err == nil {
		t.Error("CreateSession with no expiry succeeded, want an error")
	}

	if _, err := s.CreateSession(ctx, store.Session{UserID: u.ID, ExpiresAt: time.Now().Add(-time.Second)}, hash("old")); err != nil {
		t.Fatal(err)
	}
	_, err = s.SessionByHash(ctx, hash("old"))
	wantErr(t, "SessionByHash(expired)", err, store.ErrNotFound)

	if err := s.DeleteSession(ctx, hash("tok")); err != nil {
		t.Fatal(err)
	}
	_, err = s.SessionByHash(ctx, hash("tok"))
	wantErr(t, "SessionByHash after DeleteSession", err, store.ErrNotFound)
	if err := s.DeleteSession(ctx, hash("tok")); err != nil {
		t.Errorf("DeleteSession twice: %v", err)
	}
}

func testInvites(t *testing.T, s store.Store) {
	ctx := t.Context()
	exp := time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
	clk := startClock()
	inv, err := s.CreateInvite(ctx, store.Invite{ID: "inv_a", Email: "bob@example.com", CreatedBy: 7, ExpiresAt: exp}, hash("a"))
	if err != nil {
		t.Fatal(err)
	}
	clk.check(t, "CreatedAt", inv.CreatedAt)
	want := store.Invite{ID: "inv_a", Email: "bob@example.com", CreatedBy: 7, CreatedAt: inv.CreatedAt, ExpiresAt: exp}
	if diff := cmp.Diff(want, inv); diff != "" {
		t.Errorf("CreateInvite mismatch (-want +got):\n%s", diff)
	}
	_, err = s.CreateInvite(ctx, store.Invite{ID: "inv_a", ExpiresAt: exp}, hash("b"))
	wantErr(t, "CreateInvite of a taken id", err, store.ErrExists)

	if got, err := s.InviteByHash(ctx, hash("a")); err != nil || got != inv {
		t.Errorf("InviteByHash = %+v, %v; want %+v", got, err, inv)
	}
	used, err := s.UseInvite(ctx, hash("a"))
	if err != nil {
		t.Fatal(err)
	}
	if used.ID != "inv_a" || used.UsedAt.IsZero() {
		t.Errorf("UseInvite = %+v; want inv_a marked used", used)
	}
	_, err = s.UseInvite(ctx, hash("a"))
	wantErr(t, "UseInvite twice", err, store.ErrNotFound)
	_, err = s.InviteByHash(ctx, hash("a"))
	wantErr(t, "InviteByHash of a used invite", err, store.ErrNotFound)

	if live, err := s.Invites(ctx); err != nil || len(live) != 0 {
		t.Errorf("Invites after the only one was used = %+v, %v; want none", live, err)
	}
	for _, id := range []string{"inv_b", "inv_c"} {
		if _, err := s.CreateInvite(ctx, store.Invite{ID: id, ExpiresAt: exp}, hash(id)); err != nil {
			t.Fatal(err)
		}
	}
	if live, err := s.Invites(ctx); err != nil || len(live) != 2 || live[0].ID != "inv_b" || live[1].ID != "inv_c" {
		t.Errorf("Invites = %+v, %v; want inv_b, inv_c", live, err)
	}
	if err := s.RevokeInvite(ctx, "inv_b"); err != nil {
		t.Fatal(err)
	}
	_, err = s.UseInvite(ctx, hash("inv_b"))
	wantErr(t, "UseInvite of a revoked invite", err, store.ErrNotFound)
	wantErr(t, "RevokeInvite twice", s.RevokeInvite(ctx, "inv_b"), store.ErrNotFound)
	wantErr(t, "RevokeInvite of a used invite", s.RevokeInvite(ctx, "inv_a"), store.ErrNotFound)
	if live, _ := s.Invites(ctx); len(live) != 1 || live[0].ID != "inv_c" {
		t.Errorf("Invites after revoking inv_b = %+v; want inv_c", live)
	}

	setup, err := s.CreateInvite(ctx, store.Invite{ID: "inv_setup", Admin: true, ExpiresAt: time.Now().Add(-time.Second)}, hash("setup"))
	if err != nil || !setup.Admin {
		t.Fatalf("CreateInvite(admin) = %+v, %v", setup, err)
	}
	_, err = s.UseInvite(ctx, hash("setup"))
	wantErr(t, "UseInvite of an expired invite", err, store.ErrNotFound)
	_, err = s.UseInvite(ctx, hash("unknown"))
	wantErr(t, "UseInvite(unknown)", err, store.ErrNotFound)
}

// testInviteUsedOnce uses one invite from many goroutines: one wins.
func testInviteUsedOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := s.CreateInvite(ctx, store.Invite{ID: "inv_race", ExpiresAt: time.Now().Add(time.Hour)}, hash("race")); err != nil {
		t.Fatal(err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for range 8 {
		wg.Go(func() {
			if _, err := s.UseInvite(ctx, hash("race")); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d of 8 concurrent UseInvite calls succeeded, want exactly 1", wins)
	}
}

func testAPITokens(t *testing.T, s store.Store) {
	ctx := t.Context()
	clk := startClock()
	a, err := s.CreateAPIToken(ctx, store.APIToken{ID: "tok_a", Name: "ci", CreatedBy: 3}, hash("a"))
	if err != nil {
		t.Fatal(err)
	}
	clk.check(t, "CreatedAt", a.CreatedAt)
	b, err := s.CreateAPIToken(ctx, store.APIToken{ID: "tok_b"}, hash("b"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateAPIToken(ctx, store.APIToken{ID: "tok_a"}, hash("c"))
	wantErr(t, "CreateAPIToken of a taken id", err, store.ErrExists)
	_, err = s.CreateAPIToken(ctx, store.APIToken{ID: "tok_c"}, hash("a"))
	wantErr(t, "CreateAPIToken of a taken hash", err, store.ErrExists)
	if _, err := s.CreateAPIToken(ctx, store.APIToken{ID: "tok_d"}, []byte("short")); err == nil {
		t.Error("CreateAPIToken with a bad hash succeeded, want an error")
	}

	if got, err := s.APITokenByHash(ctx, hash("a")); err != nil || got != a {
		t.Errorf("APITokenByHash = %+v, %v; want %+v", got, err, a)
	}
	if all, err := s.APITokens(ctx); err != nil || !cmp.Equal(all, []store.APIToken{a, b}) {
		t.Errorf("APITokens = %+v, %v; want a then b", all, err)
	}
	if err := s.RevokeAPIToken(ctx, "tok_a"); err != nil {
		t.Fatal(err)
	}
	first, err := s.APITokenByHash(ctx, hash("a"))
	if err != nil || !first.Revoked() {
		t.Fatalf("after revoke = %+v, %v; want revoked", first, err)
	}
	time.Sleep(2 * time.Millisecond)
	if err := s.RevokeAPIToken(ctx, "tok_a"); err != nil {
		t.Errorf("RevokeAPIToken twice: %v", err)
	}
	if again, _ := s.APITokenByHash(ctx, hash("a")); !again.RevokedAt.Equal(first.RevokedAt) {
		t.Errorf("second revoke moved RevokedAt from %v to %v", first.RevokedAt, again.RevokedAt)
	}
	wantErr(t, "RevokeAPIToken(unknown)", s.RevokeAPIToken(ctx, "tok_x"), store.ErrNotFound)
	_, err = s.APITokenByHash(ctx, hash("unknown"))
	wantErr(t, "APITokenByHash(unknown)", err, store.ErrNotFound)
}
