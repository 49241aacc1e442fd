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

// CreateUser implements [store.Store].
func (s *Store) CreateUser(ctx context.Context, u store.User, passwordHash string) (store.User, error) {
	if u.Email == "" || passwordHash == "" {
		return store.User{}, errors.New("create user: empty email or password hash")
	}
	u.CreatedAt = now()
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, q.InsertUser, u.Email, store.EmailKey(u.Email), passwordHash, u.Admin, millis(u.CreatedAt)).Scan(&u.ID)
	})
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
	u, err := sqlshared.ScanUser(s.r.QueryRowContext(ctx, q.UserByEmail, store.EmailKey(email)), &hash)
	if err != nil {
		return store.User{}, "", fmt.Errorf("user %q: %w", email, err)
	}
	return u, hash, nil
}

// UserByID implements [store.Store].
func (s *Store) UserByID(ctx context.Context, id int64) (store.User, error) {
	u, err := sqlshared.ScanUserOnly(s.r.QueryRowContext(ctx, q.UserByID, id))
	if err != nil {
		return store.User{}, fmt.Errorf("user %d: %w", id, err)
	}
	return u, nil
}

// Users implements [store.Store].
func (s *Store) Users(ctx context.Context) ([]store.User, error) {
	out, err := queryList(ctx, s.r, sqlshared.ScanUserOnly, q.Users)
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
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q.SetPassword, passwordHash, userID)
		if err != nil {
			return err
		}
		if err := mustAffect(res); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, q.DeleteUserSessions, userID)
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
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, q.UserExists, sess.UserID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("user %d: %w", sess.UserID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		// Expired sessions go here, so the table does not grow forever.
		if _, err := tx.ExecContext(ctx, q.PruneSessions, millis(sess.CreatedAt)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, q.InsertSession, hash, sess.UserID, millis(sess.CreatedAt), millis(sess.ExpiresAt))
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
	sess, err := sqlshared.ScanSession(s.r.QueryRowContext(ctx, q.SessionByHash, hash, millis(time.Now())))
	if err != nil {
		return store.Session{}, fmt.Errorf("session: %w", err)
	}
	return sess, nil
}

// DeleteSession implements [store.Store].
func (s *Store) DeleteSession(ctx context.Context, hash []byte) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, q.DeleteSession, hash)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// SetUserName implements [store.Store].
func (s *Store) SetUserName(ctx context.Context, userID int64, name string) error {
	err := s.updateOne(ctx, q.SetUserName, store.CleanText(name), userID)
	if err != nil {
		return fmt.Errorf("set name of user %d: %w", userID, err)
	}
	return nil
}

// SetAdmin implements [store.Store].
func (s *Store) SetAdmin(ctx context.Context, userID int64, admin bool) error {
	err := s.updateOne(ctx, q.SetAdmin, admin, userID)
	if err != nil {
		return fmt.Errorf("set admin of user %d: %w", userID, err)
	}
	return nil
}

// DeleteUser implements [store.Store].
func (s *Store) DeleteUser(ctx context.Context, userID int64) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		for _, q := range []string{q.DeleteUserSessions, q.DeleteUserMembers, q.DeleteUserUpstream, q.DeleteUserIdentities} {
			if _, err := tx.ExecContext(ctx, q, userID); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, q.DeleteUser, userID)
		if err != nil {
			return err
		}
		return mustAffect(res)
	})
	if err != nil {
		return fmt.Errorf("delete user %d: %w", userID, err)
	}
	return nil
}

// userNameSchema is migration step 13 (sqlshared.UserNameSchema).
var userNameSchema = sqlshared.UserNameSchema
