package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/spacefix/spacefix/internal/store"
)

// ToolSettings implements [store.Store].
func (s *Store) ToolSettings(ctx context.Context, projectID int64) ([]store.ToolSettings, error) {
	out, err := list(ctx, s.db, scanToolSettings, s.q.ToolSettings, projectID)
	if err != nil {
		return nil, fmt.Errorf("tool settings of project %d: %w", projectID, err)
	}
	return out, nil
}

func scanToolSettings(row Row) (store.ToolSettings, error) {
	var (
		ts      store.ToolSettings
		updated int64
	)
	err := row.Scan(&ts.ProjectID, &ts.Tool, &ts.Description, &ts.CacheSeconds, &ts.Access, &ts.Disabled, &updated)
	ts.UpdatedAt = fromMillis(updated)
	return ts, err
}

// SaveToolSettings implements [store.Store]. Settings of all zero values
// are deleted.
func (s *Store) SaveToolSettings(ctx context.Context, ts store.ToolSettings) (store.ToolSettings, error) {
	if ts.Tool == "" {
		return store.ToolSettings{}, errors.New("save tool settings: empty tool name")
	}
	ts.UpdatedAt = now()
	err := s.db.Tx(ctx, func(tx Querier) error {
		if err := s.projectExists(ctx, tx, ts.ProjectID); err != nil {
			return err
		}
		if ts.IsZero() {
			_, err := tx.Exec(ctx, s.q.DeleteToolSettings, ts.ProjectID, ts.Tool)
			return err
		}
		_, err := tx.Exec(ctx, s.q.PutToolSettings,
			ts.ProjectID, ts.Tool, ts.Description, ts.CacheSeconds, ts.Access, ts.Disabled, millis(ts.UpdatedAt))
		return err
	})
	if err != nil {
		return store.ToolSettings{}, fmt.Errorf("save settings of tool %q: %w", ts.Tool, err)
	}
	return ts, nil
}

// projectExists returns [store.ErrNotFound] unless the project exists.
func (s *Store) projectExists(ctx context.Context, tx Querier, id int64) error {
	if err := exists(ctx, tx, s.q.ProjectExists, id); err != nil {
		return fmt.Errorf("project %d: %w", id, err)
	}
	return nil
}

// Approvals implements [store.Store].
func (s *Store) Approvals(ctx context.Context, projectID int64) ([]store.Approval, error) {
	out, err := list(ctx, s.db, scanApproval, s.q.Approvals, projectID)
	if err != nil {
		return nil, fmt.Errorf("approvals of project %d: %w", projectID, err)
	}
	return out, nil
}

// ApproveTool implements [store.Store].
func (s *Store) ApproveTool(ctx context.Context, projectID int64, tool string, def []byte) (store.Approval, error) {
	a, err := s.decide(ctx, projectID, tool, def, s.q.ApproveTool)
	if err != nil {
		return store.Approval{}, fmt.Errorf("approve tool %q: %w", tool, err)
	}
	return a, nil
}

// RejectTool implements [store.Store].
func (s *Store) RejectTool(ctx context.Context, projectID int64, tool string, def []byte) (store.Approval, error) {
	a, err := s.decide(ctx, projectID, tool, def, s.q.RejectTool)
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
	err := s.db.Tx(ctx, func(tx Querier) error {
		if err := s.projectExists(ctx, tx, projectID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, upsert, projectID, tool, def, millis(now())); err != nil {
			return err
		}
		var err error
		a, err = scanApproval(tx.QueryRow(ctx, s.q.Approval, projectID, tool))
		return err
	})
	return a, err
}

func scanApproval(row Row) (store.Approval, error) {
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
