package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/spacefix/spacefix/internal/store"
)

// ToolSettings implements [store.Store].
func (s *Store) ToolSettings(ctx context.Context, projectID int64) ([]store.ToolSettings, error) {
	out, err := list(ctx, s, func(row pgx.Row) (store.ToolSettings, error) {
		var (
			ts      store.ToolSettings
			updated int64
		)
		err := row.Scan(&ts.ProjectID, &ts.Tool, &ts.Description, &ts.CacheSeconds, &ts.Access, &ts.Disabled, &updated)
		ts.UpdatedAt = fromMillis(updated)
		return ts, err
	}, `SELECT project_id, tool, description, cache_seconds, access, disabled, updated_at
FROM tool_settings WHERE project_id = $1 ORDER BY tool`, projectID)
	if err != nil {
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := projectExists(ctx, tx, ts.ProjectID); err != nil {
			return err
		}
		if ts.IsZero() {
			_, err := tx.Exec(ctx, `DELETE FROM tool_settings WHERE project_id = $1 AND tool = $2`, ts.ProjectID, ts.Tool)
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO tool_settings
(project_id, tool, description, cache_seconds, access, disabled, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
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

const selectApproval = `SELECT project_id, tool, definition, approved_at, rejected, rejected_at FROM approvals`

// Approvals implements [store.Store].
func (s *Store) Approvals(ctx context.Context, projectID int64) ([]store.Approval, error) {
	out, err := list(ctx, s, scanApproval, selectApproval+` WHERE project_id = $1 ORDER BY tool`, projectID)
	if err != nil {
		return nil, fmt.Errorf("approvals of project %d: %w", projectID, err)
	}
	return out, nil
}

// ApproveTool implements [store.Store].
func (s *Store) ApproveTool(ctx context.Context, projectID int64, tool string, def []byte) (store.Approval, error) {
	a, err := s.decide(ctx, projectID, tool, def, `INSERT INTO approvals (project_id, tool, definition, approved_at)
VALUES ($1, $2, $3, $4) ON CONFLICT (project_id, tool) DO UPDATE SET definition = excluded.definition,
approved_at = excluded.approved_at, rejected = NULL, rejected_at = NULL`)
	if err != nil {
		return store.Approval{}, fmt.Errorf("approve tool %q: %w", tool, err)
	}
	return a, nil
}

// RejectTool implements [store.Store].
func (s *Store) RejectTool(ctx context.Context, projectID int64, tool string, def []byte) (store.Approval, error) {
	a, err := s.decide(ctx, projectID, tool, def, `INSERT INTO approvals (project_id, tool, rejected, rejected_at)
VALUES ($1, $2, $3, $4) ON CONFLICT (project_id, tool) DO UPDATE SET rejected = excluded.rejected,
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := projectExists(ctx, tx, projectID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, upsert, projectID, tool, def, millis(now())); err != nil {
			return err
		}
		var err error
		a, err = scanApproval(tx.QueryRow(ctx, selectApproval+` WHERE project_id = $1 AND tool = $2`, projectID, tool))
		return err
	})
	return a, err
}

func scanApproval(row pgx.Row) (store.Approval, error) {
	var (
		a                  store.Approval
		approved, rejected *int64
	)
	if err := row.Scan(&a.ProjectID, &a.Tool, &a.Definition, &approved, &a.Rejected, &rejected); err != nil {
		return store.Approval{}, err
	}
	a.ApprovedAt, a.RejectedAt = fromNullMillis(approved), fromNullMillis(rejected)
	return a, nil
}
