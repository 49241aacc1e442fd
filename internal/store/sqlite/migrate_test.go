package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/storetest"
)

// TestUpgradeFromVersion1 opens a file written by a build that knew only
// the first schema step: its keys keep working and gain empty metadata.
func TestUpgradeFromVersion1(t *testing.T) {
	ctx := context.Background()
	path, db := fileAtVersion(t, 1)
	h := sha256.Sum256([]byte("secret"))
	if _, err := db.ExecContext(ctx, `INSERT INTO projects (id, name, created_at) VALUES (1, 'default', 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO keys (id, project_id, kind, hash, created_at) VALUES ('key_old', 1, 'agent', ?, 0)`, h[:]); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k, err := s.KeyByHash(ctx, h[:])
	if err != nil || k.ID != "key_old" || k.KeyMeta != (store.KeyMeta{}) {
		t.Fatalf("old key after upgrade = %+v, %v; want key_old with empty metadata", k, err)
	}
	if err := s.SetKeyMeta(ctx, "key_old", store.KeyMeta{Community: true}); err != nil {
		t.Fatal(err)
	}
}

// TestUpgradeToMembers opens a file written before members and roles:
// existing users become owners of every project, tokens stay instance
// tokens.
func TestUpgradeToMembers(t *testing.T) {
	ctx := context.Background()
	path, db := fileAtVersion(t, 5)
	for _, st := range storetest.PreMembersSeed {
		if _, err := db.ExecContext(ctx, st.SQL, st.Args...); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckUpgrade(t, s)
}

// TestAuditAppendOnly: the file itself refuses to change an audit entry,
// whatever writes to it.
func TestAuditAppendOnly(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "spacefix.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AppendAudit(ctx, store.AuditEntry{Actor: "ada@example.com", Action: "tool.update", Target: "search"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE audit SET actor = 'mallory'`); err == nil || !strings.Contains(err.Error(), "the audit log is append-only") {
		t.Errorf("UPDATE audit: %v; want the append-only refusal", err)
	}
	if n, err := s.PruneAudit(ctx, time.Now().Add(time.Second)); err != nil || n != 1 {
		t.Errorf("PruneAudit = %d, %v; want the entry pruned", n, err)
	}
}

// fileAtVersion makes a new file with only the first n schema steps, as an
// older build would have left it, and returns its path and an open handle.
func fileAtVersion(t *testing.T, n int) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spacefix.db")
	db, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		t.Fatal(err)
	}
	all := migrations
	migrations = all[:n]
	err = migrate(context.Background(), db)
	migrations = all
	if err != nil {
		t.Fatal(err)
	}
	return path, db
}
