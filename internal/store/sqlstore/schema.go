package sqlstore

import (
	"strings"

	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// SchemaTypes are the words of the schema that differ between the
// engines. [Steps] writes them where the steps say {bytes}, {serial},
// {now_ms} and {audit_append_only}.
type SchemaTypes struct {
	Bytes  string // the type of bytes: BLOB, BYTEA
	Serial string // an auto-numbered primary key: INTEGER PRIMARY KEY, an identity column
	// NowMillis is the current time in Unix milliseconds, as an SQL
	// expression.
	NowMillis string
	// AuditAppendOnly is the DDL that refuses every UPDATE of the audit
	// table.
	AuditAppendOnly string
}

// Steps returns the schema steps both engines share, written once: the
// SQLite store's steps 4 on, the PostgreSQL store's 2 on (its step 1 is
// SQLite's 1–3, [FirstStepsAsOne]). Each engine appends these to its first
// steps; a new step is appended here, for both. Append only: never edit a step
// that has shipped. Times are Unix milliseconds; days are the Unix
// milliseconds of midnight UTC; lists are JSON text.
func Steps(t SchemaTypes) []string { return render(t, steps) }

// FirstSteps returns the first schema steps, from before the engines
// shared their steps, each step as SQLite applied it: three steps
// (projects, keys and the call log; the dashboard's tables; meta).
// PostgreSQL applied them as its one step 1 ([FirstStepsAsOne]).
func FirstSteps(t SchemaTypes) []string { return render(t, firstSteps) }

// FirstStepsAsOne returns [FirstSteps] as one step, as PostgreSQL applied
// it, with the index of sessions by expiry that only it has.
func FirstStepsAsOne(t SchemaTypes) string {
	return strings.Join(FirstSteps(t), "") + "CREATE INDEX sessions_expires ON sessions (expires_at);\n"
}

func render(t SchemaTypes, steps []string) []string {
	r := strings.NewReplacer("{bytes}", t.Bytes, "{serial}", t.Serial, "{now_ms}", t.NowMillis, "{audit_append_only}", t.AuditAppendOnly)
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = r.Replace(s)
	}
	return out
}

var firstSteps = []string{
	// 1: projects, keys, the call log and daily usage.
	`
CREATE TABLE projects (
	id         {serial},
	name       TEXT    NOT NULL UNIQUE,
	created_at BIGINT  NOT NULL,
	settings   TEXT    NOT NULL DEFAULT '{}'
);

CREATE TABLE keys (
	seq        {serial}, -- insertion order, for "oldest first"
	id         TEXT    NOT NULL UNIQUE,
	project_id BIGINT  NOT NULL REFERENCES projects (id),
	kind       TEXT    NOT NULL,
	name       TEXT    NOT NULL DEFAULT '',
	hash       {bytes} NOT NULL,
	read_only  BOOLEAN NOT NULL DEFAULT FALSE,
	tools      TEXT    NOT NULL DEFAULT '[]', -- JSON array of tool names
	created_at BIGINT  NOT NULL,
	revoked_at BIGINT                          -- NULL while live
);
CREATE UNIQUE INDEX keys_hash ON keys (hash);
CREATE INDEX keys_project ON keys (project_id);

-- No foreign keys on the log: a record must never fail a whole batch.
CREATE TABLE calls (
	id          {serial},
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
	definition  {bytes},   -- NULL: never approved
	approved_at BIGINT,
	rejected    {bytes},   -- NULL: nothing rejected
	rejected_at BIGINT,
	PRIMARY KEY (project_id, tool)
);

CREATE TABLE users (
	id            {serial},
	email         TEXT    NOT NULL,
	email_key     TEXT    NOT NULL UNIQUE, -- lower-cased email
	password_hash TEXT    NOT NULL,
	admin         BOOLEAN NOT NULL DEFAULT FALSE,
	created_at    BIGINT  NOT NULL
);

CREATE TABLE sessions (
	hash       {bytes} PRIMARY KEY,
	user_id    BIGINT NOT NULL REFERENCES users (id),
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);

CREATE TABLE invites (
	seq        {serial},
	id         TEXT    NOT NULL UNIQUE,
	hash       {bytes} NOT NULL UNIQUE,
	email      TEXT    NOT NULL DEFAULT '',
	admin      BOOLEAN NOT NULL DEFAULT FALSE,
	created_by BIGINT  NOT NULL DEFAULT 0,
	created_at BIGINT  NOT NULL,
	expires_at BIGINT  NOT NULL,
	used_at    BIGINT
);

CREATE TABLE api_tokens (
	seq        {serial},
	id         TEXT    NOT NULL UNIQUE,
	hash       {bytes} NOT NULL UNIQUE,
	name       TEXT    NOT NULL DEFAULT '',
	created_by BIGINT  NOT NULL DEFAULT 0,
	created_at BIGINT  NOT NULL,
	revoked_at BIGINT
);
`,
	// 3: small named values: the readiness probe's row, and what the
	// processes sharing a store tell each other, such as the address serve
	// last listened on (store.MetaServeURL).
	`
CREATE TABLE meta (
	key        TEXT   PRIMARY KEY,
	value      TEXT   NOT NULL,
	updated_at BIGINT NOT NULL
);
`,
}

