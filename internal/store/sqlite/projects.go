package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spacefix/spacefix/internal/store"
)

const selectProject = `SELECT id, name, created_at, settings FROM projects`

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
	p, err := scanProject(s.r.QueryRowContext(ctx, selectProject+` WHERE name = ?`, name))
	if err != nil {
		return store.Project{}, fmt.Errorf("project %q: %w", name, err)
	}
	return p, nil
}

// ProjectByID implements [store.Store].
func (s *Store) ProjectByID(ctx context.Context, id int64) (store.Project, error) {
	p, err := scanProject(s.r.QueryRowContext(ctx, selectProject+` WHERE id = ?`, id))
	if err != nil {
		return store.Project{}, fmt.Errorf("project %d: %w", id, err)
	}
	return p, nil
}

// Projects implements [store.Store].
func (s *Store) Projects(ctx context.Context) ([]store.Project, error) {
	rows, err := s.r.QueryContext(ctx, selectProject+` ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	defer rows.Close()
	var ps []store.Project
	for rows.Next() {
		p, err := scanProject(rows)
		if err != nil {
			return nil, fmt.Errorf("list projects: %w", err)
		}
		ps = append(ps, p)
	}
	if err := rows.Err(); err != nil {
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
		res, err := tx.ExecContext(ctx, `UPDATE projects SET settings = ? WHERE id = ?`, string(b), id)
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
type scanner interface{ Scan(dest ...any) error }

func scanProject(sc scanner) (store.Project, error) {
	var (
		p        store.Project
		created  int64
		settings string
	)
	if err := sc.Scan(&p.ID, &p.Name, &created, &settings); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return store.Project{}, store.ErrNotFound
		}
		return store.Project{}, err
	}
	p.CreatedAt = fromMillis(created)
	if err := json.Unmarshal([]byte(settings), &p.Settings); err != nil {
		return store.Project{}, fmt.Errorf("decode settings: %w", err)
	}
	return p, nil
}

// mustAffect returns [store.ErrNotFound] if res affected no row.
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
