package sqlshared

import (
	"encoding/json"
	"fmt"

	"github.com/spacefix/spacefix/internal/store"
)

// EnterpriseSchema is migration step 16 (each engine appends it to its
// list): the trusted identity providers
// (store.IdPs), which person each of their subjects is, and the values
// used once (store.UsedOnce: jti of ID-JAGs and DPoP proofs), shared by
// every gateway on the store. The same SQL runs on both engines.
const EnterpriseSchema = `
CREATE TABLE idps (
	issuer            TEXT   PRIMARY KEY,
	jwks_uri          TEXT   NOT NULL,
	allowed_clients   TEXT   NOT NULL, -- JSON array
	provision_project BIGINT NOT NULL, -- 0: none
	provision_role    TEXT   NOT NULL,
	created_at        BIGINT NOT NULL
);

CREATE TABLE idp_identities (
	issuer     TEXT   NOT NULL,
	subject    TEXT   NOT NULL,
	user_id    BIGINT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (issuer, subject)
);
CREATE INDEX idp_identities_user ON idp_identities (user_id);

CREATE TABLE used_once (
	key        TEXT   PRIMARY KEY,
	expires_at BIGINT NOT NULL
);
CREATE INDEX used_once_expires ON used_once (expires_at);
`

// SelectIdP selects the columns [ScanIdP] reads.
const SelectIdP = `SELECT issuer, jwks_uri, allowed_clients, provision_project, provision_role, created_at FROM idps`

// ScanIdP scans a row of [SelectIdP].
func ScanIdP(row Row) (store.IdP, error) {
	var (
		p       store.IdP
		clients string
		created int64
	)
	if err := row.Scan(&p.Issuer, &p.JWKSURI, &clients, &p.ProvisionProjectID, (*string)(&p.ProvisionRole), &created); err != nil {
		return store.IdP{}, notFound(err)
	}
	if err := json.Unmarshal([]byte(clients), &p.AllowedClients); err != nil {
		return store.IdP{}, fmt.Errorf("decode the allowed clients of %s: %w", p.Issuer, err)
	}
	p.CreatedAt = FromMillis(created)
	return p, nil
}

// IdPArgs are the arguments of [Statements.InsertIdP]; p.CreatedAt is set.
func IdPArgs(p store.IdP) (store.IdP, []any) {
	p.CreatedAt = Now()
	if p.AllowedClients == nil {
		p.AllowedClients = []string{}
	}
	clients, _ := json.Marshal(p.AllowedClients)
	return p, []any{p.Issuer, p.JWKSURI, string(clients), p.ProvisionProjectID, string(p.ProvisionRole), Millis(p.CreatedAt)}
}

// The enterprise statements, with ? placeholders (fields of [Statements]).
const (
	insertIdP = `INSERT INTO idps (issuer, jwks_uri, allowed_clients, provision_project, provision_role, created_at)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (issuer) DO NOTHING`
	// linkIdentity takes issuer, subject, user id and the time.
	linkIdentity = `INSERT INTO idp_identities (issuer, subject, user_id, created_at) VALUES (?, ?, ?, ?)
ON CONFLICT (issuer, subject) DO UPDATE SET user_id = excluded.user_id, created_at = excluded.created_at`
	// useOnce takes the key, its expiry and now: a row that expired
	// already is taken over, a live one is left, so 1 row affected means
	// the key is fresh.
	useOnce = `INSERT INTO used_once (key, expires_at) VALUES (?, ?)
ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at WHERE used_once.expires_at <= ?`
)
