package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/spacefix/spacefix/internal/store/sqlshared"
	"github.com/spacefix/spacefix/internal/store/sqlstore"
)

// db is the [sqlstore.DB] of a PostgreSQL database, on pgx's pool with
// no database/sql in between. A read outside a transaction is tried once
// more after a lost connection ([Store.readRetry]).
type db struct{ s *Store }

var _ sqlstore.DB = db{}

func (d db) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := d.s.pool.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (d db) ExecRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	return d.s.pool.QueryRow(ctx, q, args...)
}

func (d db) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	return retryRow{d.s, ctx, q, args}
}

// Query is tried once more after a lost connection only if no row reached
// each yet: a repeat would hand rows over twice.
func (d db) Query(ctx context.Context, each func(sqlstore.Row) error, q string, args ...any) error {
	var (
		delivered bool
		err       error
	)
	return d.s.readRetry(ctx, func() error {
		if !delivered {
			err = eachRow(ctx, d.s.pool, func(r sqlstore.Row) error { delivered = true; return each(r) }, q, args)
		}
		return err
	})
}

// Tx runs fn in a transaction on the pool.
func (d db) Tx(ctx context.Context, fn func(sqlstore.Querier) error) error {
	return pgx.BeginFunc(ctx, d.s.pool, func(tx pgx.Tx) error { return fn(txQuerier{tx}) })
}

// retryRow is a row read when it is scanned, and read again if the first
// attempt met a lost connection.
type retryRow struct {
	s    *Store
	ctx  context.Context
	q    string
	args []any
}

func (r retryRow) Scan(dest ...any) error {
	return r.s.readRetry(r.ctx, func() error {
		return r.s.pool.QueryRow(r.ctx, r.q, r.args...).Scan(dest...)
	})
}

// txQuerier is the [sqlstore.Querier] of a transaction.
type txQuerier struct{ tx pgx.Tx }

func (t txQuerier) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (t txQuerier) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	return t.tx.QueryRow(ctx, q, args...)
}

func (t txQuerier) Query(ctx context.Context, each func(sqlstore.Row) error, q string, args ...any) error {
	return eachRow(ctx, t.tx, each, q, args)
}

// eachRow runs q on conn and calls each for every row.
func eachRow(ctx context.Context, conn interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, each func(sqlstore.Row) error, q string, args []any) error {
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return sqlstore.Each(rows, each)
}

// dialect is PostgreSQL's [sqlstore.Dialect]: $n placeholders.
type dialect struct{}

func (dialect) Rebind(q string) string  { return sqlshared.Numbered(q) }
func (dialect) IsUnique(err error) bool { return isUnique(err) }
func (dialect) Param(n int) string      { return sqlshared.Dollar(n) }
func (dialect) ForShare() string        { return " FOR SHARE" }
