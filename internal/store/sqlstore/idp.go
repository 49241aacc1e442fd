package sqlstore

import (
	"context"
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
	n, err := s.db.Exec(ctx, s.q.InsertIdP, args...)
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
	p, err := sqlshared.ScanIdP(s.db.QueryRow(ctx, s.q.IdPByIssuer, issuer))
	if err != nil {
		return store.IdP{}, fmt.Errorf("identity provider %s: %w", issuer, err)
	}
	return p, nil
}

// IdPs implements [store.IdPs].
func (s *Store) IdPs(ctx context.Context) ([]store.IdP, error) {
	out, err := list(ctx, s.db, scanIdP, s.q.IdPs)
	if err != nil {
		return nil, fmt.Errorf("list identity providers: %w", err)
	}
	return out, nil
}

func scanIdP(row Row) (store.IdP, error) { return sqlshared.ScanIdP(row) }

// DeleteIdP implements [store.IdPs]. The identities linked through it go.
func (s *Store) DeleteIdP(ctx context.Context, issuer string) error {
	err := s.db.Tx(ctx, func(tx Querier) error {
		if _, err := tx.Exec(ctx, s.q.DeleteIdPIdentities, issuer); err != nil {
			return err
		}
		return mustAffect(tx.Exec(ctx, s.q.DeleteIdP, issuer))
	})
	if err != nil {
		return fmt.Errorf("remove identity provider %s: %w", issuer, err)
	}
	return nil
}

// LinkIdentity implements [store.IdPs].
func (s *Store) LinkIdentity(ctx context.Context, issuer, subject string, userID int64) error {
	if _, err := s.db.Exec(ctx, s.q.LinkIdentity, issuer, subject, userID, millis(now())); err != nil {
		return fmt.Errorf("link %s's subject to user %d: %w", issuer, userID, err)
	}
	return nil
}

// IdentityUser implements [store.IdPs].
func (s *Store) IdentityUser(ctx context.Context, issuer, subject string) (int64, error) {
	var id int64
	if err := notFound(s.db.QueryRow(ctx, s.q.IdentityUser, issuer, subject).Scan(&id)); err != nil {
		return 0, fmt.Errorf("the user of %s's subject: %w", issuer, err)
	}
	return id, nil
}

// UseOnce implements [store.UsedOnce]. Of two gateways inserting one key
// at once, one inserts and the other finds the live row.
func (s *Store) UseOnce(ctx context.Context, key string, expires time.Time) (bool, error) {
	n, err := s.db.Exec(ctx, s.q.UseOnce, key, millis(expires), millis(time.Now()))
	if err != nil {
		return false, fmt.Errorf("record a value used once: %w", err)
	}
	return n == 1, nil
}

// PruneUsedOnce implements [store.UsedOnce].
func (s *Store) PruneUsedOnce(ctx context.Context, before time.Time) (int64, error) {
	n, err := s.db.Exec(ctx, s.q.PruneUsedOnce, millis(before))
	if err != nil {
		return 0, fmt.Errorf("prune values used once: %w", err)
	}
	return n, nil
}
