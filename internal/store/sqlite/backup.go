package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
)

// ErrBackupExists is returned by [Backup] when the file to write exists:
// a backup never overwrites, so an old copy is not lost to a typo.
var ErrBackupExists = errors.New("the backup file already exists")

// Backup writes a consistent copy of the store file at path to out, which
// must not exist, while gateways and commands keep using the store.
//
// It uses VACUUM INTO, which reads the database in one read transaction:
// the copy is the store as of one commit, including what is still in the
// WAL, and writers go on meanwhile (WAL readers do not block them). The
// copy is compact, in rollback-journal mode, and ready to be the --data of
// a gateway. Backup does not create or migrate path, so a mistyped --data
// is an error rather than a new, empty store.
func Backup(ctx context.Context, path, out string) error {
	if path == "" || path == ":memory:" {
		return errors.New("backup: the store must be a SQLite file")
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("backup: no store at %s: %w", path, err)
	}
	// The copy holds everything the store does (hashed keys, sealed
	// tokens): only its owner may read it. Creating it here, empty and
	// exclusive, also refuses an existing file without a race.
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("backup to %s: %w", out, ErrBackupExists)
	}
	if err != nil {
		return fmt.Errorf("backup to %s: %w", out, err)
	}
	f.Close()
	if err := vacuumInto(ctx, path, out); err != nil {
		os.Remove(out)
		return fmt.Errorf("backup %s to %s: %w", path, out, err)
	}
	return nil
}

// vacuumInto copies path into the empty file out and checks the copy.
func vacuumInto(ctx context.Context, path, out string) error {
	// Not the query-only read pool: SQLite counts writing the copy as a
	// write, though path itself is only read.
	db, err := sql.Open("sqlite", path+"?_pragma="+url.QueryEscape(fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds())))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, out); err != nil {
		return err
	}
	cp, err := sql.Open("sqlite", dsn(out, false))
	if err != nil {
		return err
	}
	defer cp.Close()
	var check string
	if err := cp.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&check); err != nil {
		return fmt.Errorf("check the copy: %w", err)
	}
	if check != "ok" {
		return fmt.Errorf("check the copy: %s", check)
	}
	return nil
}
