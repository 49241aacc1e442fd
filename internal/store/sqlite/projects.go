package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// CreateProject implements [store.Store].
func (s *Store) CreateProject(ctx context.Context, name string) (store.Project, error) {
	if name == "" {
		return store.Project{}, errors.New("create project: empty name")
	}
	p := store.Project{Name: name, CreatedAt: now()}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx,
			`INSERT INTO projects (name, created_at, settings) VALUES (?, ?, '{}') RETURNING id`,
			name, millis(p.CreatedAt)).Scan(&p.ID)
	})
	if isUnique(err) {
		return store.Project{}, fmt.Errorf("create project %q: %w", name, store.ErrExists)
	}
	if err != nil {
		return store.Project{}, fmt.Errorf("create project %q: %w", name, err)
	}
	return p, nil
}

// Project implements [store.Store].
func (s *Store) Project(ctx context.Context, name string) (store.Project, error) {
	p, err := sqlshared.ScanProject(s.r.QueryRowContext(ctx, q.ProjectByName, name))
	if err != nil {
		return store.Project{}, fmt.Errorf("project %q: %w", name, err)
	}
	return p, nil
}

// ProjectByID implements [store.Store].
func (s *Store) ProjectByID(ctx context.Context, id int64) (store.Project, error) {
	p, err := sqlshared.ScanProject(s.r.QueryRowContext(ctx, q.ProjectByID, id))
	if err != nil {
		return store.Project{}, fmt.Errorf("project %d: %w", id, err)
	}
	return p, nil
}

// Projects implements [store.Store].
func (s *Store) Projects(ctx context.Context) ([]store.Project, error) {
	ps, err := queryList(ctx, s.r, sqlshared.ScanProject, q.Projects)
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
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q.UpdateProjectSettings, string(b), id)
		if err != nil {
			return err
		}
		return mustAffect(res)
	})
	if err != nil {
		return fmt.Errorf("update settings of project %d: %w", id, err)
	}
	return nil
}

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
