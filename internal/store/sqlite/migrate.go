package sqlite

import (
	"context"
	"database/sql"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlstore"
)

// ErrSchemaTooNew means the file was migrated by a newer build of spacefix
// than this one; this build cannot safely use it. It is
// [store.ErrSchemaTooNew].
var ErrSchemaTooNew = store.ErrSchemaTooNew

// firstSteps are SQLite's first schema steps; step i brings the file to
// version i+1. The PostgreSQL store's step 1 is these three in its words.
// Append only: never edit a step that has shipped; new steps go to
// sqlstore.Steps, for both engines.
var firstSteps = []string{
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
}

// migrations are SQLite's first three steps, then the steps both engines
// share (sqlstore.Steps), in SQLite's words.
var migrations = append(firstSteps, sqlstore.Steps(sqlstore.SchemaTypes{
	Bytes:     "BLOB",
	Serial:    "INTEGER PRIMARY KEY",
	NowMillis: "CAST(strftime('%s', 'now') AS INTEGER) * 1000",
	AuditAppendOnly: `CREATE TRIGGER audit_append_only BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;`,
})...)

// migrate brings the file's schema up to date ([sqlstore.Migrate]); db is
// the write pool, whose transactions begin IMMEDIATE.
func migrate(ctx context.Context, w *sql.DB) error {
	return sqlstore.Migrate(ctx, &db{w: w}, dialect{}, "", "file", migrations)
}
