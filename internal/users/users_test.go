package users

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "spacefix.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestPasswordHash(t *testing.T) {
	h := HashPassword("correct horse battery")
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("hash %q is not an argon2id PHC string with the documented parameters", h)
	}
	if h2 := HashPassword("correct horse battery"); h2 == h {
		t.Error("two hashes of one password are equal: no salt")
	}
	for pw, want := range map[string]bool{"correct horse battery": true, "correct horse batterY": false, "": false} {
		if ok, err := CheckPassword(h, pw); err != nil || ok != want {
			t.Errorf("CheckPassword(%q) = %v, %v; want %v", pw, ok, err, want)
		}
	}
	for _, bad := range []string{"", "plain", "$argon2i$v=19$m=1,t=1,p=1$AA$AA", "$argon2id$v=19$m=x$AA$AA"} {
		if _, err := CheckPassword(bad, "x"); err == nil {
			t.Errorf("CheckPassword(%q) accepted a malformed hash", bad)
		}
	}
}

func TestSetupAndSignUp(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	path, err := SetupPath(ctx, st)
	if err != nil || !strings.HasPrefix(path, "/setup/") {
		t.Fatalf("SetupPath on an empty store = %q, %v", path, err)
	}
	secret := strings.TrimPrefix(path, "/setup/")
	for _, tt := range []struct{ email, pw, want string }{
		{"not an email", "long enough password", "Enter an email address"},
		{"ada@example.com", "short", "at least 10 characters"},
		{"ada@example.com", "long enough password", ""},
		{"bob@example.com", "long enough password", "unknown, used or expired"},
	} {
		u, err := SignUp(ctx, st, secret, tt.email, tt.pw)
		if tt.want == "" {
			if err != nil || !u.Admin {
				t.Fatalf("SignUp with the setup link = %+v, %v; want an admin", u, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("SignUp(%q, %q): %v, want an error containing %q", tt.email, tt.pw, err, tt.want)
		}
	}
	if path, err := SetupPath(ctx, st); err != nil || path != "" {
		t.Errorf("SetupPath with a user = %q, %v; want none", path, err)
	}
	if _, err := SignIn(ctx, st, "ADA@example.com", "long enough password"); err != nil {
		t.Errorf("SignIn: %v", err)
	}
	for _, c := range [][2]string{{"ada@example.com", "wrong password!"}, {"nobody@example.com", "long enough password"}} {
		if _, err := SignIn(ctx, st, c[0], c[1]); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("SignIn(%q): %v, want ErrBadCredentials", c[0], err)
		}
	}
}

func TestInviteForOneAddress(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	admin, err := st.CreateUser(ctx, store.User{Email: "ada@example.com", Admin: true}, HashPassword("x"))
	if err != nil {
		t.Fatal(err)
	}
	path, err := Invite(ctx, st, admin, "bob@example.com", false)
	if err != nil || !strings.HasPrefix(path, "/join/") {
		t.Fatalf("Invite = %q, %v", path, err)
	}
	secret := strings.TrimPrefix(path, "/join/")
	if _, err := SignUp(ctx, st, secret, "eve@example.com", "long enough password"); err == nil || !strings.Contains(err.Error(), "bob@example.com") {
		t.Errorf("SignUp with another address: %v, want refused naming the invited address", err)
	}
	u, err := SignUp(ctx, st, secret, "Bob@Example.com", "long enough password")
	if err != nil || u.Admin {
		t.Fatalf("SignUp = %+v, %v; want a user who is not an admin", u, err)
	}
	if _, err := SignUp(ctx, st, secret, "bob@example.com", "long enough password"); !errors.Is(err, ErrBadInvite) {
		t.Errorf("second SignUp with one link: %v, want ErrBadInvite", err)
	}
}

func TestSessions(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	u, err := st.CreateUser(ctx, store.User{Email: "ada@example.com"}, HashPassword("x"))
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := NewSession(ctx, st, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := SessionUser(ctx, st, tok); err != nil || got.ID != u.ID {
		t.Fatalf("SessionUser = %+v, %v", got, err)
	}
	if err := EndSession(ctx, st, tok); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{tok, "", "sfx_session_forged"} {
		if _, err := SessionUser(ctx, st, bad); !errors.Is(err, ErrNoSession) {
			t.Errorf("SessionUser(%q): %v, want ErrNoSession", bad, err)
		}
	}
}

func TestAPITokens(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	tok, secret, err := CreateAPIToken(ctx, st, "ci", 0)
	if err != nil || !strings.HasPrefix(secret, "sfx_admin_") {
		t.Fatalf("CreateAPIToken = %+v, %q, %v", tok, secret, err)
	}
	if got, err := VerifyAPIToken(ctx, st, secret); err != nil || got.ID != tok.ID {
		t.Errorf("VerifyAPIToken = %+v, %v", got, err)
	}
	if err := st.RevokeAPIToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{secret, "sfx_admin_x", "sfx_client_x", ""} {
		if _, err := VerifyAPIToken(ctx, st, bad); !errors.Is(err, ErrUnknownToken) {
			t.Errorf("VerifyAPIToken(%q): %v, want ErrUnknownToken", bad, err)
		}
	}
}
