package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

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
		err := tx.QueryRowContext(ctx, q.ProjectName, k.ProjectID).Scan(&k.ProjectName)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("project %d: %w", k.ProjectID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, q.InsertKey,
			k.ID, k.ProjectID, k.Kind, k.Name, hash, k.ReadOnly, tools,
			k.DisplayName, k.Author, k.Community, k.IdentityAudience, millis(k.CreatedAt))
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
	k, err := sqlshared.ScanKey(s.keyByHash.QueryRowContext(ctx, hash))
	if err != nil {
		return store.Key{}, fmt.Errorf("key by hash: %w", err)
	}
	return k, nil
}

// Key implements [store.Store].
func (s *Store) Key(ctx context.Context, id string) (store.Key, error) {
	k, err := sqlshared.ScanKey(s.r.QueryRowContext(ctx, q.KeyByID, id))
	if err != nil {
		return store.Key{}, fmt.Errorf("key %q: %w", id, err)
	}
	return k, nil
}

// Keys implements [store.Store].
func (s *Store) Keys(ctx context.Context, projectID int64) ([]store.Key, error) {
	query, args := q.KeysOrder, []any{}
	if projectID != 0 {
		query, args = q.KeysOfProject, append(args, projectID)
	}
	ks, err := queryList(ctx, s.r, sqlshared.ScanKey, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return ks, nil
}

// RevokeKey implements [store.Store]. A second revocation keeps the time of
// the first.
func (s *Store) RevokeKey(ctx context.Context, id string) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q.RevokeKey, millis(now()), id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, q.DeleteKeyUpstream, id); err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		var one int
		return tx.QueryRowContext(ctx, q.KeyExists, id).Scan(&one)
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
	err := s.updateOne(ctx, q.SetKeyMeta, m.DisplayName, m.Author, m.Community, id)
	if err != nil {
		return fmt.Errorf("set metadata of key %q: %w", id, err)
	}
	return nil
}

// SetKeyIdentityAudience implements [store.Store].
func (s *Store) SetKeyIdentityAudience(ctx context.Context, id, audience string) error {
	err := s.updateOne(ctx, q.SetKeyIdentityAudience, audience, id)
	if err != nil {
		return fmt.Errorf("set identity audience of key %q: %w", id, err)
	}
	return nil
}
