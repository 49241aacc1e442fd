package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// CreateProject implements [store.Store].
func (s *Store) CreateProject(ctx context.Context, name string) (store.Project, error) {
	if name == "" {
		return store.Project{}, errors.New("create project: empty name")
	}
	p := store.Project{Name: name, CreatedAt: now()}
	err := s.db.ExecRow(ctx, s.q.InsertProject, name, millis(p.CreatedAt)).Scan(&p.ID)
	if s.d.IsUnique(err) {
		return store.Project{}, fmt.Errorf("create project %q: %w", name, store.ErrExists)
	}
	if err != nil {
		return store.Project{}, fmt.Errorf("create project %q: %w", name, err)
	}
	return p, nil
}

// Project implements [store.Store].
func (s *Store) Project(ctx context.Context, name string) (store.Project, error) {
	p, err := sqlshared.ScanProject(s.db.QueryRow(ctx, s.q.ProjectByName, name))
	if err != nil {
		return store.Project{}, fmt.Errorf("project %q: %w", name, err)
	}
	return p, nil
}

// ProjectByID implements [store.Store].
func (s *Store) ProjectByID(ctx context.Context, id int64) (store.Project, error) {
	p, err := sqlshared.ScanProject(s.db.QueryRow(ctx, s.q.ProjectByID, id))
	if err != nil {
		return store.Project{}, fmt.Errorf("project %d: %w", id, err)
	}
	return p, nil
}

// Projects implements [store.Store].
func (s *Store) Projects(ctx context.Context) ([]store.Project, error) {
	ps, err := list(ctx, s.db, sqlshared.ScanProject, s.q.Projects)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	return ps, nil
}

// UpdateProjectSettings implements [store.Store]. It returns
// [store.ErrNotFound] if there is no such project.
func (s *Store) UpdateProjectSettings(ctx context.Context, id int64, ps store.ProjectSettings) error {
	b, err := json.Marshal(ps)
	if err != nil {
		return fmt.Errorf("update settings of project %d: %w", id, err)
	}
	if err := mustAffect(s.db.Exec(ctx, s.q.UpdateProjectSettings, string(b), id)); err != nil {
		return fmt.Errorf("update settings of project %d: %w", id, err)
	}
	return nil
}

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
	err = s.db.Tx(ctx, func(tx Querier) error {
		if err := tx.QueryRow(ctx, s.q.ProjectName, k.ProjectID).Scan(&k.ProjectName); err != nil {
			return fmt.Errorf("project %d: %w", k.ProjectID, notFound(err))
		}
		_, err := tx.Exec(ctx, s.q.InsertKey,
			k.ID, k.ProjectID, k.Kind, k.Name, hash, k.ReadOnly, tools,
			k.DisplayName, k.Author, k.Community, k.IdentityAudience, millis(k.CreatedAt))
		if s.d.IsUnique(err) {
			return store.ErrExists
		}
		return err
	})
	if err != nil {
		return store.Key{}, fmt.Errorf("create key %q: %w", k.ID, err)
	}
	return k, nil
}

// KeyByHash implements [store.Store]. Every request's key check comes
// here (on a cache miss): SQLite keeps the statement prepared, and
// PostgreSQL tries the read once more after a lost connection.
func (s *Store) KeyByHash(ctx context.Context, hash []byte) (store.Key, error) {
	k, err := sqlshared.ScanKey(s.db.QueryRow(ctx, s.q.KeyByHash, hash))
	if err != nil {
		return store.Key{}, fmt.Errorf("key by hash: %w", err)
	}
	return k, nil
}

// Key implements [store.Store].
func (s *Store) Key(ctx context.Context, id string) (store.Key, error) {
	k, err := sqlshared.ScanKey(s.db.QueryRow(ctx, s.q.KeyByID, id))
	if err != nil {
		return store.Key{}, fmt.Errorf("key %q: %w", id, err)
	}
	return k, nil
}

// Keys implements [store.Store].
func (s *Store) Keys(ctx context.Context, projectID int64) ([]store.Key, error) {
	query, args := s.q.KeysOrder, []any{}
	if projectID != 0 {
		query, args = s.q.KeysOfProject, append(args, projectID)
	}
	ks, err := list(ctx, s.db, sqlshared.ScanKey, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return ks, nil
}

// RevokeKey implements [store.Store]. A second revocation keeps the time of
// the first. The upstream accounts people linked for the key go.
func (s *Store) RevokeKey(ctx context.Context, id string) error {
	err := s.db.Tx(ctx, func(tx Querier) error {
		n, err := tx.Exec(ctx, s.q.RevokeKey, millis(now()), id)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q.DeleteKeyUpstream, id); err != nil || n > 0 {
			return err
		}
		return exists(ctx, tx, s.q.KeyExists, id)
	})
	if err != nil {
		return fmt.Errorf("revoke key %q: %w", id, err)
	}
	return nil
}

// SetKeyMeta implements [store.Store].
func (s *Store) SetKeyMeta(ctx context.Context, id string, m store.KeyMeta) error {
	err := mustAffect(s.db.Exec(ctx, s.q.SetKeyMeta, m.DisplayName, m.Author, m.Community, id))
	if err != nil {
		return fmt.Errorf("set metadata of key %q: %w", id, err)
	}
	return nil
}

// SetKeyIdentityAudience implements [store.Store].
func (s *Store) SetKeyIdentityAudience(ctx context.Context, id, audience string) error {
	err := mustAffect(s.db.Exec(ctx, s.q.SetKeyIdentityAudience, audience, id))
	if err != nil {
		return fmt.Errorf("set identity audience of key %q: %w", id, err)
	}
	return nil
}
