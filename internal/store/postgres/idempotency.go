package postgres

// idempotencySchema is migration step 9: the outcome of each request id of
// a tool with an idempotency key (idempotency.go of package store), and
// the call log's call id, replays and retries.
const idempotencySchema = `
CREATE TABLE idempotency (
	project_id BIGINT NOT NULL,
	tool       TEXT   NOT NULL,
	id_hash    BYTEA  NOT NULL,
	args_hash  BYTEA  NOT NULL,
	state      TEXT   NOT NULL,
	call_id    TEXT   NOT NULL,
	result     BYTEA,
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
