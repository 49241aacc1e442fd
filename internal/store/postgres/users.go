package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// CreateUser implements [store.Store].
func (s *Store) CreateUser(ctx context.Context, u store.User, passwordHash string) (store.User, error) {
	if u.Email == "" || passwordHash == "" {
		return store.User{}, errors.New("create user: empty email or password hash")
	}
	u.CreatedAt = now()
	err := s.pool.QueryRow(ctx, q.InsertUser, u.Email, store.EmailKey(u.Email), passwordHash, u.Admin, millis(u.CreatedAt)).Scan(&u.ID)
	if isUnique(err) {
		return store.User{}, fmt.Errorf("create user %q: %w", u.Email, store.ErrExists)
	}
	if err != nil {
		return store.User{}, fmt.Errorf("create user %q: %w", u.Email, err)
	}
	return u, nil
}

// UserByEmail implements [store.Store].
func (s *Store) UserByEmail(ctx context.Context, email string) (store.User, string, error) {
	var hash string
	u, err := sqlshared.ScanUser(s.pool.QueryRow(ctx, q.UserByEmail, store.EmailKey(email)), &hash)
	if err != nil {
		return store.User{}, "", fmt.Errorf("user %q: %w", email, err)
	}
	return u, hash, nil
}

// UserByID implements [store.Store].
func (s *Store) UserByID(ctx context.Context, id int64) (store.User, error) {
	u, err := sqlshared.ScanUserOnly(s.pool.QueryRow(ctx, q.UserByID, id))
	if err != nil {
		return store.User{}, fmt.Errorf("user %d: %w", id, err)
	}
	return u, nil
}

// Users implements [store.Store].
func (s *Store) Users(ctx context.Context) ([]store.User, error) {
	out, err := list(ctx, s, sqlshared.ScanUserOnly, q.Users)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}

// SetPassword implements [store.Store].
func (s *Store) SetPassword(ctx context.Context, userID int64, passwordHash string) error {
	if passwordHash == "" {
		return errors.New("set password: empty hash")
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := mustAffect(tx.Exec(ctx, q.SetPassword, passwordHash, userID)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, q.DeleteUserSessions, userID)
		return err
	})
	if err != nil {
		return fmt.Errorf("set password of user %d: %w", userID, err)
	}
	return nil
}

// CreateSession implements [store.Store].
func (s *Store) CreateSession(ctx context.Context, sess store.Session, hash []byte) (store.Session, error) {
	if err := store.CheckHash(hash); err != nil {
		return store.Session{}, fmt.Errorf("create session: %w", err)
	}
	if sess.ExpiresAt.IsZero() {
		return store.Session{}, errors.New("create session: no expiry")
	}
	sess.CreatedAt = now()
	sess.ExpiresAt = fromMillis(millis(sess.ExpiresAt))
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var one int
		if err := tx.QueryRow(ctx, q.UserExists, sess.UserID).Scan(&one); err != nil {
			return fmt.Errorf("user %d: %w", sess.UserID, notFound(err))
		}
		// Expired sessions go here, so the table does not grow forever.
		if _, err := tx.Exec(ctx, q.PruneSessions, millis(sess.CreatedAt)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, q.InsertSession, hash, sess.UserID, millis(sess.CreatedAt), millis(sess.ExpiresAt))
		if isUnique(err) {
			return store.ErrExists
		}
		return err
	})
	if err != nil {
		return store.Session{}, fmt.Errorf("create session: %w", err)
	}
	return sess, nil
}

// SessionByHash implements [store.Store].
func (s *Store) SessionByHash(ctx context.Context, hash []byte) (store.Session, error) {
	sess, err := sqlshared.ScanSession(s.pool.QueryRow(ctx, q.SessionByHash, hash, millis(time.Now())))
	if err != nil {
		return store.Session{}, fmt.Errorf("session: %w", err)
	}
	return sess, nil
}

// DeleteSession implements [store.Store].
func (s *Store) DeleteSession(ctx context.Context, hash []byte) error {
	if _, err := s.pool.Exec(ctx, q.DeleteSession, hash); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

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
	_, err := s.pool.Exec(ctx, q.InsertInvite, inv.ID, hash, inv.Email, inv.Admin, inv.ProjectID, string(inv.Role), inv.CreatedBy, millis(inv.CreatedAt), millis(inv.ExpiresAt))
	if isUnique(err) {
		err = store.ErrExists
	}
	if err != nil {
		return store.Invite{}, fmt.Errorf("create invite %q: %w", inv.ID, err)
	}
	return inv, nil
}

