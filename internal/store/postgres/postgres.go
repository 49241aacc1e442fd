// Package postgres implements [store.Store] on PostgreSQL, with
// github.com/jackc/pgx/v5, for gateways that share one store.
//
// The store's methods are written once, in store/sqlstore, for this
// store and the SQLite one; this package connects, gives sqlstore its
// [sqlstore.DB] (pgx's pool, no database/sql in between; a read outside a
// transaction is tried once more after a lost connection) and its
// dialect ($n placeholders, FOR SHARE), and keeps its first schema step.
// Migrations are numbered, append only, and applied under an advisory
// lock, so replicas that start at the same time apply each step exactly
// once.
//
// The call log is written with COPY, one transaction per batch; the
// gateway's call log writer (store.CallLog) gathers the batches off the
// request path.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlstore"
)

var _ store.Store = (*Store)(nil)

// Store is a [store.Store] backed by PostgreSQL. Every method is safe for
// concurrent use, by any number of processes sharing the database.
type Store struct {
	*sqlstore.Store // the methods both engines share

	pool *pgxpool.Pool
	name string // the database as people may read it: no password

	retried atomic.Int64 // reads repeated after a lost connection

	closeOnce sync.Once
}

// IsURL reports whether data names a PostgreSQL database rather than a
// SQLite file: a postgres:// or postgresql:// URL.
func IsURL(data string) bool {
	return strings.HasPrefix(data, "postgres://") || strings.HasPrefix(data, "postgresql://")
}

// Redact returns the URL without its password (in the user part or in a
// password parameter), for messages and logs.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "a PostgreSQL URL that does not parse"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// Open connects to the database at rawURL (postgres://user:password@host:port/db?…)
// and brings its schema up to date. It fails with an error wrapping
// [store.ErrSchemaTooNew] if a newer build of spacefix has migrated the
// database. Errors never carry the password.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	name := Redact(rawURL)
	s, err := open(ctx, rawURL, name)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", name, err)
	}
	return s, nil
}

func open(ctx context.Context, rawURL, name string) (*Store, error) {
	if !IsURL(rawURL) {
		return nil, errors.New("not a postgres:// URL")
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		// pgx's parse errors quote the URL, password included.
		return nil, errors.New("the URL does not parse; the form is postgres://user:password@host:port/database")
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "spacefix"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, scrub(err, cfg.ConnConfig.Password)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, scrub(err, cfg.ConnConfig.Password)
	}
	s := &Store{pool: pool, name: name}
	s.Store = sqlstore.New(db{s}, dialect{})
	return s, nil
}

// scrub keeps a password out of an error's text, should the driver quote
// it (connection errors may); the error chain stays for errors.Is. Errors
// of this package's own wording never carry it.
func scrub(err error, password string) error {
	if password == "" || errors.Is(err, store.ErrSchemaTooNew) || !strings.Contains(err.Error(), password) {
		return err
	}
	return scrubbed{strings.ReplaceAll(err.Error(), password, "xxxxx"), err}
}

type scrubbed struct {
	msg string
	err error
}

func (e scrubbed) Error() string { return e.msg }
func (e scrubbed) Unwrap() error { return e.err }

// Close closes the connection pool. It is safe to call twice.
func (s *Store) Close() error {
	s.closeOnce.Do(s.pool.Close)
	return nil
}

// Check implements [store.Store]: a small write, an upsert of one row of
// the meta table, must commit.
func (s *Store) Check(ctx context.Context) error {
	host, _ := os.Hostname()
	if err := s.CheckWrite(ctx, fmt.Sprintf("%s:%d", host, os.Getpid())); err != nil {
		return fmt.Errorf("store %s does not take writes (%v); check that PostgreSQL is up, reachable and not out of disk", s.name, err)
	}
	return nil
}

// tx runs fn in a transaction.
func (s *Store) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// reconnectWait is the longest a read that met a lost connection waits for
// the server to answer again before its one retry: long enough for a
// restart of PostgreSQL (which ends every pooled connection), short
// enough for a request waiting on it.
const reconnectWait = 3 * time.Second

// readRetry runs read, and once more if it failed on a lost connection:
// when PostgreSQL restarts, every idle connection in the pool is dead, and
// the first request to take one would fail although the server is back.
// Before the retry it waits, up to reconnectWait, for the server to answer
// a ping (each failed ping also takes a dead connection out of the pool).
// Only reads: repeating them is harmless even if the first attempt reached
// the server.
func (s *Store) readRetry(ctx context.Context, read func() error) error {
	err := read()
	if err == nil || ctx.Err() != nil || !connLost(err) {
		return err
	}
	s.retried.Add(1)
	wctx, cancel := context.WithTimeout(ctx, reconnectWait)
	defer cancel()
	for wait := 20 * time.Millisecond; s.pool.Ping(wctx) != nil; wait = min(2*wait, 500*time.Millisecond) {
		t := time.NewTimer(wait)
		select {
		case <-wctx.Done():
			t.Stop()
			return read() // the retry may still find the server
		case <-t.C:
		}
	}
	return read()
}

// connLost reports whether err says the connection to the server was lost
// or could not be made: an error pgx knows happened before anything was
// sent, the server ending the session (SQLSTATE 57P01 admin shutdown,
// 57P02 crash shutdown, 57P03 starting up, class 08 connection
// exceptions), or the socket failing.
func connLost(err error) bool {
	if pgconn.SafeToRetry(err) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || strings.HasPrefix(pe.Code, "08")
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed)
}

// isUnique reports whether err is a unique or primary key violation.
func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// millis and fromMillis convert between the stored Unix milliseconds and
// time.Time in UTC.
func millis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// now is the current time at the precision the store keeps.
func now() time.Time { return fromMillis(time.Now().UnixMilli()) }
