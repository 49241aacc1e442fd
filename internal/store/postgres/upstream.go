package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

var _ store.UpstreamAccounts = (*Store)(nil)

// upstreamSchema is migration step 11 (sqlshared.UpstreamSchema).
var upstreamSchema = sqlshared.UpstreamSchema("BYTEA")

// upstreamIndicatorSchema is migration step 12.
var upstreamIndicatorSchema = sqlshared.UpstreamIndicatorSchema

// upstreamFlowSchema is migration step 14.
var upstreamFlowSchema = sqlshared.UpstreamFlowSchema

// PutUpstreamAccount implements [store.UpstreamAccounts]. The key must be
// a live agent key of a.ProjectID and the user must exist: ErrNotFound
// otherwise. The key's row is share-locked until the account is written,
// so a RevokeKey at the same moment runs wholly before (the Put finds the
// key revoked) or after (its cascade deletes the account).
func (s *Store) PutUpstreamAccount(ctx context.Context, a store.UpstreamAccount) error {
	a = sqlshared.UpstreamAccountTimes(a)
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var project int64
		if err := notFound(tx.QueryRow(ctx, q.UpstreamKeyProject+` FOR SHARE`, a.AgentKeyID).Scan(&project)); err != nil {
			return err
		}
		if project != a.ProjectID {
			return store.ErrNotFound
		}
		var one int
		if err := notFound(tx.QueryRow(ctx, q.UserExists, a.UserID).Scan(&one)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, q.PutUpstreamAccount, sqlshared.UpstreamAccountArgs(a)...)
		return err
	})
	if err != nil {
		return fmt.Errorf("put the upstream account of user %d for agent key %q: %w", a.UserID, a.AgentKeyID, err)
	}
	return nil
}

// UpdateUpstreamAccount implements [store.UpstreamAccounts]. Of two at
// once, the second waits on the first's row lock and then finds another
// version.
func (s *Store) UpdateUpstreamAccount(ctx context.Context, a store.UpstreamAccount) (bool, error) {
	if a.UpdatedAt.IsZero() {
		a.UpdatedAt = now()
	}
	tag, err := s.pool.Exec(ctx, q.UpdateUpstreamAccount, sqlshared.UpdateUpstreamAccountArgs(a)...)
	if err != nil {
		return false, fmt.Errorf("update the upstream account of user %d for agent key %q: %w", a.UserID, a.AgentKeyID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// UpstreamAccount implements [store.UpstreamAccounts].
func (s *Store) UpstreamAccount(ctx context.Context, agentKeyID string, userID int64) (store.UpstreamAccount, error) {
	var a store.UpstreamAccount
	err := s.readRetry(ctx, func() (err error) {
		a, err = sqlshared.ScanUpstreamAccount(s.pool.QueryRow(ctx, q.UpstreamAccount, agentKeyID, userID))
		return err
	})
	if err != nil {
		return store.UpstreamAccount{}, fmt.Errorf("upstream account of user %d for agent key %q: %w", userID, agentKeyID, err)
	}
	return a, nil
}

// UpstreamAccounts implements [store.UpstreamAccounts].
func (s *Store) UpstreamAccounts(ctx context.Context, f store.UpstreamFilter) ([]store.UpstreamAccount, error) {
	query, args := sqlshared.UpstreamAccountsQuery(f, sqlshared.Dollar)
	var out []store.UpstreamAccount
	err := s.readRetry(ctx, func() (err error) {
		out, err = list(ctx, s, sqlshared.ScanUpstreamAccount, query, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list upstream accounts: %w", err)
	}
	return out, nil
}

// DeleteUpstreamAccounts implements [store.UpstreamAccounts].
func (s *Store) DeleteUpstreamAccounts(ctx context.Context, f store.UpstreamFilter) (int, error) {
	where, args := sqlshared.UpstreamWhere(f, sqlshared.Dollar)
	if where == "" {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM upstream_accounts`+where, args...)
	if err != nil {
		return 0, fmt.Errorf("delete upstream accounts: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// UpstreamClient implements [store.UpstreamAccounts].
func (s *Store) UpstreamClient(ctx context.Context, resource, redirectURI string) (store.UpstreamClient, error) {
	var c store.UpstreamClient
	err := s.readRetry(ctx, func() (err error) {
		c, err = sqlshared.ScanUpstreamClient(s.pool.QueryRow(ctx, q.UpstreamClient, resource, redirectURI))
		return err
	})
	if err != nil {
		return store.UpstreamClient{}, fmt.Errorf("upstream client of %s: %w", resource, err)
	}
	return c, nil
}

// PutUpstreamClient implements [store.UpstreamAccounts].
func (s *Store) PutUpstreamClient(ctx context.Context, c store.UpstreamClient) error {
	args, err := sqlshared.UpstreamClientArgs(c)
	if err == nil {
		_, err = s.pool.Exec(ctx, q.PutUpstreamClient, args...)
	}
	if err != nil {
		return fmt.Errorf("put the upstream client of %s: %w", c.Resource, err)
	}
	return nil
}

// UpstreamClients implements [store.UpstreamAccounts].
func (s *Store) UpstreamClients(ctx context.Context) ([]store.UpstreamClient, error) {
	var out []store.UpstreamClient
	err := s.readRetry(ctx, func() (err error) {
		out, err = list(ctx, s, sqlshared.ScanUpstreamClient, q.UpstreamClients)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list upstream clients: %w", err)
	}
	return out, nil
}
