// Package sqlstore is the one body of the SQL stores: every [store.Store]
// method written once, over a [DB] and a [Dialect] that each engine
// package (store/sqlite, store/postgres) provides.
//
// # Rooms
//
//   - sqlstore (this package): the methods, one file per area (users,
//     projects, keys, tasks, …), on [Store].
//   - sqlshared: the statement text, written once with ? placeholders in
//     [sqlshared.Q], and the functions that scan rows into store types.
//   - store/sqlite and store/postgres: connecting, the migrations, the
//     dialect, and what only one engine has (SQLite's backup and check;
//     PostgreSQL's COPY for the call log and its reconnecting reads). Each
//     engine's Store embeds a *Store, so a method it defines itself wins.
//
// # What differs, and where it is decided
//
//   - Placeholders: statements are written with ?; [Dialect.Rebind]
//     rewrites every statement once, in [New], never per call.
//   - Unique violations: [Dialect.IsUnique], turned into
//     [store.ErrExists] or [store.ErrConflict] by the method.
//   - "No rows": both drivers' errors wrap sql.ErrNoRows; the scan
//     functions turn it into [store.ErrNotFound].
//   - Transactions: [DB.Tx]. SQLite runs them BEGIN IMMEDIATE on its one
//     write connection (writes queue in Go, honouring each context);
//     PostgreSQL runs them on its pool.
//   - Reads: [DB.QueryRow] and [DB.Query] outside a transaction. SQLite
//     reads on a pool of query-only connections; PostgreSQL tries a read
//     once more after a lost connection (a restarted server). So a
//     statement that writes never goes through them: it uses [DB.Exec],
//     [DB.ExecRow] (RETURNING) or a transaction.
//   - Row locks: [Dialect.ForShare] (FOR SHARE on PostgreSQL; nothing on
//     SQLite, whose write transaction excludes every other writer).
//     Where PostgreSQL's copy read a row FOR UPDATE and then wrote it, the
//     body writes with one UPDATE … RETURNING that only a row in the
//     right state passes (UseInvite, UseOAuthToken, AcceptInvite).
//   - Times are Unix milliseconds in BIGINT/INTEGER columns in both;
//     lists are JSON text; upserts are ON CONFLICT … DO UPDATE and
//     RETURNING works in both (SQLite 3.35 and later).
//   - The schema: [FirstSteps] and [Steps] are written once with the
//     words that differ ([SchemaTypes]: BLOB or BYTEA, the auto-numbered
//     key, now in milliseconds, the audit log's trigger); [Migrate] runs
//     them under each engine's lock.
//
// What stays in an engine: the call log's batch insert (COPY on
// PostgreSQL, multi-row INSERTs on SQLite; both take their row values from
// [AppendCallArgs]), Check's wording, Close, SQLite's backup and file
// check, PostgreSQL's reconnecting reads.
//
// # Repeated code
//
// Before this package every method was written twice, and the copies had
// drifted (CleanText on task fields in one only; call log batch ids never
// forgotten in the other). `duplicates --repo internal/store --most 200
// --seconds 120` counted 81 pairs of repeated runs of six or more lines in
// internal/store, 24 of them between the SQLite and PostgreSQL packages,
// the largest 33 lines (migrate.go), 29 (tasks.go), 30 (users.go), 30
// (projects.go) and 18 (idempotency.go). After it: 37 pairs, none between
// the engines; the largest left are 11 lines between two contract-suite
// files, 14 of like shape in one test file and 10 between two files of
// this package. The engines' non-test code went from 2,868 (sqlite) and
// 2,548 (postgres) lines to 552 and 438; this package has about 2,530 and
// sqlshared 844 (849 before): 6,265 lines before, about 4,370 after.
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// Row is one row to scan: the answer of QueryRow, or each row of Query.
type Row = sqlshared.Row

// Querier runs statements inside a transaction, or outside one as [DB]
// says. A Querier of a transaction is for the goroutine running it only.
type Querier interface {
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, q string, args ...any) (int64, error)
	// QueryRow runs a statement that returns at most one row; errors,
	// "no rows" included, come from the row's Scan.
	QueryRow(ctx context.Context, q string, args ...any) Row
	// Query runs a statement and calls each for every row, in order,
	// stopping at the first error each returns.
	Query(ctx context.Context, each func(Row) error, q string, args ...any) error
}

