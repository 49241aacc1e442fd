package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/spacefix/spacefix/internal/store"
)

// ToolSettings implements [store.Store].
func (s *Store) ToolSettings(ctx context.Context, projectID int64) ([]store.ToolSettings, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT project_id, tool, description, cache_seconds, access, disabled, updated_at
FROM tool_settings WHERE project_id = ? ORDER BY tool`, projectID)
	if err != nil {
		return nil, fmt.Errorf("tool settings of project %d: %w", projectID, err)
	}
	defer rows.Close()
	var out []store.ToolSettings
	for rows.Next() {
		var (
			ts      store.ToolSettings
			updated int64
		)
		if err := rows.Scan(&ts.ProjectID, &ts.Tool, &ts.Description, &ts.CacheSeconds, &ts.Access, &ts.Disabled, &updated); err != nil {
			return nil, fmt.Errorf("tool settings of project %d: %w", projectID, err)
		}
		ts.UpdatedAt = fromMillis(updated)
		out = append(out, ts)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tool settings of project %d: %w", projectID, err)
	}
	return out, nil
}

// SaveToolSettings implements [store.Store].
func (s *Store) SaveToolSettings(ctx context.Context, ts store.ToolSettings) (store.ToolSettings, error) {
	if ts.Tool == "" {
		return store.ToolSettings{}, errors.New("save tool settings: empty tool name")
	}
	ts.UpdatedAt = now()
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if err := projectExists(ctx, tx, ts.ProjectID); err != nil {
			return err
		}
		if ts.IsZero() {
			_, err := tx.ExecContext(ctx, `DELETE FROM tool_settings WHERE project_id = ? AND tool = ?`, ts.ProjectID, ts.Tool)
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO tool_settings
(project_id, tool, description, cache_seconds, access, disabled, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (project_id, tool) DO UPDATE SET description = excluded.description,
cache_seconds = excluded.cache_seconds, access = excluded.access, disabled = excluded.disabled,
updated_at = excluded.updated_at`,
			ts.ProjectID, ts.Tool, ts.Description, ts.CacheSeconds, ts.Access, ts.Disabled, millis(ts.UpdatedAt))
		return err
	})
	if err != nil {
		return store.ToolSettings{}, fmt.Errorf("save settings of tool %q: %w", ts.Tool, err)
	}
	return ts, nil
}

// projectExists returns [store.ErrNotFound] unless the project exists.
func projectExists(ctx context.Context, tx *sql.Tx, id int64) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM projects WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("project %d: %w", id, store.ErrNotFound)
	}
	return err
}

const selectApproval = `SELECT project_id, tool, definition, approved_at, rejected, rejected_at FROM approvals`

// Approvals implements [store.Store].
func (s *Store) Approvals(ctx context.Context, projectID int64) ([]store.Approval, error) {
	rows, err := s.r.QueryContext(ctx, selectApproval+` WHERE project_id = ? ORDER BY tool`, projectID)
	if err != nil {
		return nil, fmt.Errorf("approvals of project %d: %w", projectID, err)
	}
	defer rows.Close()
	var out []store.Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, fmt.Errorf("approvals of project %d: %w", projectID, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("approvals of project %d: %w", projectID, err)
	}
	return out, nil
}

// ApproveTool implements [store.Store].
func (s *Store) ApproveTool(ctx context.Context, projectID int64, tool string, def []byte) (store.Approval, error) {
	a, err := s.decide(ctx, projectID, tool, def, `INSERT INTO approvals (project_id, tool, definition, approved_at)
VALUES (?, ?, ?, ?) ON CONFLICT (project_id, tool) DO UPDATE SET definition = excluded.definition,
approved_at = excluded.approved_at, rejected = NULL, rejected_at = NULL`)
	if err != nil {
		return store.Approval{}, fmt.Errorf("approve tool %q: %w", tool, err)
	}
	return a, nil
}

// RejectTool implements [store.Store].
func (s *Store) RejectTool(ctx context.Context, projectID int64, tool string, def []byte) (store.Approval, error) {
	a, err := s.decide(ctx, projectID, tool, def, `INSERT INTO approvals (project_id, tool, rejected, rejected_at)
VALUES (?, ?, ?, ?) ON CONFLICT (project_id, tool) DO UPDATE SET rejected = excluded.rejected,
rejected_at = excluded.rejected_at`)
	if err != nil {
		return store.Approval{}, fmt.Errorf("reject tool %q: %w", tool, err)
	}
	return a, nil
}

// decide runs an approval upsert and reads the row back.
func (s *Store) decide(ctx context.Context, projectID int64, tool string, def []byte, upsert string) (store.Approval, error) {
	if tool == "" || len(def) == 0 {
		return store.Approval{}, errors.New("empty tool name or definition")
	}
	var a store.Approval
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if err := projectExists(ctx, tx, projectID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, upsert, projectID, tool, def, millis(now())); err != nil {
			return err
		}
		var err error
		a, err = scanApproval(tx.QueryRowContext(ctx, selectApproval+` WHERE project_id = ? AND tool = ?`, projectID, tool))
		return err
	})
	return a, err
}

func scanApproval(sc scanner) (store.Approval, error) {
	var (
		a                  store.Approval
		approved, rejected sql.NullInt64
	)
	if err := sc.Scan(&a.ProjectID, &a.Tool, &a.Definition, &approved, &a.Rejected, &rejected); err != nil {
		return store.Approval{}, err
	}
	if approved.Valid {
		a.ApprovedAt = fromMillis(approved.Int64)
	}
	if rejected.Valid {
		a.RejectedAt = fromMillis(rejected.Int64)
	}
	return a, nil
}
