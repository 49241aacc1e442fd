package gateway

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
)

// After a rotation of the secret key file (a new key on the first line,
// the old one below), the start seals every upstream token sealed with
// the old key again with the new one, and says how many at INFO.
func TestStartResealsUpstreamTokens(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := openSQLite(t, filepath.Join(dir, "spacefix.db"))
	p, err := st.CreateProject(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	k, err := st.CreateKey(ctx, store.Key{ID: "key_bridge", ProjectID: p.ID, Kind: store.KindAgent}, []byte(strings.Repeat("b", 32)))
	if err != nil {
		t.Fatal(err)
	}
	u, err := st.CreateUser(ctx, store.User{Email: "ada@example.com"}, "x-hash")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "secret.key")
	oldKey, newKey := secrets.NewKey(), secrets.NewKey()
	if err := os.WriteFile(keyFile, []byte(oldKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old, err := secrets.Load(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	access := "upstream-access:" + k.ID + ":" + strconv.FormatInt(u.ID, 10)
	refresh := "upstream-refresh:" + k.ID + ":" + strconv.FormatInt(u.ID, 10)
	if err := st.PutUpstreamAccount(ctx, store.UpstreamAccount{
		ProjectID: p.ID, AgentKeyID: k.ID, UserID: u.ID, Resource: "https://mcp.example.com/mcp",
		Access: old.Seal([]byte("at-1"), access), Refresh: old.Seal([]byte("rt-1"), refresh), ClientID: "c1",
	}); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(keyFile, []byte(newKey+"\n"+oldKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g, logs, err := newOn(t, Config{SecretKeyFile: keyFile}, st)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := g.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	a, err := st.UpstreamAccount(ctx, k.ID, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := secrets.Load(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if !rotated.Current(a.Access) || !rotated.Current(a.Refresh) {
		t.Error("after the start, a token is still sealed with the old key")
	}
	for _, v := range []struct {
		sealed     []byte
		ctx, plain string
	}{{a.Access, access, "at-1"}, {a.Refresh, refresh, "rt-1"}} {
		if got, err := rotated.Open(v.sealed, v.ctx); err != nil || string(got) != v.plain {
			t.Errorf("Open = %q, %v; want %q", got, err, v.plain)
		}
	}
	if !strings.Contains(logs.String(), `level=INFO msg="sealed upstream tokens again with the secret key file's first key" values=2`) {
		t.Errorf("the log does not say 2 values were sealed again:\n%s", logs)
	}
	if strings.Contains(logs.String(), "at-1") || strings.Contains(logs.String(), "rt-1") {
		t.Errorf("the log shows a token:\n%s", logs)
	}
}