// DB is an engine's connection as the store body uses it. Every method is
// safe for concurrent use.
//
// Outside a transaction, QueryRow and Query are reads only (see the
// package doc); Exec runs one write statement, committed on its own.
type DB interface {
	Querier
	// ExecRow runs one write statement that returns a row (RETURNING),
	// committed on its own. It is never retried.
	ExecRow(ctx context.Context, q string, args ...any) Row
	// Tx runs fn in a write transaction, committed if fn returns nil and
	// rolled back otherwise; it returns fn's error as it is.
	Tx(ctx context.Context, fn func(Querier) error) error
}

// Dialect is what differs between the engines' SQL.
type Dialect interface {
	// Rebind returns q, written with ? placeholders, in the engine's
	// form. [New] calls it once for every statement.
	Rebind(q string) string
	// Param returns the placeholder of the nth argument (from 1) of a
	// statement built at run time (filters).
	Param(n int) string
	// ForShare is the clause that share-locks the rows a SELECT reads
	// until its transaction ends, after the statement: empty where a
	// write transaction already excludes every other writer (SQLite).
	ForShare() string
	// IsUnique reports whether err is a unique or primary key violation.
	IsUnique(err error) bool
}

// Store implements the store methods over a [DB] and a [Dialect]. The
// engine packages embed it in their own Store.
type Store struct {
	db DB
	d  Dialect
	q  *statements // every statement, rebound for the dialect
}

// New returns the store body over db, speaking d.
func New(db DB, d Dialect) *Store {
	return &Store{db: db, d: d, q: rebind(d)}
}

// DB returns the connection the store runs on, for engine packages that
// add methods of their own.
func (s *Store) DB() DB { return s.db }

// statements are the shared statements and this package's own, in a
// dialect's form.
type statements struct {
	sqlshared.Statements
	own

	// upstreamKeyProjectShared is UpstreamKeyProject, share-locking the
	// key's row.
	upstreamKeyProjectShared string
}

// rebind returns every statement rewritten by d.Rebind.
func rebind(d Dialect) *statements {
	st := &statements{Statements: sqlshared.Q, own: ownQ}
	sqlshared.RebindAll(&st.Statements, d.Rebind)
	sqlshared.RebindAll(&st.own, d.Rebind)
	st.upstreamKeyProjectShared = st.UpstreamKeyProject + d.ForShare()
	return st
}

// Rows are the rows of a query as both drivers give them (*sql.Rows,
// pgx.Rows), for [Each].
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Each calls each for every row of rows, stopping at the first error; the
// caller closes rows. Engines use it to implement [Querier.Query].
func Each(rows Rows, each func(Row) error) error {
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// list runs a read and scans each row with scan.
func list[T any](ctx context.Context, q Querier, scan func(Row) (T, error), query string, args ...any) ([]T, error) {
	var out []T
	err := q.Query(ctx, func(r Row) error {
		v, err := scan(r)
		if err != nil {
			return err
		}
		out = append(out, v)
		return nil
	}, query, args...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// mustAffect returns [store.ErrNotFound] if a statement changed no row.
func mustAffect(n int64, err error) error {
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// exists returns [store.ErrNotFound] unless query finds a row.
func exists(ctx context.Context, q Querier, query string, args ...any) error {
	var one int
	return notFound(q.QueryRow(ctx, query, args...).Scan(&one))
}

// blob is raw JSON as stored: NULL for none. An untyped nil, not a nil
// []byte, which database/sql would store as an empty blob.
func blob(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

// rawJSON is a stored blob as raw JSON: nil for NULL.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

var (
	millis         = sqlshared.Millis
	fromMillis     = sqlshared.FromMillis
	fromNullMillis = sqlshared.FromNullMillis
	now            = sqlshared.Now
)

// notFound turns "no rows" (sql.ErrNoRows, which pgx.ErrNoRows wraps)
// into [store.ErrNotFound].
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}
