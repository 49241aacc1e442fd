package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// CreateOAuthClient implements [store.Store].
func (s *Store) CreateOAuthClient(ctx context.Context, c store.OAuthClient) error {
	if c.ID == "" {
		return errors.New("create OAuth client: empty id")
	}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO oauth_clients (id, metadata, secret_hash, created_at) VALUES (?, ?, ?, ?)`,
			c.ID, string(c.Metadata), c.SecretHash, millis(now()))
		if isUnique(err) {
			return store.ErrExists
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create OAuth client %q: %w", c.ID, err)
	}
	return nil
}

// OAuthClient implements [store.Store].
func (s *Store) OAuthClient(ctx context.Context, id string) (store.OAuthClient, error) {
	var (
		c       store.OAuthClient
		meta    string
		created int64
	)
	err := s.r.QueryRowContext(ctx, `SELECT id, metadata, secret_hash, created_at FROM oauth_clients WHERE id = ?`, id).
		Scan(&c.ID, &meta, &c.SecretHash, &created)
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.OAuthClient{}, fmt.Errorf("OAuth client %q: %w", id, err)
	}
	c.Metadata, c.CreatedAt = []byte(meta), fromMillis(created)
	return c, nil
}

const selectGrant = `SELECT g.id, g.project_id, p.name, g.user_id, COALESCE(u.email, ''), COALESCE(u.name, ''), g.client_id, g.client_name,
	g.scope, g.resource, g.created_at, g.last_used_at, g.revoked_at
FROM oauth_grants g JOIN projects p ON p.id = g.project_id LEFT JOIN users u ON u.id = g.user_id`

func scanGrant(sc scanner) (store.OAuthGrant, error) {
	var (
		g                      store.OAuthGrant
		created, used, revoked int64
	)
	err := sc.Scan(&g.ID, &g.ProjectID, &g.ProjectName, &g.UserID, &g.UserEmail, &g.UserName, &g.ClientID, &g.ClientName,
		&g.Scope, &g.Resource, &created, &used, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return store.OAuthGrant{}, store.ErrNotFound
	}
	if err != nil {
		return store.OAuthGrant{}, err
	}
	g.CreatedAt, g.LastUsedAt, g.RevokedAt = fromMillis(created), store.OptTime(used), store.OptTime(revoked)
	return g, nil
}

// CreateOAuthGrant implements [store.Store].
func (s *Store) CreateOAuthGrant(ctx context.Context, g store.OAuthGrant) (store.OAuthGrant, error) {
	if g.ID == "" {
		return store.OAuthGrant{}, errors.New("create OAuth grant: empty id")
	}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO oauth_grants (id, project_id, user_id, client_id, client_name, scope, resource, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, g.ID, g.ProjectID, g.UserID, g.ClientID, g.ClientName, g.Scope, g.Resource, millis(now()))
		if isUnique(err) {
			return store.ErrExists
		}
		return err
	})
	if err != nil {
		return store.OAuthGrant{}, fmt.Errorf("create OAuth grant %q: %w", g.ID, err)
	}
	return s.OAuthGrant(ctx, g.ID)
}

// OAuthGrant implements [store.Store].
func (s *Store) OAuthGrant(ctx context.Context, id string) (store.OAuthGrant, error) {
	g, err := scanGrant(s.r.QueryRowContext(ctx, selectGrant+` WHERE g.id = ?`, id))
	if err != nil {
		return store.OAuthGrant{}, fmt.Errorf("OAuth grant %q: %w", id, err)
	}
	return g, nil
}

// OAuthGrants implements [store.Store].
func (s *Store) OAuthGrants(ctx context.Context, projectID int64) ([]store.OAuthGrant, error) {
	rows, err := s.r.QueryContext(ctx, selectGrant+` WHERE g.project_id = ? AND g.revoked_at = 0 ORDER BY g.created_at DESC, g.id`, projectID)
	if err != nil {
		return nil, fmt.Errorf("OAuth grants: %w", err)
	}
	defer rows.Close()
	var out []store.OAuthGrant
	for rows.Next() {
		g, err := scanGrant(rows)
		if err != nil {
			return nil, fmt.Errorf("OAuth grants: %w", err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// RevokeOAuthGrant implements [store.Store].
func (s *Store) RevokeOAuthGrant(ctx context.Context, id string) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE oauth_grants SET revoked_at = CASE WHEN revoked_at = 0 THEN ? ELSE revoked_at END WHERE id = ?`,
			millis(now()), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return store.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("revoke OAuth grant %q: %w", id, err)
	}
	return nil
}

