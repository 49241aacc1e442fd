package sqlite

import (
	"context"
	"database/sql"

	"github.com/spacefix/spacefix/internal/store/sqlshared"
	"github.com/spacefix/spacefix/internal/store/sqlstore"
)

// db is the [sqlstore.DB] of a SQLite file: reads on the pool of
// query-only connections, every write on the one write connection.
type db struct {
	w, r *sql.DB
	// prepared are statements prepared once on r, by their text: the
	// request path's reads.
	prepared map[string]*sql.Stmt
}

var _ sqlstore.DB = (*db)(nil)

func (d *db) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	return execN(d.w.ExecContext(ctx, q, args...))
}

func (d *db) ExecRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	return d.w.QueryRowContext(ctx, q, args...)
}

func (d *db) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	if st := d.prepared[q]; st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return d.r.QueryRowContext(ctx, q, args...)
}

func (d *db) Query(ctx context.Context, each func(sqlstore.Row) error, q string, args ...any) error {
	rows, err := d.r.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	return eachRow(rows, each)
}

// Tx runs fn in an IMMEDIATE transaction on the write connection: it
// takes the file's write lock first, so it never fails halfway on a lock
// another process took (SQLITE_BUSY_SNAPSHOT).
func (d *db) Tx(ctx context.Context, fn func(sqlstore.Querier) error) error {
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(txQuerier{tx}); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// txQuerier is the [sqlstore.Querier] of a transaction.
type txQuerier struct{ tx *sql.Tx }

func (t txQuerier) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	return execN(t.tx.ExecContext(ctx, q, args...))
}

func (t txQuerier) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	return t.tx.QueryRowContext(ctx, q, args...)
}

func (t txQuerier) Query(ctx context.Context, each func(sqlstore.Row) error, q string, args ...any) error {
	rows, err := t.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	return eachRow(rows, each)
}

func execN(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// eachRow calls each for every row of rows, and closes them.
func eachRow(rows *sql.Rows, each func(sqlstore.Row) error) error {
	defer rows.Close()
	return sqlstore.Each(rows, each)
}

// dialect is SQLite's [sqlstore.Dialect].
type dialect struct{}

func (dialect) Rebind(q string) string  { return q }
func (dialect) IsUnique(err error) bool { return isUnique(err) }
func (dialect) Param(n int) string      { return sqlshared.Question(n) }
func (dialect) ForShare() string        { return "" }