var steps = []string{
	// 4: the gateway processes that use the store, so that a second one
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
	secret_hash {bytes},
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
	hash       {bytes} PRIMARY KEY,
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
	SELECT p.id, u.id, 'owner', {now_ms} FROM projects p CROSS JOIN users u;

ALTER TABLE api_tokens ADD COLUMN project_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE api_tokens ADD COLUMN role       TEXT   NOT NULL DEFAULT '';
ALTER TABLE invites    ADD COLUMN project_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE invites    ADD COLUMN role       TEXT   NOT NULL DEFAULT '';

-- No foreign keys: an entry outlives what it names.
CREATE TABLE audit (
	id         {serial},
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
{audit_append_only}
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
	// 8: MCP tasks. expires_at is NULL while a task runs: pruning reads
	// the ended ones by it.
	tasksSchema,
	// 9: request ids of tools with an idempotency key, and the call id,
	// replays and retries in the call log (idempotency.go).
	idempotencySchema,
	// 10: the audience of an agent key's identity tokens ("" sends none;
	// store.Key.IdentityAudience).
	`ALTER TABLE keys ADD COLUMN identity_audience TEXT NOT NULL DEFAULT '';`,
	// 11: people's own accounts at bridged remotes that run per person,
	// and the upstream OAuth clients (upstream.go).
	sqlshared.UpstreamSchema("{bytes}"),
	// 12: the resource indicator of an upstream client, for refreshes.
	sqlshared.UpstreamIndicatorSchema,
	// 13: the name a person gives themselves.
	sqlshared.UserNameSchema,
	// 14: the connect flow that wrote an upstream account.
	sqlshared.UpstreamFlowSchema,
	// 15: partial indexes of the tasks that have not ended, for the cap of
	// running tasks per caller and the sweeps of gone gateways' tasks.
	sqlshared.RunningTasksSchema,
	// 16: trusted identity providers, their subjects' people, and values
	// used once (idp.go).
	sqlshared.EnterpriseSchema,
	// 17: the versions of each project's policy, and what it did with
	// each call (policy.go).
	sqlshared.PolicySchema,
}

// tasksSchema is step 8: the tasks table, and the task id on a call log
// record.
const tasksSchema = `
CREATE TABLE tasks (
	id             TEXT   PRIMARY KEY,
	project_id     BIGINT NOT NULL,
	owner          TEXT   NOT NULL,
	tool           TEXT   NOT NULL,
	agent_key      TEXT   NOT NULL,
	gateway        TEXT   NOT NULL,
	era            TEXT   NOT NULL,
	status         TEXT   NOT NULL,
	status_message TEXT   NOT NULL,
	created_at     BIGINT NOT NULL,
	updated_at     BIGINT NOT NULL,
	ttl_ms         BIGINT NOT NULL,
	poll_ms        BIGINT NOT NULL,
	deadline       BIGINT NOT NULL,
	result         {bytes},
	error          {bytes},
	input_requests {bytes},
	call_id        TEXT   NOT NULL,
	expires_at     BIGINT
);
CREATE INDEX tasks_owner ON tasks (project_id, owner, created_at);
CREATE INDEX tasks_expires ON tasks (expires_at);
CREATE INDEX tasks_gateway ON tasks (gateway, status);
ALTER TABLE calls ADD COLUMN task_id TEXT NOT NULL DEFAULT '';
`

// idempotencySchema is step 9: the outcome of each request id of a tool
// with an idempotency key (idempotency.go of package store), and the call
// log's call id, replays and retries.
const idempotencySchema = `
CREATE TABLE idempotency (
	project_id BIGINT NOT NULL,
	tool       TEXT   NOT NULL,
	id_hash    {bytes} NOT NULL,
	args_hash  {bytes} NOT NULL,
	state      TEXT   NOT NULL,
	call_id    TEXT   NOT NULL,
	result     {bytes},
	outcome    TEXT   NOT NULL,
	reason     TEXT   NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	deadline   BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,
	PRIMARY KEY (project_id, tool, id_hash)
);
CREATE INDEX idempotency_expires ON idempotency (expires_at);
ALTER TABLE calls ADD COLUMN call_id  TEXT    NOT NULL DEFAULT '';
ALTER TABLE calls ADD COLUMN replay   BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE calls ADD COLUMN retry_of TEXT    NOT NULL DEFAULT '';
`
