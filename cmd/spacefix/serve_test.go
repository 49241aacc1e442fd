package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store/postgres"
	"github.com/spacefix/spacefix/internal/testenv"
)

var (
	keyFilesMu sync.Mutex
	keyFiles   = map[string]string{} // PostgreSQL URL → its key file
)

// serveArgs are the arguments of serve on data at 127.0.0.1:0: on
// PostgreSQL with --secret-key-file, one file per store, as every gateway
// of a store must share it.
func serveArgs(t *testing.T, data string, extra ...string) []string {
	t.Helper()
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data}, extra...)
	if !postgres.IsURL(data) {
		return args
	}
	keyFilesMu.Lock()
	defer keyFilesMu.Unlock()
	path, ok := keyFiles[data]
	if !ok {
		path = filepath.Join(t.TempDir(), "secret.key")
		if err := os.WriteFile(path, []byte(secrets.NewKey()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		keyFiles[data] = path
	}
	return append(args, "--secret-key-file", path)
}

// serve on PostgreSQL without --secret-key-file does not start, and says
// how to make the file; with SPACEFIX_SECRET_KEY_FILE it does.
func TestServeSecretKeyFileOnPostgres(t *testing.T) {
	data := testenv.Postgres(t)
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--data", data}, &syncBuffer{}, &syncBuffer{})
	const want = "a PostgreSQL store needs --secret-key-file (or SPACEFIX_SECRET_KEY_FILE): the key that encrypts upstream tokens and identity signing keys, the same file on every gateway. Create one with: head -c 32 /dev/urandom | base64 > secret.key"
	if err == nil || err.Error() != want {
		t.Fatalf("serve on PostgreSQL without a key file: %v\nwant %s", err, want)
	}

	path := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(path, []byte(secrets.NewKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPACEFIX_SECRET_KEY_FILE", path)
	if out := serveOnce(t, data); !strings.Contains(out, "Spacefix is running.") {
		t.Errorf("serve with SPACEFIX_SECRET_KEY_FILE printed:\n%s", out)
	}
}

// serve on a SQLite file makes secret.key beside it, 0600, at the first
// start.
func TestServeSecretKeyFileOnSQLite(t *testing.T) {
	dir := t.TempDir()
	serveOnce(t, filepath.Join(dir, "s.db"))
	fi, err := os.Stat(filepath.Join(dir, "secret.key"))
	if err != nil {
		t.Fatalf("no secret.key beside the store: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("secret.key mode %04o, want 0600", fi.Mode().Perm())
	}
}

// The first-start text sends remote connectors (Claude, ChatGPT) to the
// MCP endpoint only when it is a public URL: they cannot reach loopback.
func TestRemoteConnectorsLine(t *testing.T) {
	first := &gateway.FirstStart{Project: "default", AgentKey: "sfx_agent_x", ClientKey: "sfx_client_x"}
	var public, local strings.Builder
	printStart(&public, "https://mcp.example.com", "spacefix.db", first, "", true)
	printStart(&local, "http://127.0.0.1:8080", "spacefix.db", first, "", false)
	if want := "Connect Claude or ChatGPT (remote connector) or any MCP client that signs in\nwith OAuth: give it the MCP endpoint above and sign in with your dashboard\naccount.\n"; !strings.Contains(public.String(), want) {
		t.Errorf("with --public-url the text lacks %q:\n%s", want, public.String())
	}
	if want := "servers, which cannot reach 127.0.0.1:8080. Start the gateway with\n--public-url https://HOST"; !strings.Contains(local.String(), want) || strings.Contains(local.String(), "give it the MCP endpoint above") {
		t.Errorf("without --public-url the text lacks %q, or offers the loopback endpoint to remote connectors:\n%s", want, local.String())
	}
}
