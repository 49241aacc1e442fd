package sqlstore

import (
	"context"
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

// SavePolicy implements [store.Policies]. Two gateways saving from the
// same version both find it newest; the primary key takes one insert and
// the other affects no row: a conflict.
func (s *Store) SavePolicy(ctx context.Context, projectID, prev int64, doc json.RawMessage, by string) (store.Policy, error) {
	p := store.Policy{ProjectID: projectID, Version: prev + 1, Document: doc, UpdatedAt: now(), UpdatedBy: by}
	err := s.db.Tx(ctx, func(tx Querier) error {
		var newest int64
		if err := tx.QueryRow(ctx, s.q.NewestPolicy, projectID).Scan(&newest); err != nil {
			return err
		}
		if newest != prev {
			return store.ErrConflict
		}
		n, err := tx.Exec(ctx, s.q.InsertPolicy, projectID, p.Version, string(doc), millis(p.UpdatedAt), by)
		if err == nil && n == 0 {
			err = store.ErrConflict
		}
		return err
	})
	if err != nil {
		return store.Policy{}, fmt.Errorf("save the policy of project %d: %w", projectID, err)
	}
	return p, nil
}

// PolicyVersions implements [store.Policies].
func (s *Store) PolicyVersions(ctx context.Context, projectID int64, limit int) ([]store.Policy, error) {
	out, err := list(ctx, s.db, scanPolicy, s.q.PolicyVersions, projectID, limit)
	if err != nil {
		return nil, fmt.Errorf("the policy of project %d: %w", projectID, err)
	}
	return out, nil
}

func scanPolicy(row Row) (store.Policy, error) { return sqlshared.ScanPolicy(row) }
