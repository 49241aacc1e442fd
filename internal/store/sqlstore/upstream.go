package sqlstore

import (
	"context"
	"fmt"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

var _ store.UpstreamAccounts = (*Store)(nil)

// PutUpstreamAccount implements [store.UpstreamAccounts]. The key must be
// a live agent key of a.ProjectID and the user must exist: ErrNotFound
// otherwise. The key's row is share-locked until the account is written
// (on SQLite the write transaction excludes every other writer), so a
// RevokeKey at the same moment runs wholly before (the Put finds the key
// revoked) or after (its cascade deletes the account).
func (s *Store) PutUpstreamAccount(ctx context.Context, a store.UpstreamAccount) error {
	a = sqlshared.UpstreamAccountTimes(a)
	err := s.db.Tx(ctx, func(tx Querier) error {
		var project int64
		if err := notFound(tx.QueryRow(ctx, s.q.upstreamKeyProjectShared, a.AgentKeyID).Scan(&project)); err != nil {
			return err
		}
		if project != a.ProjectID {
			return store.ErrNotFound
		}
		if err := exists(ctx, tx, s.q.UserExists, a.UserID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.q.PutUpstreamAccount, sqlshared.UpstreamAccountArgs(a)...)
		return err
	})
	if err != nil {
		return fmt.Errorf("put the upstream account of user %d for agent key %q: %w", a.UserID, a.AgentKeyID, err)
	}
	return nil
}

// UpdateUpstreamAccount implements [store.UpstreamAccounts]. Of two at
// once, the second waits on the first and then finds another version.
func (s *Store) UpdateUpstreamAccount(ctx context.Context, a store.UpstreamAccount) (bool, error) {
	if a.UpdatedAt.IsZero() {
		a.UpdatedAt = now()
	}
	n, err := s.db.Exec(ctx, s.q.UpdateUpstreamAccount, sqlshared.UpdateUpstreamAccountArgs(a)...)
	if err != nil {
		return false, fmt.Errorf("update the upstream account of user %d for agent key %q: %w", a.UserID, a.AgentKeyID, err)
	}
	return n == 1, nil
}

// UpstreamAccount implements [store.UpstreamAccounts].
func (s *Store) UpstreamAccount(ctx context.Context, agentKeyID string, userID int64) (store.UpstreamAccount, error) {
	a, err := sqlshared.ScanUpstreamAccount(s.db.QueryRow(ctx, s.q.UpstreamAccount, agentKeyID, userID))
	if err != nil {
		return store.UpstreamAccount{}, fmt.Errorf("upstream account of user %d for agent key %q: %w", userID, agentKeyID, err)
	}
	return a, nil
}

// UpstreamAccounts implements [store.UpstreamAccounts].
func (s *Store) UpstreamAccounts(ctx context.Context, f store.UpstreamFilter) ([]store.UpstreamAccount, error) {
	query, args := sqlshared.UpstreamAccountsQuery(f, s.d.Param)
	out, err := list(ctx, s.db, scanUpstreamAccount, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list upstream accounts: %w", err)
	}
	return out, nil
}

func scanUpstreamAccount(row Row) (store.UpstreamAccount, error) {
	return sqlshared.ScanUpstreamAccount(row)
}

// DeleteUpstreamAccounts implements [store.UpstreamAccounts].
func (s *Store) DeleteUpstreamAccounts(ctx context.Context, f store.UpstreamFilter) (int, error) {
	where, args := sqlshared.UpstreamWhere(f, s.d.Param)
	if where == "" {
		return 0, nil
	}
	n, err := s.db.Exec(ctx, `DELETE FROM upstream_accounts`+where, args...)
	if err != nil {
		return 0, fmt.Errorf("delete upstream accounts: %w", err)
	}
	return int(n), nil
}

// UpstreamClient implements [store.UpstreamAccounts].
func (s *Store) UpstreamClient(ctx context.Context, resource, redirectURI string) (store.UpstreamClient, error) {
	c, err := sqlshared.ScanUpstreamClient(s.db.QueryRow(ctx, s.q.UpstreamClient, resource, redirectURI))
	if err != nil {
		return store.UpstreamClient{}, fmt.Errorf("upstream client of %s: %w", resource, err)
	}
	return c, nil
}

// PutUpstreamClient implements [store.UpstreamAccounts].
func (s *Store) PutUpstreamClient(ctx context.Context, c store.UpstreamClient) error {
	args, err := sqlshared.UpstreamClientArgs(c)
	if err == nil {
		_, err = s.db.Exec(ctx, s.q.PutUpstreamClient, args...)
	}
	if err != nil {
		return fmt.Errorf("put the upstream client of %s: %w", c.Resource, err)
	}
	return nil
}

// UpstreamClients implements [store.UpstreamAccounts].
func (s *Store) UpstreamClients(ctx context.Context) ([]store.UpstreamClient, error) {
	out, err := list(ctx, s.db, scanUpstreamClient, s.q.UpstreamClients)
	if err != nil {
		return nil, fmt.Errorf("list upstream clients: %w", err)
	}
	return out, nil
}

func scanUpstreamClient(row Row) (store.UpstreamClient, error) {
	return sqlshared.ScanUpstreamClient(row)
}