// InviteByHash implements [store.Store].
func (s *Store) InviteByHash(ctx context.Context, hash []byte) (store.Invite, error) {
	inv, err := sqlshared.ScanInvite(s.pool.QueryRow(ctx, q.LiveInviteByHash, hash, millis(time.Now())))
	if err != nil {
		return store.Invite{}, fmt.Errorf("invite: %w", err)
	}
	return inv, nil
}

// useInvite marks a live invite used and returns it, in one statement.
const useInvite = `UPDATE invites SET used_at = $1
WHERE hash = $2 AND used_at IS NULL AND expires_at > $1
RETURNING ` + sqlshared.InviteColumns

// UseInvite implements [store.Store]. The check and the mark are one
// statement: of two sign-ups with one link on any replicas, the second
// finds the row used once the first commits.
func (s *Store) UseInvite(ctx context.Context, hash []byte) (store.Invite, error) {
	t := millis(now())
	inv, err := sqlshared.ScanInvite(s.pool.QueryRow(ctx, useInvite, t, hash))
	if err != nil {
		return store.Invite{}, fmt.Errorf("use invite: %w", err)
	}
	return inv, nil
}

// Invites implements [store.Store].
func (s *Store) Invites(ctx context.Context) ([]store.Invite, error) {
	out, err := list(ctx, s, sqlshared.ScanInvite, q.Invites, millis(time.Now()))
	if err != nil {
		return nil, fmt.Errorf("list invites: %w", err)
	}
	return out, nil
}

// RevokeInvite implements [store.Store]: the invite expires now.
func (s *Store) RevokeInvite(ctx context.Context, id string) error {
	t := millis(now())
	if err := mustAffect(s.pool.Exec(ctx, q.RevokeInvite, t, id, t)); err != nil {
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
	_, err := s.pool.Exec(ctx, q.InsertAPIToken, tok.ID, hash, tok.Name, tok.ProjectID, string(tok.Role), tok.CreatedBy, millis(tok.CreatedAt))
	if isUnique(err) {
		err = store.ErrExists
	}
	if err != nil {
		return store.APIToken{}, fmt.Errorf("create API token %q: %w", tok.ID, err)
	}
	return tok, nil
}

// APITokenByHash implements [store.Store].
func (s *Store) APITokenByHash(ctx context.Context, hash []byte) (store.APIToken, error) {
	tok, err := sqlshared.ScanAPIToken(s.pool.QueryRow(ctx, q.APITokenByHash, hash))
	if err != nil {
		return store.APIToken{}, fmt.Errorf("API token: %w", err)
	}
	return tok, nil
}

// APITokens implements [store.Store].
func (s *Store) APITokens(ctx context.Context) ([]store.APIToken, error) {
	out, err := list(ctx, s, sqlshared.ScanAPIToken, q.APITokens)
	if err != nil {
		return nil, fmt.Errorf("list API tokens: %w", err)
	}
	return out, nil
}

// RevokeAPIToken implements [store.Store]. A second revocation keeps the
// time of the first.
func (s *Store) RevokeAPIToken(ctx context.Context, id string) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE api_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL`, millis(now()), id)
		if err != nil || tag.RowsAffected() > 0 {
			return err
		}
		var one int
		return notFound(tx.QueryRow(ctx, `SELECT 1 FROM api_tokens WHERE id = $1`, id).Scan(&one))
	})
	if err != nil {
		return fmt.Errorf("revoke API token %q: %w", id, err)
	}
	return nil
}

// SetUserName implements [store.Store].
func (s *Store) SetUserName(ctx context.Context, userID int64, name string) error {
	if err := mustAffect(s.pool.Exec(ctx, q.SetUserName, store.CleanText(name), userID)); err != nil {
		return fmt.Errorf("set name of user %d: %w", userID, err)
	}
	return nil
}

// SetAdmin implements [store.Store].
func (s *Store) SetAdmin(ctx context.Context, userID int64, admin bool) error {
	if err := mustAffect(s.pool.Exec(ctx, q.SetAdmin, admin, userID)); err != nil {
		return fmt.Errorf("set admin of user %d: %w", userID, err)
	}
	return nil
}

// DeleteUser implements [store.Store].
func (s *Store) DeleteUser(ctx context.Context, userID int64) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		for _, q := range []string{q.DeleteUserSessions, q.DeleteUserMembers, q.DeleteUserUpstream, q.DeleteUserIdentities} {
			if _, err := tx.Exec(ctx, q, userID); err != nil {
				return err
			}
		}
		return mustAffect(tx.Exec(ctx, q.DeleteUser, userID))
	})
	if err != nil {
		return fmt.Errorf("delete user %d: %w", userID, err)
	}
	return nil
}

// userNameSchema is migration step 13 (sqlshared.UserNameSchema).
var userNameSchema = sqlshared.UserNameSchema
