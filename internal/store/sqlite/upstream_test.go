package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
)

// TestUpstreamTokensSealedAtRest reads an upstream account's row straight
// from the SQLite file, as someone with a copy of the file would: its
// access and refresh columns hold neither token, in the clear or in
// base64 or hex, and neither does any byte of the file or its WAL; with
// the key file, they open again.
func TestUpstreamTokensSealedAtRest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "spacefix.db")
	s := openTemp(t, path)
	box, _, err := secrets.LoadOrCreate(filepath.Join(dir, "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.CreateProject(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateKey(ctx, store.Key{ID: "key_jira", ProjectID: p.ID, Kind: store.KindAgent}, hash("s")); err != nil {
		t.Fatal(err)
	}
	u, err := s.CreateUser(ctx, store.User{Email: "ann@example.com"}, "$argon2id$x")
	if err != nil {
		t.Fatal(err)
	}
	access, refresh := "gho_AccessToken_7f3a9c1e5b2d4f60", "ghr_RefreshToken_0d9e8c7b6a5f4e3d"
	accessCtx, refreshCtx := "upstream-access:key_jira:1", "upstream-refresh:key_jira:1"
	err = s.PutUpstreamAccount(ctx, store.UpstreamAccount{
		ProjectID: p.ID, AgentKeyID: "key_jira", UserID: u.ID, Resource: "https://mcp.example.com/mcp",
		Access: box.Seal([]byte(access), accessCtx), Refresh: box.Seal([]byte(refresh), refreshCtx),
		ExpiresAt: time.Now().Add(time.Hour), ClientID: "client-7",
	})
	if err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rawAccess, rawRefresh []byte
	if err := db.QueryRowContext(ctx, `SELECT access, refresh FROM upstream_accounts WHERE agent_key_id = 'key_jira'`).Scan(&rawAccess, &rawRefresh); err != nil {
		t.Fatalf("read the row: %v", err)
	}
	files := map[string][]byte{"access column": rawAccess, "refresh column": rawRefresh}
	for _, f := range []string{path, path + "-wal"} {
		if b, err := os.ReadFile(f); err == nil {
			files[filepath.Base(f)] = b
		}
	}
	for _, tok := range []string{access, refresh} {
		forms := map[string]string{
			"plain":        tok,
			"base64":       base64.StdEncoding.EncodeToString([]byte(tok)),
			"base64 (raw)": base64.RawStdEncoding.EncodeToString([]byte(tok)),
			"base64url":    base64.RawURLEncoding.EncodeToString([]byte(tok)),
			"hex":          hex.EncodeToString([]byte(tok)),
			"token's tail": tok[len(tok)-12:],
		}
		for where, b := range files {
			for form, s := range forms {
				if bytes.Contains(b, []byte(s)) {
					t.Errorf("the %s holds the token %s", where, form)
				}
			}
		}
	}
	if len(rawAccess) < 1+8+12+len(access)+16 || rawAccess[0] != 1 {
		t.Errorf("the access column (%d bytes, version %d) is not a sealed value", len(rawAccess), rawAccess[0])
	}

	// With the key, and only under its own context, the row opens.
	a, err := s.UpstreamAccount(ctx, "key_jira", u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := box.Open(a.Access, accessCtx); err != nil || string(got) != access {
		t.Errorf("Open(access) = %q, %v", got, err)
	}
	if got, err := box.Open(a.Refresh, refreshCtx); err != nil || string(got) != refresh {
		t.Errorf("Open(refresh) = %q, %v", got, err)
	}
	if _, err := box.Open(a.Refresh, accessCtx); err == nil {
		t.Error("the refresh token opened as an access token")
	}
}
