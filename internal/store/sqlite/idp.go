package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

var (
	_ store.IdPs     = (*Store)(nil)
	_ store.UsedOnce = (*Store)(nil)
)

// CreateIdP implements [store.IdPs].
func (s *Store) CreateIdP(ctx context.Context, p store.IdP) (store.IdP, error) {
	p, args := sqlshared.IdPArgs(p)
	n, err := s.execWrite(ctx, q.InsertIdP, args...)
	if err == nil && n == 0 {
		err = store.ErrExists
	}
	if err != nil {
		return store.IdP{}, fmt.Errorf("add identity provider %s: %w", p.Issuer, err)
	}
	return p, nil
}

// IdP implements [store.IdPs].
func (s *Store) IdP(ctx context.Context, issuer string) (store.IdP, error) {
	p, err := sqlshared.ScanIdP(s.r.QueryRowContext(ctx, q.IdPByIssuer, issuer))
	if err != nil {
		return store.IdP{}, fmt.Errorf("identity provider %s: %w", issuer, err)
	}
	return p, nil
}

// IdPs implements [store.IdPs].
func (s *Store) IdPs(ctx context.Context) ([]store.IdP, error) {
	out, err := queryList(ctx, s.r, sqlshared.ScanIdP, q.IdPs)
	if err != nil {
		return nil, fmt.Errorf("list identity providers: %w", err)
	}
	return out, nil
}

// DeleteIdP implements [store.IdPs].
func (s *Store) DeleteIdP(ctx context.Context, issuer string) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, q.DeleteIdPIdentities, issuer); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, q.DeleteIdP, issuer)
		if err != nil {
			return err
		}
		return mustAffect(res)
	})
	if err != nil {
		return fmt.Errorf("remove identity provider %s: %w", issuer, err)
	}
	return nil
}

// LinkIdentity implements [store.IdPs].
func (s *Store) LinkIdentity(ctx context.Context, issuer, subject string, userID int64) error {
	if _, err := s.execWrite(ctx, q.LinkIdentity, issuer, subject, userID, sqlshared.Millis(now())); err != nil {
		return fmt.Errorf("link %s's subject to user %d: %w", issuer, userID, err)
	}
	return nil
}

// IdentityUser implements [store.IdPs].
func (s *Store) IdentityUser(ctx context.Context, issuer, subject string) (int64, error) {
	var id int64
	err := s.r.QueryRowContext(ctx, q.IdentityUser, issuer, subject).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("the user of %s's subject: %w", issuer, err)
	}
	return id, nil
}

// UseOnce implements [store.UsedOnce].
func (s *Store) UseOnce(ctx context.Context, key string, expires time.Time) (bool, error) {
	n, err := s.execWrite(ctx, q.UseOnce, key, sqlshared.Millis(expires), sqlshared.Millis(time.Now()))
	if err != nil {
		return false, fmt.Errorf("record a value used once: %w", err)
	}
	return n == 1, nil
}

// PruneUsedOnce implements [store.UsedOnce].
func (s *Store) PruneUsedOnce(ctx context.Context, before time.Time) (int64, error) {
	n, err := s.execWrite(ctx, q.PruneUsedOnce, sqlshared.Millis(before))
	if err != nil {
		return 0, fmt.Errorf("prune values used once: %w", err)
	}
	return n, nil
}

// enterpriseSchema is migration step 16 (sqlshared.EnterpriseSchema).
var enterpriseSchema = sqlshared.EnterpriseSchema
