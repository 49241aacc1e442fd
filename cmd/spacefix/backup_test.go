package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/store/sqlite"
)

// A backup of a running gateway's store, taken while projects are being
// created, is a store a gateway opens: it has the first start's keys and
// every project created before the backup began, and each project it has
// is whole.
func TestBackupWhileWriting(t *testing.T) {
	data, _, _, st := testGateway(t)
	ctx := context.Background()
	for i := range 20 {
		if _, err := st.CreateProject(ctx, fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}

	// A writer that keeps creating projects until the backup is done.
	done, wrote := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		defer func() { wrote <- n }()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := st.CreateProject(ctx, fmt.Sprintf("during-%d", n)); err != nil {
				t.Errorf("create a project during the backup: %v", err)
				return
			}
			n++
		}
	}()
	out := filepath.Join(t.TempDir(), "copy.db")
	got, err := runCLI(t, "backup", "--data", data, "--out", out)
	close(done)
	<-wrote
	if err != nil {
		t.Fatalf("spacefix backup: %v\n%s", err, got)
	}
	if want := "Copied " + data + " to " + out; !strings.Contains(got, want) || !strings.Contains(got, "secret key file") {
		t.Errorf("spacefix backup printed %q; want %q and a word on the secret key file", got, want)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the copy's mode is %v (%v); want 0600, as it holds every hashed key", fi.Mode().Perm(), err)
	}

	cp, err := sqlite.Open(ctx, out)
	if err != nil {
		t.Fatalf("a gateway cannot open the copy: %v", err)
	}
	defer cp.Close()
	projects, err := cp.Projects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range projects {
		names[p.Name] = true
	}
	for i := range 20 {
		if n := fmt.Sprintf("before-%d", i); !names[n] {
			t.Errorf("the copy lacks project %s, created before the backup", n)
		}
	}
	if !names["default"] {
		t.Error("the copy lacks the first start's project default")
	}
	keys, err := runCLI(t, "keys", "list", "--data", out)
	if err != nil || strings.Count(keys, "key_") != 2 {
		t.Errorf("keys list on the copy: %v\n%s\nwant the first start's 2 keys", err, keys)
	}
}

// Mistakes say what to do instead; an existing file is never overwritten.
func TestBackupMistakes(t *testing.T) {
	data, _, _, _ := testGateway(t)
	existing := filepath.Join(t.TempDir(), "old.db")
	if err := os.WriteFile(existing, []byte("an older backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", data}, "backup: give --out, the file to write the copy to, e.g. --out spacefix-backup.db"},
		{[]string{"--data", data, "--out", existing}, "backup: " + existing + " already exists; give --out a new file name (a backup never overwrites one)"},
		{[]string{"--data", "postgres://u:secret-pw@127.0.0.1:5432/db", "--out", "x.db"}, "backup copies a SQLite store; for PostgreSQL use pg_dump, as docs/backup.md shows"},
		{[]string{"--data", filepath.Join(t.TempDir(), "missing.db"), "--out", filepath.Join(t.TempDir(), "x.db")}, "backup: no store at "},
	} {
		out, err := runCLI(t, append([]string{"backup"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("backup %q: error %v; want one containing %q", c.args, err, c.want)
		}
		if strings.Contains(out, "secret-pw") || (err != nil && strings.Contains(err.Error(), "secret-pw")) {
			t.Errorf("backup %q printed the database password", c.args)
		}
	}
	if b, _ := os.ReadFile(existing); string(b) != "an older backup" {
		t.Errorf("backup overwrote an existing file: it now holds %d bytes", len(b))
	}
}
