package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

var _ store.Policies = (*Store)(nil)

// Policy implements [store.Policies].
func (s *Store) Policy(ctx context.Context, projectID int64) (store.Policy, error) {
	vs, err := s.PolicyVersions(ctx, projectID, 1)
	if err != nil || len(vs) == 0 {
		return store.Policy{ProjectID: projectID}, err
	}
	return vs[0], nil
}

// SavePolicy implements [store.Policies].
func (s *Store) SavePolicy(ctx context.Context, projectID, prev int64, doc json.RawMessage, by string) (store.Policy, error) {
	p := store.Policy{ProjectID: projectID, Version: prev + 1, Document: doc, UpdatedAt: now(), UpdatedBy: by}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var newest int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM policies WHERE project_id = ?`, projectID).Scan(&newest); err != nil {
			return err
		}
		if newest != prev {
			return store.ErrConflict
		}
		res, err := tx.ExecContext(ctx, q.InsertPolicy, projectID, p.Version, string(doc), sqlshared.Millis(p.UpdatedAt), by)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return store.ErrConflict
		}
		return nil
	})
	if err != nil {
		return store.Policy{}, fmt.Errorf("save the policy of project %d: %w", projectID, err)
	}
	return p, nil
}

// PolicyVersions implements [store.Policies].
func (s *Store) PolicyVersions(ctx context.Context, projectID int64, limit int) ([]store.Policy, error) {
	out, err := queryList(ctx, s.r, func(r scanner) (store.Policy, error) { return sqlshared.ScanPolicy(r) }, q.PolicyVersions, projectID, limit)
	if err != nil {
		return nil, fmt.Errorf("the policy of project %d: %w", projectID, err)
	}
	return out, nil
}
