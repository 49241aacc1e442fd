package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// CreateInvite implements [store.Store].
func (s *Store) CreateInvite(ctx context.Context, inv store.Invite, hash []byte) (store.Invite, error) {
	if err := store.CheckHash(hash); err != nil {
		return store.Invite{}, fmt.Errorf("create invite: %w", err)
	}
	if inv.ID == "" || inv.ExpiresAt.IsZero() {
		return store.Invite{}, errors.New("create invite: empty id or no expiry")
	}
	inv.CreatedAt = now()
	inv.ExpiresAt = fromMillis(millis(inv.ExpiresAt))
	inv.UsedAt = time.Time{}
	_, err := s.db.Exec(ctx, s.q.InsertInvite, inv.ID, hash, inv.Email, inv.Admin, inv.ProjectID, string(inv.Role), inv.CreatedBy, millis(inv.CreatedAt), millis(inv.ExpiresAt))
	if s.d.IsUnique(err) {
		err = store.ErrExists
	}
	if err != nil {
		return store.Invite{}, fmt.Errorf("create invite %q: %w", inv.ID, err)
	}
	return inv, nil
}

// InviteByHash implements [store.Store].
func (s *Store) InviteByHash(ctx context.Context, hash []byte) (store.Invite, error) {
	inv, err := sqlshared.ScanInvite(s.db.QueryRow(ctx, s.q.LiveInviteByHash, hash, millis(time.Now())))
	if err != nil {
		return store.Invite{}, fmt.Errorf("invite: %w", err)
	}
	return inv, nil
}

// UseInvite implements [store.Store]. The check and the mark are one
// statement, so two sign-ups with one link cannot both succeed.
func (s *Store) UseInvite(ctx context.Context, hash []byte) (store.Invite, error) {
	t := millis(now())
	inv, err := sqlshared.ScanInvite(s.db.ExecRow(ctx, s.q.UseInvite, t, hash, t))
	if err != nil {
		return store.Invite{}, fmt.Errorf("use invite: %w", err)
	}
	return inv, nil
}

// Invites implements [store.Store].
func (s *Store) Invites(ctx context.Context) ([]store.Invite, error) {
	out, err := list(ctx, s.db, sqlshared.ScanInvite, s.q.Invites, millis(time.Now()))
	if err != nil {
		return nil, fmt.Errorf("list invites: %w", err)
	}
	return out, nil
}

// RevokeInvite implements [store.Store]: the invite expires now.
func (s *Store) RevokeInvite(ctx context.Context, id string) error {
	t := millis(now())
	if err := mustAffect(s.db.Exec(ctx, s.q.RevokeInvite, t, id, t)); err != nil {
		return fmt.Errorf("revoke invite %q: %w", id, err)
	}
	return nil
}

// CreateAPIToken implements [store.Store].
func (s *Store) CreateAPIToken(ctx context.Context, tok store.APIToken, hash []byte) (store.APIToken, error) {
	if err := store.CheckHash(hash); err != nil {
		return store.APIToken{}, fmt.Errorf("create API token: %w", err)
	}
	if tok.ID == "" {
		return store.APIToken{}, errors.New("create API token: empty id")
	}
	tok.CreatedAt = now()
	tok.RevokedAt = time.Time{}
	_, err := s.db.Exec(ctx, s.q.InsertAPIToken, tok.ID, hash, tok.Name, tok.ProjectID, string(tok.Role), tok.CreatedBy, millis(tok.CreatedAt))
	if s.d.IsUnique(err) {
		err = store.ErrExists
	}
	if err != nil {
		return store.APIToken{}, fmt.Errorf("create API token %q: %w", tok.ID, err)
	}
	return tok, nil
}

// APITokenByHash implements [store.Store].
func (s *Store) APITokenByHash(ctx context.Context, hash []byte) (store.APIToken, error) {
	tok, err := sqlshared.ScanAPIToken(s.db.QueryRow(ctx, s.q.APITokenByHash, hash))
	if err != nil {
		return store.APIToken{}, fmt.Errorf("API token: %w", err)
	}
	return tok, nil
}

// APITokens implements [store.Store].
func (s *Store) APITokens(ctx context.Context) ([]store.APIToken, error) {
	out, err := list(ctx, s.db, sqlshared.ScanAPIToken, s.q.APITokens)
	if err != nil {
		return nil, fmt.Errorf("list API tokens: %w", err)
	}
	return out, nil
}

// RevokeAPIToken implements [store.Store]. A second revocation keeps the
// time of the first.
func (s *Store) RevokeAPIToken(ctx context.Context, id string) error {
	err := s.db.Tx(ctx, func(tx Querier) error {
		n, err := tx.Exec(ctx, s.q.RevokeAPIToken, millis(now()), id)
		if err != nil || n > 0 {
			return err
		}
		return exists(ctx, tx, s.q.APITokenExists, id)
	})
	if err != nil {
		return fmt.Errorf("revoke API token %q: %w", id, err)
	}
	return nil
}
