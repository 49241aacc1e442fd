package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

const selectKey = `SELECT k.id, k.project_id, p.name, k.kind, k.name, k.read_only, k.tools,
k.display_name, k.author, k.community, k.created_at, k.revoked_at
FROM keys k JOIN projects p ON p.id = k.project_id`

// CreateKey implements [store.Store]. It returns [store.ErrNotFound] if the
// project does not exist and [store.ErrExists] if the id or the hash is taken.
func (s *Store) CreateKey(ctx context.Context, k store.Key, hash []byte) (store.Key, error) {
	if err := store.CheckNewKey(k, hash); err != nil {
		return store.Key{}, fmt.Errorf("create key %q: %w", k.ID, err)
	}
	tools, err := store.EncodeList(k.Tools)
	if err != nil {
		return store.Key{}, fmt.Errorf("create key %q: %w", k.ID, err)
	}
	k.Tools = store.CloneList(k.Tools)
	k.CreatedAt = now()
	k.RevokedAt = time.Time{}
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT name FROM projects WHERE id = ?`, k.ProjectID).Scan(&k.ProjectName)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("project %d: %w", k.ProjectID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO keys
(id, project_id, kind, name, hash, read_only, tools, display_name, author, community, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			k.ID, k.ProjectID, k.Kind, k.Name, hash, k.ReadOnly, tools,
			k.DisplayName, k.Author, k.Community, millis(k.CreatedAt))
		if isUnique(err) {
			return store.ErrExists
		}
		return err
	})
	if err != nil {
		return store.Key{}, fmt.Errorf("create key %q: %w", k.ID, err)
	}
	return k, nil
}

// KeyByHash implements [store.Store].
func (s *Store) KeyByHash(ctx context.Context, hash []byte) (store.Key, error) {
	k, err := scanKey(s.keyByHash.QueryRowContext(ctx, hash))
	if err != nil {
		return store.Key{}, fmt.Errorf("key by hash: %w", err)
	}
	return k, nil
}

// Key implements [store.Store].
func (s *Store) Key(ctx context.Context, id string) (store.Key, error) {
	k, err := scanKey(s.r.QueryRowContext(ctx, selectKey+` WHERE k.id = ?`, id))
	if err != nil {
		return store.Key{}, fmt.Errorf("key %q: %w", id, err)
	}
	return k, nil
}

// Keys implements [store.Store].
func (s *Store) Keys(ctx context.Context, projectID int64) ([]store.Key, error) {
	q, args := selectKey, []any{}
	if projectID != 0 {
		q += ` WHERE k.project_id = ?`
		args = append(args, projectID)
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY k.seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var ks []store.Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		ks = append(ks, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return ks, nil
}

// RevokeKey implements [store.Store]. A second revocation keeps the time of
// the first.
func (s *Store) RevokeKey(ctx context.Context, id string) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, millis(now()), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		var one int
		return tx.QueryRowContext(ctx, `SELECT 1 FROM keys WHERE id = ?`, id).Scan(&one)
	})
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("revoke key %q: %w", id, err)
	}
	return nil
}

// SetKeyMeta implements [store.Store].
func (s *Store) SetKeyMeta(ctx context.Context, id string, m store.KeyMeta) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE keys SET display_name = ?, author = ?, community = ? WHERE id = ?`,
			m.DisplayName, m.Author, m.Community, id)
		if err != nil {
			return err
		}
		return mustAffect(res)
	})
	if err != nil {
		return fmt.Errorf("set metadata of key %q: %w", id, err)
	}
	return nil
}

func scanKey(sc scanner) (store.Key, error) {
	var (
		k       store.Key
		tools   string
		created int64
		revoked sql.NullInt64
	)
	err := sc.Scan(&k.ID, &k.ProjectID, &k.ProjectName, &k.Kind, &k.Name, &k.ReadOnly, &tools,
		&k.DisplayName, &k.Author, &k.Community, &created, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Key{}, store.ErrNotFound
	}
	if err != nil {
		return store.Key{}, err
	}
	list, err := store.DecodeList(tools)
	if err != nil {
		return store.Key{}, fmt.Errorf("decode tools of key %q: %w", k.ID, err)
	}
	k.Tools = list
	k.CreatedAt = fromMillis(created)
	if revoked.Valid {
		k.RevokedAt = fromMillis(revoked.Int64)
	}
	return k, nil
}
