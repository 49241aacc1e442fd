package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/postgres"
	"github.com/spacefix/spacefix/internal/store/storetest"
	"github.com/spacefix/spacefix/internal/testenv"
)

func openB(b *testing.B, url string) *postgres.Store {
	b.Helper()
	s, err := postgres.Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, testenv.Postgres(t)) })
}

// Replicas starting at once on a new database apply each migration once
// and all come up.
func TestOpenConcurrently(t *testing.T) {
	url := testenv.Postgres(t)
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		wg.Go(func() {
			s, err := postgres.Open(context.Background(), url)
			if err == nil {
				_, err = s.CreateProject(context.Background(), "p"+time.Now().Format("150405.000000000"))
				s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	var n int
	conn := connect(t, url)
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != postgres.Versions {
		t.Errorf("schema_migrations rows = %d, want %d: each step once", n, postgres.Versions)
	}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Two stores on one database see each other's writes at once: what one
// replica's dashboard changes, another's request path reads.
func TestTwoStoresOneDatabase(t *testing.T) {
	url := testenv.Postgres(t)
	a, b := open(t, url), open(t, url)
	ctx := context.Background()
	p, err := a.CreateProject(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.UpdateProjectSettings(ctx, p.ID, store.ProjectSettings{CallWaitMs: 5000}); err != nil {
		t.Fatal(err)
	}
	got, err := a.Project(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if got.Settings.CallWaitMs != 5000 {
		t.Errorf("settings written by b, read by a: %+v", got.Settings)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	url := testenv.Postgres(t)
	open(t, url).Close()
	if _, err := connect(t, url).Exec(context.Background(), `INSERT INTO schema_migrations (version, applied_at) VALUES (99, 0)`); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(context.Background(), url)
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema: %v, want ErrSchemaTooNew", err)
	}
	if want := fmt.Sprintf("the database is at version 99, this build knows up to %d; upgrade spacefix", postgres.Versions); !strings.HasSuffix(err.Error(), want) {
		t.Errorf("message: %v", err)
	}
}

// A password never reaches an error, whatever fails.
func TestErrorsHideThePassword(t *testing.T) {
	for _, url := range []string{
		"postgres://spacefix:s3cretpw@127.0.0.1:1/spacefix?connect_timeout=2", // nothing listens
		"postgres://spacefix@127.0.0.1:1/spacefix?password=s3cretpw&connect_timeout=2",
		"postgres://spacefix:s3cretpw@127.0.0.1:1/spacefix?sslmode=bogus",
	} {
		_, err := postgres.Open(context.Background(), url)
		if err == nil {
			t.Fatalf("Open(%s) succeeded", postgres.Redact(url))
		}
		if strings.Contains(err.Error(), "s3cretpw") {
			t.Errorf("error carries the password: %v", err)
		}
		if !strings.Contains(err.Error(), "open store postgres://spacefix") {
			t.Errorf("error does not say which store: %v", err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:pw@h:5432/db":                 "postgres://u:xxxxx@h:5432/db",
		"postgresql://u@h/db?password=pw&sslmode=x": "postgresql://u@h/db?password=xxxxx&sslmode=x",
		"postgres://h/db":                           "postgres://h/db",
	} {
		if got := postgres.Redact(in); got != want {
			t.Errorf("Redact(%s) = %s, want %s", in, got, want)
		}
	}
}

// The call log of a busy gateway: many batches from several writers, as
// replicas write them, lose nothing and count usage exactly.
func TestConcurrentBatches(t *testing.T) {
	s := open(t, testenv.Postgres(t))
	ctx := context.Background()
	p, err := s.CreateProject(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	const writers, batches, size = 4, 10, 50
	now := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for range batches {
				calls := make([]store.Call, size)
				for i := range calls {
					calls[i] = store.Call{Time: now, ProjectID: p.ID, Kind: "tool", Name: []string{"a", "b"}[(i+w)%2],
						KeyID: "key_c", Agent: "key_a", Replica: "r", Outcome: store.OutcomeOK, Billable: true}
				}
				if err := s.AppendCalls(ctx, calls); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	us, err := s.Usage(ctx, p.ID, now, now)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, u := range us {
		total += u.Calls
	}
	if len(us) != 2 || total != writers*batches*size {
		t.Errorf("usage = %+v, want 2 names totalling %d", us, writers*batches*size)
	}
}

func TestNotAURL(t *testing.T) {
	if _, err := postgres.Open(context.Background(), "spacefix.db"); err == nil || !strings.Contains(err.Error(), "not a postgres:// URL") {
		t.Errorf("Open of a file name: %v", err)
	}
}

// TestUpgradeToMembers opens a database written before members and roles:
// existing users become owners of every project, tokens stay instance
// tokens.
func TestUpgradeToMembers(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	if err := postgres.MigrateTo(ctx, url, 3); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, url)
	for _, st := range storetest.PreMembersSeed {
		q := st.SQL
		for i := range st.Args {
			q = strings.Replace(q, "?", fmt.Sprintf("$%d", i+1), 1)
		}
		if _, err := conn.Exec(ctx, q, st.Args...); err != nil {
			t.Fatal(err)
		}
	}
	storetest.CheckUpgrade(t, open(t, url))
}

// TestAuditAppendOnly: the database itself refuses to change an audit
// entry, whatever writes to it.
func TestAuditAppendOnly(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	s := open(t, url)
	if _, err := s.AppendAudit(ctx, store.AuditEntry{Actor: "ada@example.com", Action: "tool.update", Target: "search"}); err != nil {
		t.Fatal(err)
	}
	if _, err := connect(t, url).Exec(ctx, `UPDATE audit SET actor = 'mallory'`); err == nil || !strings.Contains(err.Error(), "the audit log is append-only") {
		t.Errorf("UPDATE audit: %v; want the append-only refusal", err)
	}
	if n, err := s.PruneAudit(ctx, time.Now().Add(time.Second)); err != nil || n != 1 {
		t.Errorf("PruneAudit = %d, %v; want the entry pruned", n, err)
	}
}

// PruneCalls forgets the ids of batches written more than
// store.CallBatchKeep ago, as the SQLite store does: a batch id written
// long ago no longer keeps a batch of that id out, and the table does not
// grow forever (the PostgreSQL copy of the store used to keep them all).
func TestPruneCallBatches(t *testing.T) {
	url := testenv.Postgres(t)
	s, conn := open(t, url), connect(t, url)
	ctx := store.WithCallBatch(context.Background(), "batch-1")
	call := store.Call{Time: time.Now(), ProjectID: 1, Kind: "tool", Name: "search", Outcome: store.OutcomeOK}
	if err := s.AppendCalls(ctx, []store.Call{call}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE call_batches SET written_at = written_at - $1`, (store.CallBatchKeep + time.Hour).Milliseconds()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PruneCalls(ctx, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM call_batches`).Scan(&n); err != nil || n != 0 {
		t.Errorf("call_batches after PruneCalls = %d rows, %v; want 0: the id is older than CallBatchKeep", n, err)
	}
	if err := s.AppendCalls(ctx, []store.Call{call}); err != nil {
		t.Fatal(err)
	}
	if cs, err := s.Calls(ctx, store.CallFilter{}); len(cs) != 2 || err != nil {
		t.Errorf("Calls = %d records, %v; want 2: a forgotten batch id is written again", len(cs), err)
	}
}