// TouchOAuthGrant implements [store.Store].
func (s *Store) TouchOAuthGrant(ctx context.Context, id string, t time.Time) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE oauth_grants SET last_used_at = ? WHERE id = ? AND last_used_at < ?`, millis(t), id, millis(t))
		return err
	})
	if err != nil {
		return fmt.Errorf("touch OAuth grant %q: %w", id, err)
	}
	return nil
}

// CreateOAuthToken implements [store.Store].
func (s *Store) CreateOAuthToken(ctx context.Context, tok store.OAuthToken, hash []byte) error {
	if err := store.CheckHash(hash); err != nil {
		return fmt.Errorf("create OAuth token: %w", err)
	}
	if tok.ExpiresAt.IsZero() {
		return errors.New("create OAuth token: no expiry")
	}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO oauth_tokens (hash, kind, grant_id, data, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
			hash, tok.Kind, tok.GrantID, string(tok.Data), millis(now()), millis(tok.ExpiresAt))
		if isUnique(err) {
			return store.ErrExists
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create OAuth %s: %w", tok.Kind, err)
	}
	return nil
}

const selectOAuthToken = `SELECT kind, grant_id, data, created_at, expires_at, used_at FROM oauth_tokens WHERE hash = ?`

func scanOAuthToken(sc scanner) (store.OAuthToken, error) {
	var (
		tok                    store.OAuthToken
		data                   string
		created, expires, used int64
	)
	err := sc.Scan(&tok.Kind, &tok.GrantID, &data, &created, &expires, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return store.OAuthToken{}, store.ErrNotFound
	}
	if err != nil {
		return store.OAuthToken{}, err
	}
	if data != "" {
		tok.Data = []byte(data)
	}
	tok.CreatedAt, tok.ExpiresAt, tok.UsedAt = fromMillis(created), fromMillis(expires), store.OptTime(used)
	return tok, nil
}

// OAuthToken implements [store.Store].
func (s *Store) OAuthToken(ctx context.Context, hash []byte) (store.OAuthToken, error) {
	tok, err := scanOAuthToken(s.r.QueryRowContext(ctx, selectOAuthToken, hash))
	if err != nil {
		return store.OAuthToken{}, fmt.Errorf("OAuth token: %w", err)
	}
	return tok, nil
}

// UseOAuthToken implements [store.Store]. The read and the mark happen in
// one write transaction, so two uses of one secret cannot both succeed.
func (s *Store) UseOAuthToken(ctx context.Context, hash []byte) (store.OAuthToken, error) {
	var tok store.OAuthToken
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		if tok, err = scanOAuthToken(tx.QueryRowContext(ctx, selectOAuthToken, hash)); err != nil {
			return err
		}
		if !tok.UsedAt.IsZero() {
			return nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE oauth_tokens SET used_at = ? WHERE hash = ?`, millis(now()), hash)
		return err
	})
	if err != nil {
		return store.OAuthToken{}, fmt.Errorf("use OAuth token: %w", err)
	}
	if !tok.UsedAt.IsZero() {
		return tok, store.ErrUsed
	}
	return tok, nil
}

// PruneOAuthTokens implements [store.Store].
func (s *Store) PruneOAuthTokens(ctx context.Context, before time.Time) (int64, error) {
	n, err := s.deleteRows(ctx, `DELETE FROM oauth_tokens WHERE expires_at < ?`, millis(before))
	if err != nil {
		return 0, fmt.Errorf("prune OAuth tokens: %w", err)
	}
	return n, nil
}

// deleteRows runs a DELETE (or an UPDATE) in a write transaction and says
// how many rows it touched.
func (s *Store) deleteRows(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// CountOAuthClients implements [store.Store].
func (s *Store) CountOAuthClients(ctx context.Context) (int64, error) {
	var n int64
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM oauth_clients`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count OAuth clients: %w", err)
	}
	return n, nil
}

// PruneOAuthClients implements [store.Store].
func (s *Store) PruneOAuthClients(ctx context.Context, unused, idle time.Time) (int64, error) {
	n, err := s.deleteRows(ctx, `DELETE FROM oauth_clients WHERE created_at < ? AND id NOT IN (
	SELECT g.client_id FROM oauth_grants g
	WHERE (g.revoked_at = 0 AND g.id IN (SELECT grant_id FROM oauth_tokens))
		OR g.created_at >= ? OR g.last_used_at >= ? OR g.revoked_at >= ?)`,
		millis(unused), millis(idle), millis(idle), millis(idle))
	if err != nil {
		return 0, fmt.Errorf("prune OAuth clients: %w", err)
	}
	return n, nil
}
