package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// CreateUser implements [store.Store].
func (s *Store) CreateUser(ctx context.Context, u store.User, passwordHash string) (store.User, error) {
	if u.Email == "" || passwordHash == "" {
		return store.User{}, errors.New("create user: empty email or password hash")
	}
	u.CreatedAt = now()
	err := s.db.ExecRow(ctx, s.q.InsertUser, u.Email, store.EmailKey(u.Email), passwordHash, u.Admin, millis(u.CreatedAt)).Scan(&u.ID)
	if s.d.IsUnique(err) {
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
	u, err := sqlshared.ScanUser(s.db.QueryRow(ctx, s.q.UserByEmail, store.EmailKey(email)), &hash)
	if err != nil {
		return store.User{}, "", fmt.Errorf("user %q: %w", email, err)
	}
	return u, hash, nil
}

// UserByID implements [store.Store].
func (s *Store) UserByID(ctx context.Context, id int64) (store.User, error) {
	u, err := sqlshared.ScanUserOnly(s.db.QueryRow(ctx, s.q.UserByID, id))
	if err != nil {
		return store.User{}, fmt.Errorf("user %d: %w", id, err)
	}
	return u, nil
}

// Users implements [store.Store].
func (s *Store) Users(ctx context.Context) ([]store.User, error) {
	out, err := list(ctx, s.db, sqlshared.ScanUserOnly, s.q.Users)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}

// SetPassword implements [store.Store]. The person's sessions end.
func (s *Store) SetPassword(ctx context.Context, userID int64, passwordHash string) error {
	if passwordHash == "" {
		return errors.New("set password: empty hash")
	}
	err := s.db.Tx(ctx, func(tx Querier) error {
		if err := mustAffect(tx.Exec(ctx, s.q.SetPassword, passwordHash, userID)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.q.DeleteUserSessions, userID)
		return err
	})
	if err != nil {
		return fmt.Errorf("set password of user %d: %w", userID, err)
	}
	return nil
}

// SetUserName implements [store.Store].
func (s *Store) SetUserName(ctx context.Context, userID int64, name string) error {
	if err := mustAffect(s.db.Exec(ctx, s.q.SetUserName, store.CleanText(name), userID)); err != nil {
		return fmt.Errorf("set name of user %d: %w", userID, err)
	}
	return nil
}

// SetAdmin implements [store.Store].
func (s *Store) SetAdmin(ctx context.Context, userID int64, admin bool) error {
	if err := mustAffect(s.db.Exec(ctx, s.q.SetAdmin, admin, userID)); err != nil {
		return fmt.Errorf("set admin of user %d: %w", userID, err)
	}
	return nil
}

// DeleteUser implements [store.Store]: the person's sessions,
// memberships, upstream accounts and linked identities go with them.
func (s *Store) DeleteUser(ctx context.Context, userID int64) error {
	err := s.db.Tx(ctx, func(tx Querier) error {
		for _, q := range []string{s.q.DeleteUserSessions, s.q.DeleteUserMembers, s.q.DeleteUserUpstream, s.q.DeleteUserIdentities} {
			if _, err := tx.Exec(ctx, q, userID); err != nil {
				return err
			}
		}
		return mustAffect(tx.Exec(ctx, s.q.DeleteUser, userID))
	})
	if err != nil {
		return fmt.Errorf("delete user %d: %w", userID, err)
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
	err := s.db.Tx(ctx, func(tx Querier) error {
		if err := exists(ctx, tx, s.q.UserExists, sess.UserID); err != nil {
			return fmt.Errorf("user %d: %w", sess.UserID, err)
		}
		// Expired sessions go here, so the table does not grow forever.
		if _, err := tx.Exec(ctx, s.q.PruneSessions, millis(sess.CreatedAt)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.q.InsertSession, hash, sess.UserID, millis(sess.CreatedAt), millis(sess.ExpiresAt))
		if s.d.IsUnique(err) {
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
	sess, err := sqlshared.ScanSession(s.db.QueryRow(ctx, s.q.SessionByHash, hash, millis(time.Now())))
	if err != nil {
		return store.Session{}, fmt.Errorf("session: %w", err)
	}
	return sess, nil
}

// DeleteSession implements [store.Store].
func (s *Store) DeleteSession(ctx context.Context, hash []byte) error {
	if _, err := s.db.Exec(ctx, s.q.DeleteSession, hash); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}
