package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

const selectUser = `SELECT id, email, admin, created_at, password_hash FROM users`

// CreateUser implements [store.Store].
func (s *Store) CreateUser(ctx context.Context, u store.User, passwordHash string) (store.User, error) {
	if u.Email == "" || passwordHash == "" {
		return store.User{}, errors.New("create user: empty email or password hash")
	}
	u.CreatedAt = now()
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO users (email, email_key, password_hash, admin, created_at)
VALUES (?, ?, ?, ?, ?) RETURNING id`, u.Email, store.EmailKey(u.Email), passwordHash, u.Admin, millis(u.CreatedAt)).Scan(&u.ID)
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
	u, hash, err := scanUser(s.r.QueryRowContext(ctx, selectUser+` WHERE email_key = ?`, store.EmailKey(email)))
	if err != nil {
		return store.User{}, "", fmt.Errorf("user %q: %w", email, err)
	}
	return u, hash, nil
}

// UserByID implements [store.Store].
func (s *Store) UserByID(ctx context.Context, id int64) (store.User, error) {
	u, _, err := scanUser(s.r.QueryRowContext(ctx, selectUser+` WHERE id = ?`, id))
	if err != nil {
		return store.User{}, fmt.Errorf("user %d: %w", id, err)
	}
	return u, nil
}

// Users implements [store.Store].
func (s *Store) Users(ctx context.Context) ([]store.User, error) {
	rows, err := s.r.QueryContext(ctx, selectUser+` ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	var out []store.User
	for rows.Next() {
		u, _, err := scanUser(rows)
		if err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
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
		res, err := tx.ExecContext(ctx, `UPDATE users SET password_hash = ? WHERE id = ?`, passwordHash, userID)
		if err != nil {
			return err
		}
		if err := mustAffect(res); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, userID)
		return err
	})
	if err != nil {
		return fmt.Errorf("set password of user %d: %w", userID, err)
	}
	return nil
}

func scanUser(sc scanner) (store.User, string, error) {
	var (
		u       store.User
		created int64
		hash    string
	)
	err := sc.Scan(&u.ID, &u.Email, &u.Admin, &created, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return store.User{}, "", store.ErrNotFound
	}
	if err != nil {
		return store.User{}, "", err
	}
	u.CreatedAt = fromMillis(created)
	return u, hash, nil
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
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM users WHERE id = ?`, sess.UserID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("user %d: %w", sess.UserID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		// Expired sessions go here, so the table does not grow forever.
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, millis(sess.CreatedAt)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO sessions (hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)`,
			hash, sess.UserID, millis(sess.CreatedAt), millis(sess.ExpiresAt))
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
	var (
		sess             store.Session
		created, expires int64
	)
	err := s.r.QueryRowContext(ctx, `SELECT user_id, created_at, expires_at FROM sessions WHERE hash = ? AND expires_at > ?`,
		hash, millis(time.Now())).Scan(&sess.UserID, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Session{}, fmt.Errorf("session: %w", err)
	}
	sess.CreatedAt, sess.ExpiresAt = fromMillis(created), fromMillis(expires)
	return sess, nil
}

// DeleteSession implements [store.Store].
func (s *Store) DeleteSession(ctx context.Context, hash []byte) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE hash = ?`, hash)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// SetAdmin implements [store.Store].
func (s *Store) SetAdmin(ctx context.Context, userID int64, admin bool) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE users SET admin = ? WHERE id = ?`, admin, userID)
		if err != nil {
			return err
		}
		return mustAffect(res)
	})
	if err != nil {
		return fmt.Errorf("set admin of user %d: %w", userID, err)
	}
	return nil
}

// DeleteUser implements [store.Store].
func (s *Store) DeleteUser(ctx context.Context, userID int64) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		for _, q := range []string{`DELETE FROM sessions WHERE user_id = ?`, `DELETE FROM members WHERE user_id = ?`} {
			if _, err := tx.ExecContext(ctx, q, userID); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM users WHERE id = ?`, userID)
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
