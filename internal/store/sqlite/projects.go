package sqlite

import (
	"context"
	"database/sql"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// scanner is a *sql.Row or *sql.Rows.
type scanner = sqlshared.Row

// q is the statements the SQLite store shares with the PostgreSQL one.
var q = sqlshared.Q

// mustAffect returns [store.ErrNotFound] if res affected no row.
// updateOne runs one statement in a write transaction; store.ErrNotFound
// when it changed no row.
func (s *Store) updateOne(ctx context.Context, query string, args ...any) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		return mustAffect(res)
	})
}

func mustAffect(res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// deleteRows runs a DELETE (or an UPDATE) in a write transaction and says
// how many rows it touched.
func (s *Store) deleteRows(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
