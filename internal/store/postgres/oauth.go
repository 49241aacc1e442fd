package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spacefix/spacefix/internal/store"
)

// CreateOAuthClient implements [store.Store].
func (s *Store) CreateOAuthClient(ctx context.Context, c store.OAuthClient) error {
	if c.ID == "" {
		return errors.New("create OAuth client: empty id")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO oauth_clients (id, metadata, secret_hash, created_at) VALUES ($1, $2, $3, $4)`,
		c.ID, string(c.Metadata), c.SecretHash, millis(now()))
	if isUnique(err) {
		err = store.ErrExists
	}
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
	err := notFound(s.pool.QueryRow(ctx, `SELECT id, metadata, secret_hash, created_at FROM oauth_clients WHERE id = $1`, id).
		Scan(&c.ID, &meta, &c.SecretHash, &created))
	if err != nil {
		return store.OAuthClient{}, fmt.Errorf("OAuth client %q: %w", id, err)
	}
	c.Metadata, c.CreatedAt = []byte(meta), fromMillis(created)
	return c, nil
}

const selectGrant = `SELECT g.id, g.project_id, p.name, g.user_id, COALESCE(u.email, ''), COALESCE(u.name, ''), g.client_id, g.client_name,
	g.scope, g.resource, g.created_at, g.last_used_at, g.revoked_at
FROM oauth_grants g JOIN projects p ON p.id = g.project_id LEFT JOIN users u ON u.id = g.user_id`

func scanGrant(row pgx.Row) (store.OAuthGrant, error) {
	var (
		g                      store.OAuthGrant
		created, used, revoked int64
	)
	err := row.Scan(&g.ID, &g.ProjectID, &g.ProjectName, &g.UserID, &g.UserEmail, &g.UserName, &g.ClientID, &g.ClientName,
		&g.Scope, &g.Resource, &created, &used, &revoked)
	if err != nil {
		return store.OAuthGrant{}, notFound(err)
	}
	g.CreatedAt, g.LastUsedAt, g.RevokedAt = fromMillis(created), store.OptTime(used), store.OptTime(revoked)
	return g, nil
}

// CreateOAuthGrant implements [store.Store].
func (s *Store) CreateOAuthGrant(ctx context.Context, g store.OAuthGrant) (store.OAuthGrant, error) {
	if g.ID == "" {
		return store.OAuthGrant{}, errors.New("create OAuth grant: empty id")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO oauth_grants (id, project_id, user_id, client_id, client_name, scope, resource, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, g.ID, g.ProjectID, g.UserID, g.ClientID, g.ClientName, g.Scope, g.Resource, millis(now()))
	if isUnique(err) {
		err = store.ErrExists
	}
	if err != nil {
		return store.OAuthGrant{}, fmt.Errorf("create OAuth grant %q: %w", g.ID, err)
	}
	return s.OAuthGrant(ctx, g.ID)
}

// OAuthGrant implements [store.Store].
func (s *Store) OAuthGrant(ctx context.Context, id string) (store.OAuthGrant, error) {
	g, err := scanGrant(s.pool.QueryRow(ctx, selectGrant+` WHERE g.id = $1`, id))
	if err != nil {
		return store.OAuthGrant{}, fmt.Errorf("OAuth grant %q: %w", id, err)
	}
	return g, nil
}

// OAuthGrants implements [store.Store].
func (s *Store) OAuthGrants(ctx context.Context, projectID int64) ([]store.OAuthGrant, error) {
	out, err := list(ctx, s, scanGrant, selectGrant+` WHERE g.project_id = $1 AND g.revoked_at = 0 ORDER BY g.created_at DESC, g.id`, projectID)
	if err != nil {
		return nil, fmt.Errorf("OAuth grants: %w", err)
	}
	return out, nil
}

// RevokeOAuthGrant implements [store.Store].
func (s *Store) RevokeOAuthGrant(ctx context.Context, id string) error {
	err := mustAffect(s.pool.Exec(ctx, `UPDATE oauth_grants SET revoked_at = CASE WHEN revoked_at = 0 THEN $1 ELSE revoked_at END WHERE id = $2`,
		millis(now()), id))
	if err != nil {
		return fmt.Errorf("revoke OAuth grant %q: %w", id, err)
	}
	return nil
}

// TouchOAuthGrant implements [store.Store].
func (s *Store) TouchOAuthGrant(ctx context.Context, id string, t time.Time) error {
	if _, err := s.pool.Exec(ctx, `UPDATE oauth_grants SET last_used_at = $1 WHERE id = $2 AND last_used_at < $1`, millis(t), id); err != nil {
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
	_, err := s.pool.Exec(ctx, `INSERT INTO oauth_tokens (hash, kind, grant_id, data, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		hash, tok.Kind, tok.GrantID, string(tok.Data), millis(now()), millis(tok.ExpiresAt))
	if isUnique(err) {
		err = store.ErrExists
	}
	if err != nil {
		return fmt.Errorf("create OAuth %s: %w", tok.Kind, err)
	}
	return nil
}

const selectOAuthToken = `SELECT kind, grant_id, data, created_at, expires_at, used_at FROM oauth_tokens WHERE hash = $1`

func scanOAuthToken(row pgx.Row) (store.OAuthToken, error) {
	var (
		tok                    store.OAuthToken
		data                   string
		created, expires, used int64
	)
	if err := row.Scan(&tok.Kind, &tok.GrantID, &data, &created, &expires, &used); err != nil {
		return store.OAuthToken{}, notFound(err)
	}
	if data != "" {
		tok.Data = []byte(data)
	}
	tok.CreatedAt, tok.ExpiresAt, tok.UsedAt = fromMillis(created), fromMillis(expires), store.OptTime(used)
	return tok, nil
}

// OAuthToken implements [store.Store].
func (s *Store) OAuthToken(ctx context.Context, hash []byte) (store.OAuthToken, error) {
	tok, err := scanOAuthToken(s.pool.QueryRow(ctx, selectOAuthToken, hash))
	if err != nil {
		return store.OAuthToken{}, fmt.Errorf("OAuth token: %w", err)
	}
	return tok, nil
}

// UseOAuthToken implements [store.Store]. The row is locked while it is
// read and marked, so two uses of one secret cannot both succeed.
func (s *Store) UseOAuthToken(ctx context.Context, hash []byte) (store.OAuthToken, error) {
	var tok store.OAuthToken
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		if tok, err = scanOAuthToken(tx.QueryRow(ctx, selectOAuthToken+` FOR UPDATE`, hash)); err != nil {
			return err
		}
		if !tok.UsedAt.IsZero() {
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE oauth_tokens SET used_at = $1 WHERE hash = $2`, millis(now()), hash)
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
	tag, err := s.pool.Exec(ctx, `DELETE FROM oauth_tokens WHERE expires_at < $1`, millis(before))
	if err != nil {
		return 0, fmt.Errorf("prune OAuth tokens: %w", err)
	}
	return tag.RowsAffected(), nil
}

// CountOAuthClients implements [store.Store].
func (s *Store) CountOAuthClients(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM oauth_clients`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count OAuth clients: %w", err)
	}
	return n, nil
}

// PruneOAuthClients implements [store.Store].
func (s *Store) PruneOAuthClients(ctx context.Context, unused, idle time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM oauth_clients WHERE created_at < $1 AND id NOT IN (
	SELECT g.client_id FROM oauth_grants g
	WHERE (g.revoked_at = 0 AND g.id IN (SELECT grant_id FROM oauth_tokens))
		OR g.created_at >= $2 OR g.last_used_at >= $2 OR g.revoked_at >= $2)`,
		millis(unused), millis(idle))
	if err != nil {
		return 0, fmt.Errorf("prune OAuth clients: %w", err)
	}
	return tag.RowsAffected(), nil
}
