// Package sqlite implements [store.Store] on one SQLite file, with the pure-Go
// driver modernc.org/sqlite.
//
// Several processes may open the same file at once (spacefix serve and CLI
// commands such as keys create): the file is in WAL mode, so readers never
// wait for the writer, and every connection waits up to [BusyTimeout] for
// the write lock instead of failing with SQLITE_BUSY.
//
// Inside one process, writes go through a pool of exactly one connection
// whose transactions begin IMMEDIATE, so they queue in Go (honouring each
// call's context) and never race each other for the lock; reads go through
// a separate pool of several query-only connections.
//
// The store's methods are written once, in store/sqlstore, for this store
// and the PostgreSQL one; this package opens the file, gives sqlstore its
// [sqlstore.DB] over the two pools, and keeps its first schema steps, the
// call log's multi-row INSERTs, [Backup] and the file check of
// [Store.Check].
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
	"github.com/spacefix/spacefix/internal/store/sqlstore"
)

var _ store.Store = (*Store)(nil)

// BusyTimeout is how long a statement waits for a lock another connection
// or process holds before it fails with SQLITE_BUSY.
const BusyTimeout = 5 * time.Second

// Store is a [store.Store] backed by a SQLite file. Every method is safe for
// concurrent use.
type Store struct {
	*sqlstore.Store // the methods both engines share

	w *sql.DB // one connection, BEGIN IMMEDIATE: every write
	r *sql.DB // several query-only connections: every read

	keyByHash *sql.Stmt // on r; the request path looks keys up by hash

	path   string      // the file as named at Open
	opened os.FileInfo // the file at Open, to notice it being deleted or replaced

	closeOnce sync.Once
	closeErr  error
}

// Open opens the store in the file at path, creating the file if it does not
// exist and bringing its schema up to date. It fails with an error wrapping
// [ErrSchemaTooNew] if a newer build of spacefix has migrated the file.
func Open(ctx context.Context, path string) (*Store, error) {
	s, err := open(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

func open(ctx context.Context, path string) (*Store, error) {
	// The driver reads everything after '?' as parameters, and an in-memory
	// database would be a different one on each pooled connection.
	if path == "" || strings.ContainsRune(path, '?') || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, errors.New("path must be a plain file name")
	}
	w, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	if err := setWAL(ctx, w); err != nil {
		w.Close()
		return nil, err
	}
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, err
	}

	r, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		w.Close()
		return nil, err
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	s := &Store{w: w, r: r, path: path}
	if s.opened, err = os.Stat(path); err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	if s.keyByHash, err = r.PrepareContext(ctx, sqlshared.Q.KeyByHash); err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	s.Store = sqlstore.New(&db{w: w, r: r, prepared: map[string]*sql.Stmt{sqlshared.Q.KeyByHash: s.keyByHash}}, dialect{})
	return s, nil
}

// dsn returns the data source name for one of the two pools. Pragmas go in
// the DSN so that every connection the pool opens gets them; journal_mode is
// the exception, see [setWAL].
func dsn(path string, write bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	// In WAL mode NORMAL loses at most the last transactions on power loss,
	// never integrity, and saves an fsync per commit.
	q.Add("_pragma", "synchronous(NORMAL)")
	if write {
		// A deferred transaction that reads before it writes cannot wait
		// for the lock (SQLITE_BUSY_SNAPSHOT); IMMEDIATE takes it first.
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	return path + "?" + q.Encode()
}

// setWAL turns the file to WAL mode. That is a property of the file, not of
// a connection: once set, every connection of every process uses it. It is
// not in the DSN because SQLite does not wait for the lock the switch needs
// (the busy handler is not called), so processes creating the file at the
// same moment would fail to connect; here the switch is retried instead.
func setWAL(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(BusyTimeout)
	for {
		var mode string
		err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode)
		if err == nil && !strings.EqualFold(mode, "wal") {
			err = db.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode)
		}
		switch {
		case err == nil && strings.EqualFold(mode, "wal"):
			return nil
		case err == nil:
			return fmt.Errorf("set WAL mode: journal mode stays %q", mode)
		case !isBusy(err) || time.Now().After(deadline):
			return fmt.Errorf("set WAL mode: %w", err)
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Close closes both pools. It is safe to call twice; the second call returns
// what the first did.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.keyByHash.Close(), s.r.Close(), s.w.Close())
	})
	return s.closeErr
}

// Path returns the store's file as named at Open: the gateway keeps its
// secret key file beside it.
func (s *Store) Path() string { return s.path }

// writeTx runs fn in an IMMEDIATE transaction on the write pool.
func (s *Store) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// isBusy reports whether err is SQLITE_BUSY, extended or not.
func isBusy(err error) bool {
	var se *sqlitedrv.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// isUnique reports whether err is a UNIQUE or PRIMARY KEY violation.
func isUnique(err error) bool {
	var se *sqlitedrv.Error
	if !errors.As(err, &se) {
		return false
	}
	return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// millis and fromMillis convert between the stored Unix milliseconds and
// time.Time in UTC.
func millis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// now is the current time at the precision the store keeps.
func now() time.Time { return fromMillis(time.Now().UnixMilli()) }
