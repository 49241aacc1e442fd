package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/spacefix/spacefix/internal/store"
)

// SetMeta implements [store.Store].
func (s *Store) SetMeta(ctx context.Context, name, value string) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value, updated_at) VALUES (?, ?, ?)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
			name, value, millis(now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("set %s: %w", name, err)
	}
	return nil
}

// Meta implements [store.Store].
func (s *Store) Meta(ctx context.Context, name string) (string, error) {
	var v string
	err := s.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%s: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	return v, nil
}

// SwapMeta implements [store.Store].
func (s *Store) SwapMeta(ctx context.Context, name, old, value string) (bool, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		q, args := `UPDATE meta SET value = ?, updated_at = ? WHERE key = ? AND value = ?`, []any{value, millis(now()), name, old}
		if old == "" {
			q, args = `INSERT INTO meta (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING`, []any{name, value, millis(now())}
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("swap %s: %w", name, err)
	}
	return n == 1, nil
}
