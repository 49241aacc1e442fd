package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

var _ store.UpstreamAccounts = (*Store)(nil)

// upstreamSchema is migration step 11 (sqlshared.UpstreamSchema).
var upstreamSchema = sqlshared.UpstreamSchema("BLOB")

// upstreamIndicatorSchema is migration step 12.
var upstreamIndicatorSchema = sqlshared.UpstreamIndicatorSchema

// upstreamFlowSchema is migration step 14.
var upstreamFlowSchema = sqlshared.UpstreamFlowSchema

// PutUpstreamAccount implements [store.UpstreamAccounts]. The key must be
// a live agent key of a.ProjectID and the user must exist: ErrNotFound
// otherwise.
func (s *Store) PutUpstreamAccount(ctx context.Context, a store.UpstreamAccount) error {
	a = sqlshared.UpstreamAccountTimes(a)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var project int64
		if err := tx.QueryRowContext(ctx, q.UpstreamKeyProject, a.AgentKeyID).Scan(&project); err != nil {
			return err
		}
		if project != a.ProjectID {
			return sql.ErrNoRows
		}
		var one int
		if err := tx.QueryRowContext(ctx, q.UserExists, a.UserID).Scan(&one); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, q.PutUpstreamAccount, sqlshared.UpstreamAccountArgs(a)...)
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("put the upstream account of user %d for agent key %q: %w", a.UserID, a.AgentKeyID, err)
	}
	return nil
}

// UpdateUpstreamAccount implements [store.UpstreamAccounts].
func (s *Store) UpdateUpstreamAccount(ctx context.Context, a store.UpstreamAccount) (bool, error) {
	if a.UpdatedAt.IsZero() {
		a.UpdatedAt = now()
	}
	n, err := s.execWrite(ctx, q.UpdateUpstreamAccount, sqlshared.UpdateUpstreamAccountArgs(a)...)
	if err != nil {
		return false, fmt.Errorf("update the upstream account of user %d for agent key %q: %w", a.UserID, a.AgentKeyID, err)
	}
	return n == 1, nil
}

// UpstreamAccount implements [store.UpstreamAccounts].
func (s *Store) UpstreamAccount(ctx context.Context, agentKeyID string, userID int64) (store.UpstreamAccount, error) {
	a, err := sqlshared.ScanUpstreamAccount(s.r.QueryRowContext(ctx, q.UpstreamAccount, agentKeyID, userID))
	if err != nil {
		return store.UpstreamAccount{}, fmt.Errorf("upstream account of user %d for agent key %q: %w", userID, agentKeyID, err)
	}
	return a, nil
}

// UpstreamAccounts implements [store.UpstreamAccounts].
func (s *Store) UpstreamAccounts(ctx context.Context, f store.UpstreamFilter) ([]store.UpstreamAccount, error) {
	query, args := sqlshared.UpstreamAccountsQuery(f, sqlshared.Question)
	out, err := queryList(ctx, s.r, sqlshared.ScanUpstreamAccount, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list upstream accounts: %w", err)
	}
	return out, nil
}

// DeleteUpstreamAccounts implements [store.UpstreamAccounts].
func (s *Store) DeleteUpstreamAccounts(ctx context.Context, f store.UpstreamFilter) (int, error) {
	where, args := sqlshared.UpstreamWhere(f, sqlshared.Question)
	if where == "" {
		return 0, nil
	}
	n, err := s.deleteRows(ctx, `DELETE FROM upstream_accounts`+where, args...)
	if err != nil {
		return 0, fmt.Errorf("delete upstream accounts: %w", err)
	}
	return int(n), nil
}

// UpstreamClient implements [store.UpstreamAccounts].
func (s *Store) UpstreamClient(ctx context.Context, resource, redirectURI string) (store.UpstreamClient, error) {
	c, err := sqlshared.ScanUpstreamClient(s.r.QueryRowContext(ctx, q.UpstreamClient, resource, redirectURI))
	if err != nil {
		return store.UpstreamClient{}, fmt.Errorf("upstream client of %s: %w", resource, err)
	}
	return c, nil
}

// PutUpstreamClient implements [store.UpstreamAccounts].
func (s *Store) PutUpstreamClient(ctx context.Context, c store.UpstreamClient) error {
	args, err := sqlshared.UpstreamClientArgs(c)
	if err == nil {
		_, err = s.execWrite(ctx, q.PutUpstreamClient, args...)
	}
	if err != nil {
		return fmt.Errorf("put the upstream client of %s: %w", c.Resource, err)
	}
	return nil
}

// UpstreamClients implements [store.UpstreamAccounts].
func (s *Store) UpstreamClients(ctx context.Context) ([]store.UpstreamClient, error) {
	out, err := queryList(ctx, s.r, sqlshared.ScanUpstreamClient, q.UpstreamClients)
	if err != nil {
		return nil, fmt.Errorf("list upstream clients: %w", err)
	}
	return out, nil
}
