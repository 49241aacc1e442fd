package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

const selectInvite = `SELECT id, email, admin, project_id, role, created_by, created_at, expires_at, used_at FROM invites`

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
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO invites (id, hash, email, admin, project_id, role, created_by, created_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, inv.ID, hash, inv.Email, inv.Admin, inv.ProjectID, string(inv.Role), inv.CreatedBy, millis(inv.CreatedAt), millis(inv.ExpiresAt))
		if isUnique(err) {
			return store.ErrExists
		}
		return err
	})
	if err != nil {
		return store.Invite{}, fmt.Errorf("create invite %q: %w", inv.ID, err)
	}
	return inv, nil
}

// InviteByHash implements [store.Store].
func (s *Store) InviteByHash(ctx context.Context, hash []byte) (store.Invite, error) {
	inv, err := scanInvite(s.r.QueryRowContext(ctx, selectInvite+` WHERE hash = ? AND used_at IS NULL AND expires_at > ?`,
		hash, millis(time.Now())))
	if err != nil {
		return store.Invite{}, fmt.Errorf("invite: %w", err)
	}
	return inv, nil
}

// UseInvite implements [store.Store]. The check and the mark happen in one
// transaction, so two sign-ups with one link cannot both succeed.
func (s *Store) UseInvite(ctx context.Context, hash []byte) (store.Invite, error) {
	var inv store.Invite
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		t := now()
		var err error
		inv, err = scanInvite(tx.QueryRowContext(ctx, selectInvite+` WHERE hash = ? AND used_at IS NULL AND expires_at > ?`,
			hash, millis(t)))
		if err != nil {
			return err
		}
		inv.UsedAt = t
		_, err = tx.ExecContext(ctx, `UPDATE invites SET used_at = ? WHERE hash = ?`, millis(t), hash)
		return err
	})
	if err != nil {
		return store.Invite{}, fmt.Errorf("use invite: %w", err)
	}
	return inv, nil
}

// Invites implements [store.Store].
func (s *Store) Invites(ctx context.Context) ([]store.Invite, error) {
	out, err := queryList(ctx, s.r, scanInvite, selectInvite+` WHERE used_at IS NULL AND expires_at > ? ORDER BY seq`, millis(time.Now()))
	if err != nil {
		return nil, fmt.Errorf("list invites: %w", err)
	}
	return out, nil
}

// RevokeInvite implements [store.Store]: the invite expires now.
func (s *Store) RevokeInvite(ctx context.Context, id string) error {
	t := millis(now())
	n, err := s.deleteRows(ctx, `UPDATE invites SET expires_at = ? WHERE id = ? AND used_at IS NULL AND expires_at > ?`, t, id, t)
	if err == nil && n == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("revoke invite %q: %w", id, err)
	}
	return nil
}

func scanInvite(sc scanner) (store.Invite, error) {
	var (
		inv              store.Invite
		created, expires int64
		used             sql.NullInt64
	)
	err := sc.Scan(&inv.ID, &inv.Email, &inv.Admin, &inv.ProjectID, (*string)(&inv.Role), &inv.CreatedBy, &created, &expires, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Invite{}, store.ErrNotFound
	}
	if err != nil {
		return store.Invite{}, err
	}
	inv.CreatedAt, inv.ExpiresAt = fromMillis(created), fromMillis(expires)
	if used.Valid {
		inv.UsedAt = fromMillis(used.Int64)
	}
	return inv, nil
}

const selectToken = `SELECT id, name, project_id, role, created_by, created_at, revoked_at FROM api_tokens`

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
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO api_tokens (id, hash, name, project_id, role, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			tok.ID, hash, tok.Name, tok.ProjectID, string(tok.Role), tok.CreatedBy, millis(tok.CreatedAt))
		if isUnique(err) {
			return store.ErrExists
		}
		return err
	})
	if err != nil {
		return store.APIToken{}, fmt.Errorf("create API token %q: %w", tok.ID, err)
	}
	return tok, nil
}

// APITokenByHash implements [store.Store].
func (s *Store) APITokenByHash(ctx context.Context, hash []byte) (store.APIToken, error) {
	tok, err := scanToken(s.r.QueryRowContext(ctx, selectToken+` WHERE hash = ?`, hash))
	if err != nil {
		return store.APIToken{}, fmt.Errorf("API token: %w", err)
	}
	return tok, nil
}

// APITokens implements [store.Store].
func (s *Store) APITokens(ctx context.Context) ([]store.APIToken, error) {
	out, err := queryList(ctx, s.r, scanToken, selectToken+` ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("list API tokens: %w", err)
	}
	return out, nil
}

// RevokeAPIToken implements [store.Store]. A second revocation keeps the
// time of the first.
func (s *Store) RevokeAPIToken(ctx context.Context, id string) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var revoked sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT revoked_at FROM api_tokens WHERE id = ?`, id).Scan(&revoked)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil || revoked.Valid {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE api_tokens SET revoked_at = ? WHERE id = ?`, millis(now()), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("revoke API token %q: %w", id, err)
	}
	return nil
}

func scanToken(sc scanner) (store.APIToken, error) {
	var (
		tok     store.APIToken
		created int64
		revoked sql.NullInt64
	)
	err := sc.Scan(&tok.ID, &tok.Name, &tok.ProjectID, (*string)(&tok.Role), &tok.CreatedBy, &created, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return store.APIToken{}, store.ErrNotFound
	}
	if err != nil {
		return store.APIToken{}, err
	}
	tok.CreatedAt = fromMillis(created)
	if revoked.Valid {
		tok.RevokedAt = fromMillis(revoked.Int64)
	}
	return tok, nil
}
