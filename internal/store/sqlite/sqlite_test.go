package sqlite_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTemp(t, filepath.Join(t.TempDir(), "spacefix.db"))
	})
}

func openTemp(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func hash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// TestTwoStoresOneFile opens the file twice, as serve and a CLI command
// would, and checks that each sees the other's writes.
func TestTwoStoresOneFile(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "spacefix.db")
	serve, cli := openTemp(t, path), openTemp(t, path)

	p, err := cli.CreateProject(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	k, err := cli.CreateKey(ctx, store.Key{ID: "key_c", ProjectID: p.ID, Kind: store.KindClient}, hash("secret"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := serve.KeyByHash(ctx, hash("secret"))
	if err != nil || got.Revoked() {
		t.Fatalf("serve: KeyByHash of a key the CLI created = %+v, %v; want it live", got, err)
	}
	if err := cli.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	got, err = serve.KeyByHash(ctx, hash("secret"))
	if err != nil || !got.Revoked() {
		t.Fatalf("serve: KeyByHash after the CLI revoked it = %+v, %v; want it revoked", got, err)
	}
	if err := serve.UpdateProjectSettings(ctx, p.ID, store.ProjectSettings{MaxTools: 7}); err != nil {
		t.Fatal(err)
	}
	if p, err := cli.Project(ctx, "orders"); err != nil || p.Settings.MaxTools != 7 {
		t.Fatalf("cli: Project after serve changed settings = %+v, %v; want MaxTools 7", p, err)
	}
	_, err = serve.CreateProject(ctx, "orders")
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("serve: CreateProject of a name the CLI took: %v, want ErrExists", err)
	}
}

// TestConcurrentWritersTwoStores writes through two stores on one file at
// once: the log through one, keys through the other, as serve and the CLI
// do. None of it may fail with SQLITE_BUSY.
func TestConcurrentWritersTwoStores(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "spacefix.db")
	stores := []*sqlite.Store{openTemp(t, path), openTemp(t, path)}
	p, err := stores[0].CreateProject(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, rounds, size = 4, 10, 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(stores)*goroutines*rounds)
	for si, s := range stores {
		for g := range goroutines {
			wg.Go(func() {
				for r := range rounds {
					calls := make([]store.Call, size)
					for i := range calls {
						calls[i] = store.Call{Time: time.Now(), ProjectID: p.ID, Kind: "tool", Name: "t", Outcome: store.OutcomeOK, Billable: true}
					}
					if err := s.AppendCalls(ctx, calls); err != nil {
						errs <- err
					}
					id := fmt.Sprintf("key_%d_%d_%d", si, g, r)
					if _, err := s.CreateKey(ctx, store.Key{ID: id, ProjectID: p.ID, Kind: store.KindClient}, hash(id)); err != nil {
						errs <- err
					}
					if _, err := stores[1-si].KeyByHash(ctx, hash(id)); err != nil {
						errs <- fmt.Errorf("the other store does not see %s: %w", id, err)
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	const total = 2 * goroutines * rounds
	if ks, err := stores[1].Keys(ctx, p.ID); err != nil || len(ks) != total {
		t.Errorf("Keys = %d, %v; want %d", len(ks), err, total)
	}
	u, err := stores[0].Usage(ctx, p.ID, time.Now().Add(-24*time.Hour), time.Now())
	var n int64
	for _, u := range u {
		n += u.Calls
	}
	if err != nil || n != total*size {
		t.Errorf("usage = %d, %v; want %d", n, err, total*size)
	}
}

// TestOpenConcurrently opens a new file from several goroutines at once,
// as two processes starting together would: the migration runs once.
func TestOpenConcurrently(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spacefix.db")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			s, err := sqlite.Open(t.Context(), path)
			if err != nil {
				errs <- err
				return
			}
			errs <- s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	db := rawDB(t, path)
	var n, v int
	if err := db.QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != v {
		t.Errorf("schema_migrations has %d rows up to version %d, want one per version", n, v)
	}
}

func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestPragmas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spacefix.db")
	openTemp(t, path)
	var mode string
	if err := rawDB(t, path).QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spacefix.db")
	s := openTemp(t, path)
	s.Close()
	if _, err := rawDB(t, path).Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (999, 0)`); err != nil {
		t.Fatal(err)
	}
	_, err := sqlite.Open(t.Context(), path)
	if !errors.Is(err, sqlite.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema: %v, want ErrSchemaTooNew", err)
	}
	t.Logf("error reads: %v", err)
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spacefix.db")
	s := openTemp(t, path)
	if _, err := s.CreateProject(t.Context(), "orders"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTemp(t, path)
	if _, err := s.Project(t.Context(), "orders"); err != nil {
		t.Fatalf("Project after reopening: %v", err)
	}
}

func TestBadPath(t *testing.T) {
	for _, path := range []string{"", ":memory:", "a.db?mode=ro", "file:a.db"} {
		if s, err := sqlite.Open(t.Context(), path); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want an error", path)
		}
	}
}

// TestPruneManyCalls prunes more rows than one prune transaction takes.
func TestPruneManyCalls(t *testing.T) {
	defer sqlite.SetPruneChunk(100)()
	s := openTemp(t, filepath.Join(t.TempDir(), "spacefix.db"))
	ctx := t.Context()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 1_234
	calls := make([]store.Call, n)
	for i := range calls {
		calls[i] = store.Call{Time: start.Add(time.Duration(i) * time.Second), ProjectID: 1, Kind: "tool", Name: "t", Outcome: store.OutcomeOK}
	}
	if err := s.AppendCalls(ctx, calls); err != nil {
		t.Fatal(err)
	}
	got, err := s.PruneCalls(ctx, start.Add(1_000*time.Second))
	if err != nil || got != 1_000 {
		t.Fatalf("PruneCalls = %d, %v; want 1000", got, err)
	}
	left, err := s.Calls(ctx, store.CallFilter{Limit: n})
	if err != nil || len(left) != n-1_000 {
		t.Fatalf("Calls after prune = %d, %v; want %d", len(left), err, n-1_000)
	}
}

func TestClosedStore(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "spacefix.db"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Projects(t.Context()); err == nil {
		t.Error("Projects on a closed store succeeded, want an error")
	}
	if _, err := s.KeyByHash(t.Context(), hash("x")); err == nil {
		t.Error("KeyByHash on a closed store succeeded, want an error")
	}
}

// TestReadyzStoreFileGone: a store whose file was deleted, or replaced by
// another file, keeps answering from the old inode; Check must say so.
func TestReadyzStoreFileGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(path string) error
		want string // after the path
	}{
		{"deleted", os.Remove, " was deleted while the gateway runs; what it writes goes to a file no one can open again. " +
			"Restore the file from a backup before you restart the gateway: without it the gateway starts empty, every key gone"},
		{"replaced", func(path string) error {
			if err := os.Remove(path); err != nil {
				return err
			}
			return os.WriteFile(path, nil, 0o600)
		}, " was replaced while the gateway runs; the gateway still writes to the old file, which no one can open again. " +
			"Restart the gateway to use the new file, or put the old one back from a backup"},
		{"renamed over", func(path string) error { // as a restore from a backup might
			if err := os.WriteFile(path+".restored", nil, 0o600); err != nil {
				return err
			}
			return os.Rename(path+".restored", path)
		}, " was replaced while the gateway runs; the gateway still writes to the old file, which no one can open again. " +
			"Restart the gateway to use the new file, or put the old one back from a backup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "spacefix.db")
			s := openTemp(t, path)
			if err := s.Check(t.Context()); err != nil {
				t.Fatalf("Check before: %v", err)
			}
			if err := tc.do(path); err != nil {
				t.Fatal(err)
			}
			err := s.Check(t.Context())
			want := "the database file " + path + tc.want
			if err == nil || err.Error() != want {
				t.Errorf("Check after the file was %s: got %v, want %q", tc.name, err, want)
			}
		})
	}
}
