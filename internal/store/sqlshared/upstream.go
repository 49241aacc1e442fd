package sqlshared

import (
	"fmt"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// UpstreamSchema is migration step 11 on a store whose type for bytes is
// bytesType (BLOB, BYTEA): each person's own account at a bridged remote
// that runs per person, its tokens sealed by internal/secrets, and the
// OAuth clients the gateway registered at the remotes' authorization
// servers (upstream.go of package store). An account goes with its user
// (the foreign key, and DeleteUser), with the person's membership of the
// project (RemoveMember) and with its agent key (RevokeKey).
func UpstreamSchema(bytesType string) string {
	return strings.ReplaceAll(upstreamSchema, "BYTES", bytesType)
}

const upstreamSchema = `
CREATE TABLE upstream_accounts (
	agent_key_id TEXT   NOT NULL REFERENCES keys (id) ON DELETE CASCADE,
	user_id      BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	project_id   BIGINT NOT NULL,
	resource     TEXT   NOT NULL,
	access       BYTES  NOT NULL, -- sealed
	refresh      BYTES,           -- sealed; NULL: none
	expires_at   BIGINT,          -- NULL: unknown
	scope        TEXT   NOT NULL,
	client_id    TEXT   NOT NULL,
	subject      TEXT   NOT NULL,
	created_at   BIGINT NOT NULL,
	updated_at   BIGINT NOT NULL,
	claimed_until BIGINT,         -- a gateway refreshes the tokens until then; NULL: none
	version      BIGINT NOT NULL,
	PRIMARY KEY (agent_key_id, user_id)
);
CREATE INDEX upstream_accounts_user ON upstream_accounts (user_id);
CREATE INDEX upstream_accounts_project ON upstream_accounts (project_id, user_id);

CREATE TABLE upstream_clients (
	resource     TEXT   NOT NULL,
	redirect_uri TEXT   NOT NULL,
	issuer       TEXT   NOT NULL,
	auth_url     TEXT   NOT NULL,
	token_url    TEXT   NOT NULL,
	client_id    TEXT   NOT NULL,
	secret       BYTES,           -- sealed; NULL: a public client
	scopes       TEXT   NOT NULL, -- JSON array
	created_at   BIGINT NOT NULL,
	PRIMARY KEY (resource, redirect_uri)
);
`

// UpstreamFlowSchema is migration step 14: the connect flow (the nonce of
// its sealed state) that last connected an upstream account, so that a
// callback opened again for that flow finds it and spends no code twice;
// empty for accounts connected before step 14.
const UpstreamFlowSchema = `ALTER TABLE upstream_accounts ADD COLUMN flow TEXT NOT NULL DEFAULT '';`

// UpstreamAccountColumns are the columns of upstream_accounts in the order
// [ScanUpstreamAccount] reads and [UpstreamAccountArgs] writes them
// (version, which a put sets, before flow).
const UpstreamAccountColumns = `project_id, agent_key_id, user_id, resource, access, refresh, expires_at,
scope, client_id, subject, created_at, updated_at, claimed_until, version, flow`

// SelectUpstreamAccount selects [UpstreamAccountColumns].
const SelectUpstreamAccount = `SELECT ` + UpstreamAccountColumns + ` FROM upstream_accounts`

// UpstreamIndicatorSchema is migration step 12: the resource indicator
// (RFC 8707) an upstream client's tokens are asked for, sent again with
// each refresh; empty for clients kept before step 12, which refresh
// without one until the next connect records it.
const UpstreamIndicatorSchema = `ALTER TABLE upstream_clients ADD COLUMN indicator TEXT NOT NULL DEFAULT '';`

// UpstreamClientColumns are the columns of upstream_clients in the order
// [ScanUpstreamClient] reads and [UpstreamClientArgs] writes them.
const UpstreamClientColumns = `resource, redirect_uri, issuer, auth_url, token_url, client_id, secret, scopes, created_at, indicator`

// SelectUpstreamClient selects [UpstreamClientColumns].
const SelectUpstreamClient = `SELECT ` + UpstreamClientColumns + ` FROM upstream_clients`

// The upstream statements, with ? placeholders (fields of [Statements]).
const (
	// putUpstreamAccount takes [UpstreamAccountArgs] with version 1: a new
	// row starts at 1, a replaced one goes up by one and keeps its
	// created_at.
	putUpstreamAccount = `INSERT INTO upstream_accounts (` + UpstreamAccountColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)
ON CONFLICT (agent_key_id, user_id) DO UPDATE SET project_id = excluded.project_id, resource = excluded.resource,
	access = excluded.access, refresh = excluded.refresh, expires_at = excluded.expires_at, scope = excluded.scope,
	client_id = excluded.client_id, subject = excluded.subject, updated_at = excluded.updated_at,
	claimed_until = excluded.claimed_until, version = upstream_accounts.version + 1, flow = excluded.flow`
	// updateUpstreamAccount takes resource, access, refresh, expires_at,
	// scope, client_id, subject, updated_at, claimed_until, then the key and the version
	// the caller read. It keeps the flow: a refresh connects nothing.
	updateUpstreamAccount = `UPDATE upstream_accounts SET resource = ?, access = ?, refresh = ?, expires_at = ?,
	scope = ?, client_id = ?, subject = ?, updated_at = ?, claimed_until = ?, version = version + 1
WHERE agent_key_id = ? AND user_id = ? AND version = ?`
	// upstreamKeyProject is the project of a live agent key, which an
	// account may be put under.
	upstreamKeyProject = `SELECT project_id FROM keys WHERE id = ? AND kind = 'agent' AND revoked_at IS NULL`
	putUpstreamClient  = `INSERT INTO upstream_clients (` + UpstreamClientColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (resource, redirect_uri) DO UPDATE SET issuer = excluded.issuer, auth_url = excluded.auth_url,
	token_url = excluded.token_url, client_id = excluded.client_id, secret = excluded.secret,
	scopes = excluded.scopes, created_at = excluded.created_at, indicator = excluded.indicator`
)

// UpstreamWhere returns the WHERE clause (with its leading space) that
// selects f's accounts, with placeholders from param, and its arguments;
// "" for a zero filter.
func UpstreamWhere(f store.UpstreamFilter, param Param) (string, []any) {
	w := where{param: param}
	if f.ProjectID != 0 {
		w.add("project_id =", f.ProjectID)
	}
	if f.AgentKeyID != "" {
		w.add("agent_key_id =", f.AgentKeyID)
	}
	if f.UserID != 0 {
		w.add("user_id =", f.UserID)
	}
	return w.clause(), w.args
}

// UpstreamAccountsQuery returns the query that lists f's accounts, by
// agent key then user, and its arguments.
func UpstreamAccountsQuery(f store.UpstreamFilter, param Param) (string, []any) {
	where, args := UpstreamWhere(f, param)
	return SelectUpstreamAccount + where + ` ORDER BY agent_key_id, user_id`, args
}

// UpstreamAccountTimes returns a's CreatedAt and UpdatedAt, each now when
// zero, as a write stores them.
func UpstreamAccountTimes(a store.UpstreamAccount) store.UpstreamAccount {
	now := Now()
	if a.CreatedAt.IsZero() {
		a.CreatedAt = now
	}
	if a.UpdatedAt.IsZero() {
		a.UpdatedAt = now
	}
	return a
}

// UpstreamAccountArgs are a's values in the order of
// [UpstreamAccountColumns], without the version ([Statements.PutUpstreamAccount]
// sets it).
func UpstreamAccountArgs(a store.UpstreamAccount) []any {
	return []any{a.ProjectID, a.AgentKeyID, a.UserID, store.CleanText(a.Resource), NullBytes(a.Access), NullBytes(a.Refresh),
		NullMillis(a.ExpiresAt), store.CleanText(a.Scope), store.CleanText(a.ClientID), store.CleanText(a.Subject),
		Millis(a.CreatedAt), Millis(a.UpdatedAt), NullMillis(a.ClaimedUntil), store.CleanText(a.Flow)}
}

// UpdateUpstreamAccountArgs are the arguments of
// [Statements.UpdateUpstreamAccount] for a.
func UpdateUpstreamAccountArgs(a store.UpstreamAccount) []any {
	return []any{store.CleanText(a.Resource), NullBytes(a.Access), NullBytes(a.Refresh), NullMillis(a.ExpiresAt),
		store.CleanText(a.Scope), store.CleanText(a.ClientID), store.CleanText(a.Subject), Millis(a.UpdatedAt),
		NullMillis(a.ClaimedUntil), a.AgentKeyID, a.UserID, a.Version}
}

// ScanUpstreamAccount scans a row of [SelectUpstreamAccount].
func ScanUpstreamAccount(row Row) (store.UpstreamAccount, error) {
	var (
		a                store.UpstreamAccount
		expires, claimed *int64
		created, updated int64
	)
	err := row.Scan(&a.ProjectID, &a.AgentKeyID, &a.UserID, &a.Resource, &a.Access, &a.Refresh, &expires,
		&a.Scope, &a.ClientID, &a.Subject, &created, &updated, &claimed, &a.Version, &a.Flow)
	if err != nil {
		return store.UpstreamAccount{}, notFound(err)
	}
	if len(a.Refresh) == 0 {
		a.Refresh = nil
	}
	a.ExpiresAt, a.CreatedAt, a.UpdatedAt = FromNullMillis(expires), FromMillis(created), FromMillis(updated)
	a.ClaimedUntil = FromNullMillis(claimed)
	return a, nil
}

// UpstreamClientArgs are c's values in the order of
// [UpstreamClientColumns]; CreatedAt is now when zero.
func UpstreamClientArgs(c store.UpstreamClient) ([]any, error) {
	scopes, err := store.EncodeList(c.Scopes)
	if err != nil {
		return nil, fmt.Errorf("encode scopes: %w", err)
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = Now()
	}
	return []any{store.CleanText(c.Resource), store.CleanText(c.RedirectURI), store.CleanText(c.Issuer),
		store.CleanText(c.AuthURL), store.CleanText(c.TokenURL), store.CleanText(c.ClientID), NullBytes(c.Secret),
		store.CleanText(scopes), Millis(c.CreatedAt), store.CleanText(c.Indicator)}, nil
}

// ScanUpstreamClient scans a row of [SelectUpstreamClient].
func ScanUpstreamClient(row Row) (store.UpstreamClient, error) {
	var (
		c       store.UpstreamClient
		scopes  string
		created int64
	)
	err := row.Scan(&c.Resource, &c.RedirectURI, &c.Issuer, &c.AuthURL, &c.TokenURL, &c.ClientID, &c.Secret, &scopes, &created, &c.Indicator)
	if err != nil {
		return store.UpstreamClient{}, notFound(err)
	}
	if len(c.Secret) == 0 {
		c.Secret = nil
	}
	list, err := store.DecodeList(scopes)
	if err != nil {
		return store.UpstreamClient{}, fmt.Errorf("decode scopes of the upstream client of %s: %w", c.Resource, err)
	}
	c.Scopes, c.CreatedAt = list, FromMillis(created)
	return c, nil
}

// NullBytes is b for a nullable BLOB/BYTEA column: nil is NULL.
func NullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// NullMillis is t for a nullable time column: the zero time is NULL.
func NullMillis(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return Millis(t)
}
