package sqlstore

import (
	"context"
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
	_, err := s.db.Exec(ctx, s.q.InsertOAuthClient, c.ID, string(c.Metadata), c.SecretHash, millis(now()))
	if s.d.IsUnique(err) {
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
	err := notFound(s.db.QueryRow(ctx, s.q.OAuthClient, id).Scan(&c.ID, &meta, &c.SecretHash, &created))
	if err != nil {
		return store.OAuthClient{}, fmt.Errorf("OAuth client %q: %w", id, err)
	}
	c.Metadata, c.CreatedAt = []byte(meta), fromMillis(created)
	return c, nil
}

// CountOAuthClients implements [store.Store].
func (s *Store) CountOAuthClients(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, s.q.CountOAuthClients).Scan(&n); err != nil {
		return 0, fmt.Errorf("count OAuth clients: %w", err)
	}
	return n, nil
}

// PruneOAuthClients implements [store.Store].
func (s *Store) PruneOAuthClients(ctx context.Context, unused, idle time.Time) (int64, error) {
	n, err := s.db.Exec(ctx, s.q.PruneOAuthClients, millis(unused), millis(idle), millis(idle), millis(idle))
	if err != nil {
		return 0, fmt.Errorf("prune OAuth clients: %w", err)
	}
	return n, nil
}

func scanGrant(row Row) (store.OAuthGrant, error) {
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
	_, err := s.db.Exec(ctx, s.q.InsertOAuthGrant, g.ID, g.ProjectID, g.UserID, g.ClientID, g.ClientName, g.Scope, g.Resource, millis(now()))
	if s.d.IsUnique(err) {
		err = store.ErrExists
	}
	if err != nil {
		return store.OAuthGrant{}, fmt.Errorf("create OAuth grant %q: %w", g.ID, err)
	}
	return s.OAuthGrant(ctx, g.ID)
}

// OAuthGrant implements [store.Store].
func (s *Store) OAuthGrant(ctx context.Context, id string) (store.OAuthGrant, error) {
	g, err := scanGrant(s.db.QueryRow(ctx, s.q.OAuthGrant, id))
	if err != nil {
		return store.OAuthGrant{}, fmt.Errorf("OAuth grant %q: %w", id, err)
	}
	return g, nil
}

// OAuthGrants implements [store.Store].
func (s *Store) OAuthGrants(ctx context.Context, projectID int64) ([]store.OAuthGrant, error) {
	out, err := list(ctx, s.db, scanGrant, s.q.OAuthGrants, projectID)
	if err != nil {
		return nil, fmt.Errorf("OAuth grants: %w", err)
	}
	return out, nil
}

// RevokeOAuthGrant implements [store.Store]. A second revocation keeps
// the time of the first.
func (s *Store) RevokeOAuthGrant(ctx context.Context, id string) error {
	if err := mustAffect(s.db.Exec(ctx, s.q.RevokeOAuthGrant, millis(now()), id)); err != nil {
		return fmt.Errorf("revoke OAuth grant %q: %w", id, err)
	}
	return nil
}

// TouchOAuthGrant implements [store.Store].
func (s *Store) TouchOAuthGrant(ctx context.Context, id string, t time.Time) error {
	if _, err := s.db.Exec(ctx, s.q.TouchOAuthGrant, millis(t), id, millis(t)); err != nil {
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
	_, err := s.db.Exec(ctx, s.q.InsertOAuthToken, hash, tok.Kind, tok.GrantID, string(tok.Data), millis(now()), millis(tok.ExpiresAt))
	if s.d.IsUnique(err) {
		err = store.ErrExists
	}
	if err != nil {
		return fmt.Errorf("create OAuth %s: %w", tok.Kind, err)
	}
	return nil
}

func scanOAuthToken(row Row) (store.OAuthToken, error) {
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
	tok, err := scanOAuthToken(s.db.QueryRow(ctx, s.q.OAuthToken, hash))
	if err != nil {
		return store.OAuthToken{}, fmt.Errorf("OAuth token: %w", err)
	}
	return tok, nil
}

// UseOAuthToken implements [store.Store]. The mark is one statement that
// only an unused token passes, so of two uses of one secret, on any
// replicas, the second finds it used. The token comes back as it was
// before the mark.
func (s *Store) UseOAuthToken(ctx context.Context, hash []byte) (store.OAuthToken, error) {
	tok, err := scanOAuthToken(s.db.ExecRow(ctx, s.q.UseOAuthToken, millis(now()), hash))
	if err == nil {
		tok.UsedAt = time.Time{}
		return tok, nil
	}
	if errors.Is(err, store.ErrNotFound) {
		// Used before, or no such token: read which.
		tok, err = scanOAuthToken(s.db.QueryRow(ctx, s.q.OAuthToken, hash))
		if err == nil {
			return tok, store.ErrUsed
		}
	}
	return store.OAuthToken{}, fmt.Errorf("use OAuth token: %w", err)
}

// PruneOAuthTokens implements [store.Store].
func (s *Store) PruneOAuthTokens(ctx context.Context, before time.Time) (int64, error) {
	n, err := s.db.Exec(ctx, s.q.PruneOAuthTokens, millis(before))
	if err != nil {
		return 0, fmt.Errorf("prune OAuth tokens: %w", err)
	}
	return n, nil
}
