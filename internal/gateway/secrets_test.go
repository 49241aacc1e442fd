package gateway

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/postgres"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/testenv"
)

// logBuf collects a gateway's text log.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newOn(t *testing.T, cfg Config, st store.Store) (*Gateway, *logBuf, error) {
	t.Helper()
	logs := &logBuf{}
	cfg.Addr, cfg.ShutdownGrace = "127.0.0.1:0", time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	g, err := New(cfg, st)
	if err == nil {
		t.Cleanup(func() { g.Close() })
	}
	return g, logs, err
}

func openSQLite(t *testing.T, path string) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// On SQLite without --secret-key-file, the first start creates secret.key
// beside the database file, readable by its owner only, and says so once
// at INFO with its path (never its content); the next start uses it.
func TestSecretKeyFileDefaultOnSQLite(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "spacefix.db")
	g, logs, err := newOn(t, Config{}, openSQLite(t, db))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	path := filepath.Join(dir, "secret.key")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no key file beside the database: %v", err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %04o, want 0600", fi.Mode().Perm())
	}
	want := `level=INFO msg="created the secret key file that encrypts upstream tokens and the identity signing keys; keep it and back it up with the database" path=` + path + "\n"
	if got := logs.String(); strings.Count(got, "created the secret key file") != 1 || !strings.Contains(got, want) {
		t.Errorf("log after the first start:\n%s\nwant once: %s", got, want)
	}
	content, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(content), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") && strings.Contains(logs.String(), line) {
			t.Error("the log shows the key")
		}
	}
	if strings.Contains(logs.String(), "WARN") {
		t.Errorf("a WARN about a 0600 key file:\n%s", logs.String())
	}
	sealed := g.box.Seal([]byte("tok"), "upstream-access:key_x:1")
	g.Close()

	// The next start loads it, says nothing, and opens what the first sealed.
	g2, logs2, err := newOn(t, Config{}, openSQLite(t, db))
	if err != nil {
		t.Fatalf("second New: %v", err)
	}
	if got := logs2.String(); strings.Contains(got, "secret key") {
		t.Errorf("log of the second start mentions the key file:\n%s", got)
	}
	if plain, err := g2.box.Open(sealed, "upstream-access:key_x:1"); err != nil || string(plain) != "tok" {
		t.Errorf("the second start's box opens %q, %v; want the first's key", plain, err)
	}
}

// A key file that others than its owner may read is used, with a WARN
// that says so and how to fix it; a file that holds no valid key stops the
// start, naming the file and the line.
func TestSecretKeyFileGiven(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix file modes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "keys", "gw.key")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(secrets.NewKey()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	g, logs, err := newOn(t, Config{SecretKeyFile: path}, openSQLite(t, filepath.Join(dir, "spacefix.db")))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if g.box == nil {
		t.Fatal("no box")
	}
	want := "level=WARN msg=\"the secret key file " + path + " may be read by others than its owner (mode 0644): anyone who reads it can decrypt the upstream tokens and signing keys in the store; run: chmod 600 " + path + "\"\n"
	if got := logs.String(); !strings.Contains(got, want) {
		t.Errorf("log:\n%s\nwant: %s", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "secret.key")); !os.IsNotExist(err) {
		t.Errorf("a default key file was made beside the database although one was given: %v", err)
	}

	bad := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(bad, []byte("# keys\nnot-a-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = newOn(t, Config{SecretKeyFile: bad}, openSQLite(t, filepath.Join(dir, "other.db")))
	if want := "the secret key file (--secret-key-file): secret key file " + bad + ", line 2: not a key in base64"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("New with a bad key file = %v, want %q…", err, want)
	}
}

// On PostgreSQL a gateway does not start without --secret-key-file, nor
// with one that does not exist (it would not be the others' key); with the
// file every gateway shares, it starts.
func TestSecretKeyFileOnPostgres(t *testing.T) {
	url := testenv.Postgres(t)
	st, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	_, _, err = newOn(t, Config{DataPath: url}, st)
	const want = "a PostgreSQL store needs --secret-key-file (or SPACEFIX_SECRET_KEY_FILE): the key that encrypts upstream tokens and identity signing keys, the same file on every gateway. Create one with: head -c 32 /dev/urandom | base64 > secret.key"
	if err == nil || err.Error() != want {
		t.Errorf("New on PostgreSQL without a key file = %v\nwant %s", err, want)
	}

	dir := t.TempDir()
	missing := filepath.Join(dir, "secret.key")
	_, _, err = newOn(t, Config{DataPath: url, SecretKeyFile: missing}, st)
	if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("New on PostgreSQL with a missing key file = %v, want it to name %s and say it does not exist", err, missing)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the gateway made a key file of its own on PostgreSQL: %v", err)
	}

	if err := os.WriteFile(missing, []byte(secrets.NewKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g, logs, err := newOn(t, Config{DataPath: url, SecretKeyFile: missing}, st)
	if err != nil {
		t.Fatalf("New on PostgreSQL with a key file: %v", err)
	}
	if g.box == nil || strings.Contains(logs.String(), "secret key") {
		t.Errorf("box %v; log:\n%s", g.box, logs.String())
	}
}

// A gateway on a store it cannot place (wrapped, and no DataPath), as
// tests and embedding programs build, seals with a key in memory and makes
// no file where it happens to run.
func TestSecretKeyInMemory(t *testing.T) {
	st := struct{ store.Store }{openSQLite(t, filepath.Join(t.TempDir(), "spacefix.db"))}
	g, logs, err := newOn(t, Config{}, st)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := os.Stat(DefaultSecretKeyFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a key file in the working directory: %v", err)
	}
	want := `level=INFO msg="no secret key file: upstream tokens are sealed with a key kept in memory only, lost when the gateway stops; give Config.SecretKeyFile to keep them"`
	if got := logs.String(); !strings.Contains(got, want) {
		t.Errorf("log:\n%s\nwant: %s", got, want)
	}
	if plain, err := g.box.Open(g.box.Seal([]byte("tok"), "c"), "c"); err != nil || string(plain) != "tok" {
		t.Errorf("the in-memory box: %q, %v", plain, err)
	}
}

// A gateway on a bus with a key in memory only would have every request
// it forwards refused by its peers, so it does not start, and says why.
func TestBusNeedsSecretKeyFile(t *testing.T) {
	st := struct{ store.Store }{openSQLite(t, filepath.Join(t.TempDir(), "spacefix.db"))}
	_, _, err := newOn(t, Config{Bus: "nats://127.0.0.1:4222"}, st)
	want := "a gateway on a bus (--bus) needs a secret key file shared by every gateway: give --secret-key-file (Config.SecretKeyFile); the gateways sign the requests they forward to each other with it"
	if err == nil || err.Error() != want {
		t.Errorf("New = %v\nwant %s", err, want)
	}
}
