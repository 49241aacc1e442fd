package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// ErrSchemaTooNew means the file was migrated by a newer build of spacefix
// than this one; this build cannot safely use it. It is
// [store.ErrSchemaTooNew].
var ErrSchemaTooNew = store.ErrSchemaTooNew

// migrations are the schema steps, applied in order; step i brings the file
// to version i+1. Append only: never edit a step that has shipped.
//
// The SQL stays close to what PostgreSQL accepts (BIGINT, BOOLEAN, TEXT,
// ON CONFLICT, RETURNING) so a PostgreSQL store can follow it line by line;
// the differences are INTEGER PRIMARY KEY (an identity column there) and
// BLOB (BYTEA there). Times are Unix milliseconds; days are the Unix
// milliseconds of midnight UTC.
var migrations = []string{
	// 1: projects, keys, the call log and daily usage.
	`
CREATE TABLE projects (
	id         INTEGER PRIMARY KEY,
	name       TEXT    NOT NULL UNIQUE,
	created_at BIGINT  NOT NULL,
	settings   TEXT    NOT NULL DEFAULT '{}'
);

CREATE TABLE keys (
	seq        INTEGER PRIMARY KEY, -- insertion order, for "oldest first"
	id         TEXT    NOT NULL UNIQUE,
	project_id BIGINT  NOT NULL REFERENCES projects (id),
	kind       TEXT    NOT NULL,
	name       TEXT    NOT NULL DEFAULT '',
	hash       BLOB    NOT NULL,
	read_only  BOOLEAN NOT NULL DEFAULT FALSE,
	tools      TEXT    NOT NULL DEFAULT '[]', -- JSON array of tool names
	created_at BIGINT  NOT NULL,
	revoked_at BIGINT                          -- NULL while live
);
CREATE UNIQUE INDEX keys_hash ON keys (hash);
CREATE INDEX keys_project ON keys (project_id);

-- No foreign keys on the log: a record must never fail a whole batch.
CREATE TABLE calls (
	id          INTEGER PRIMARY KEY,
	started_at  BIGINT  NOT NULL,
	project_id  BIGINT  NOT NULL,
	kind        TEXT    NOT NULL,
	name        TEXT    NOT NULL,
	key_id      TEXT    NOT NULL,
	agent       TEXT    NOT NULL,
	replica     TEXT    NOT NULL,
	duration_us BIGINT  NOT NULL,
	outcome     TEXT    NOT NULL,
	error       TEXT    NOT NULL,
	progress    TEXT    NOT NULL, -- JSON array of lines
	billable    BOOLEAN NOT NULL
);
CREATE INDEX calls_project_started ON calls (project_id, started_at);
CREATE INDEX calls_started ON calls (started_at);

CREATE TABLE usage_daily (
	project_id BIGINT NOT NULL,
	day        BIGINT NOT NULL,
	kind       TEXT   NOT NULL,
	name       TEXT   NOT NULL,
	calls      BIGINT NOT NULL,
	PRIMARY KEY (project_id, day, kind, name)
);
`,
	// 2: the dashboard: agent key metadata, per-tool settings, consent,
	// users, sessions, invites and admin API tokens. Secrets are stored as
	// SHA-256 hashes, passwords as argon2id PHC strings.
	`
ALTER TABLE keys ADD COLUMN display_name TEXT    NOT NULL DEFAULT '';
ALTER TABLE keys ADD COLUMN author       TEXT    NOT NULL DEFAULT '';
ALTER TABLE keys ADD COLUMN community    BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE tool_settings (
	project_id    BIGINT  NOT NULL REFERENCES projects (id),
	tool          TEXT    NOT NULL,
	description   TEXT    NOT NULL DEFAULT '',
	cache_seconds INTEGER NOT NULL DEFAULT 0,
	access        TEXT    NOT NULL DEFAULT '',
	disabled      BOOLEAN NOT NULL DEFAULT FALSE,
	updated_at    BIGINT  NOT NULL,
	PRIMARY KEY (project_id, tool)
);

CREATE TABLE approvals (
	project_id  BIGINT NOT NULL REFERENCES projects (id),
	tool        TEXT   NOT NULL,
	definition  BLOB,   -- NULL: never approved
	approved_at BIGINT,
	rejected    BLOB,   -- NULL: nothing rejected
	rejected_at BIGINT,
	PRIMARY KEY (project_id, tool)
);

CREATE TABLE users (
	id            INTEGER PRIMARY KEY,
	email         TEXT    NOT NULL,
	email_key     TEXT    NOT NULL UNIQUE, -- lower-cased email
	password_hash TEXT    NOT NULL,
	admin         BOOLEAN NOT NULL DEFAULT FALSE,
	created_at    BIGINT  NOT NULL
);

CREATE TABLE sessions (
	hash       BLOB   PRIMARY KEY,
	user_id    BIGINT NOT NULL REFERENCES users (id),
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);

CREATE TABLE invites (
	seq        INTEGER PRIMARY KEY,
	id         TEXT    NOT NULL UNIQUE,
	hash       BLOB    NOT NULL UNIQUE,
	email      TEXT    NOT NULL DEFAULT '',
	admin      BOOLEAN NOT NULL DEFAULT FALSE,
	created_by BIGINT  NOT NULL DEFAULT 0,
	created_at BIGINT  NOT NULL,
	expires_at BIGINT  NOT NULL,
	used_at    BIGINT
);

CREATE TABLE api_tokens (
	seq        INTEGER PRIMARY KEY,
	id         TEXT    NOT NULL UNIQUE,
	hash       BLOB    NOT NULL UNIQUE,
	name       TEXT    NOT NULL DEFAULT '',
	created_by BIGINT  NOT NULL DEFAULT 0,
	created_at BIGINT  NOT NULL,
	revoked_at BIGINT
);
`,
	// 3: small named values: the readiness probe's row, and what the
	// processes sharing a file tell each other, such as the address serve
	// last listened on (store.MetaServeURL).
	`
CREATE TABLE meta (
	key        TEXT   PRIMARY KEY,
	value      TEXT   NOT NULL,
	updated_at BIGINT NOT NULL
);
`,
	// 4: the gateway processes that use the file, so that a second one
	// can tell it would split the agents between two registries.
	`
CREATE TABLE gateways (
	id         TEXT    PRIMARY KEY,
	host       TEXT    NOT NULL,
	pid        INTEGER NOT NULL,
	addr       TEXT    NOT NULL,
	bus        BOOLEAN NOT NULL,
	started_at BIGINT  NOT NULL,
	seen_at    BIGINT  NOT NULL
);
`,
	// 5: OAuth: dynamically registered clients, people's grants (the
	// connected apps) and the hashes of codes and tokens. Unset times are 0.
	`
CREATE TABLE oauth_clients (
	id          TEXT   PRIMARY KEY,
	metadata    TEXT   NOT NULL,
	secret_hash BLOB,
	created_at  BIGINT NOT NULL
);

CREATE TABLE oauth_grants (
	id           TEXT   PRIMARY KEY,
	project_id   BIGINT NOT NULL REFERENCES projects (id),
	user_id      BIGINT NOT NULL,
	client_id    TEXT   NOT NULL,
	client_name  TEXT   NOT NULL,
	scope        TEXT   NOT NULL,
	resource     TEXT   NOT NULL,
	created_at   BIGINT NOT NULL,
	last_used_at BIGINT NOT NULL DEFAULT 0,
	revoked_at   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX oauth_grants_project ON oauth_grants (project_id);

CREATE TABLE oauth_tokens (
	hash       BLOB   PRIMARY KEY,
	kind       TEXT   NOT NULL,
	grant_id   TEXT   NOT NULL,
	data       TEXT   NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,
	used_at    BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX oauth_tokens_expires ON oauth_tokens (expires_at);
CREATE INDEX oauth_tokens_grant ON oauth_tokens (grant_id);
`,
	// 6: project members with roles, project-scoped API tokens and
	// invites, and the append-only audit log. Upgrading keeps every
	// existing user working: each becomes an owner of every existing
	// project; existing tokens stay instance tokens (project_id 0).
	`
CREATE TABLE members (
	project_id BIGINT NOT NULL REFERENCES projects (id),
	user_id    BIGINT NOT NULL REFERENCES users (id),
	role       TEXT   NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (project_id, user_id)
);
CREATE INDEX members_user ON members (user_id);
INSERT INTO members (project_id, user_id, role, created_at)
	SELECT p.id, u.id, 'owner', CAST(strftime('%s', 'now') AS INTEGER) * 1000 FROM projects p CROSS JOIN users u;

ALTER TABLE api_tokens ADD COLUMN project_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE api_tokens ADD COLUMN role       TEXT   NOT NULL DEFAULT '';
ALTER TABLE invites    ADD COLUMN project_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE invites    ADD COLUMN role       TEXT   NOT NULL DEFAULT '';

-- No foreign keys: an entry outlives what it names.
CREATE TABLE audit (
	id         INTEGER PRIMARY KEY,
	at         BIGINT NOT NULL,
	project_id BIGINT NOT NULL,
	actor      TEXT   NOT NULL,
	addr       TEXT   NOT NULL,
	action     TEXT   NOT NULL,
	target     TEXT   NOT NULL,
	before     TEXT   NOT NULL,
	after      TEXT   NOT NULL
);
CREATE INDEX audit_project ON audit (project_id, id);
CREATE INDEX audit_at ON audit (at);
-- Append-only: an entry is never changed (pruning by age deletes).
CREATE TRIGGER audit_append_only BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
`,
	// 7: the ids of call log batches written lately, so that a batch
	// retried after a write whose outcome was unknown is not stored twice
	// (store.WithCallBatch).
	`
CREATE TABLE call_batches (
	id         TEXT   PRIMARY KEY,
	written_at BIGINT NOT NULL
);
CREATE INDEX call_batches_written ON call_batches (written_at);
`,
	// 8: MCP tasks (tasks.go).
	tasksSchema,
	// 9: request ids of tools with an idempotency key, and the call id,
	// replays and retries in the call log (idempotency.go).
	idempotencySchema,
	// 10: the audience of an agent key's identity tokens ("" sends none;
	// store.Key.IdentityAudience).
	`ALTER TABLE keys ADD COLUMN identity_audience TEXT NOT NULL DEFAULT '';`,
	// 11: people's own accounts at bridged remotes that run per person,
	// and the upstream OAuth clients (upstream.go).
	upstreamSchema,
	// 12: the resource indicator of an upstream client, for refreshes.
	upstreamIndicatorSchema,
	// 13: the name a person gives themselves.
	userNameSchema,
	// 14: the connect flow that wrote an upstream account.
	upstreamFlowSchema,
	// 15: partial indexes of the tasks that have not ended, for the cap of
	// running tasks per caller and the sweeps of gone gateways' tasks
	// (tasks_running.go).
	runningTasksSchema,
	// 16: trusted identity providers, their subjects' people, and values
	// used once (idp.go).
	enterpriseSchema,
	// 17: the versions of each project's policy, and what it did with
	// each call (policy.go).
	sqlshared.PolicySchema,
}

// migrate brings the schema up to date, one step per transaction. Each step
// takes the write lock first and rereads the version under it, so processes
// that open a new file at the same time apply every step exactly once.
func migrate(ctx context.Context, db *sql.DB) error {
	for {
		done, err := migrateStep(ctx, db)
		if err != nil || done {
			return err
		}
	}
}

func migrateStep(ctx context.Context, db *sql.DB) (done bool, err error) {
	tx, err := db.BeginTx(ctx, nil) // IMMEDIATE: see dsn
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at BIGINT  NOT NULL
)`); err != nil {
		return false, fmt.Errorf("create schema_migrations: %w", err)
	}
	var v int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case v > len(migrations):
		return false, fmt.Errorf("%w: the file is at version %d, this build knows up to %d; upgrade spacefix", ErrSchemaTooNew, v, len(migrations))
	case v == len(migrations):
		return true, nil
	}
	if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
		return false, fmt.Errorf("migrate to version %d: %w", v+1, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, v+1, time.Now().UnixMilli()); err != nil {
		return false, fmt.Errorf("record version %d: %w", v+1, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migrate to version %d: %w", v+1, err)
	}
	return false, nil
}
