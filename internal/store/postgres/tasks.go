package postgres

import (
	"encoding/json"
)

// tasksSchema is migration step 8: the tasks table, and the task id on a
// call log record. expires_at is NULL while a task runs: pruning reads the
// ended ones by it.
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
	result         BYTEA,
	error          BYTEA,
	input_requests BYTEA,
	call_id        TEXT   NOT NULL,
	expires_at     BIGINT
);
CREATE INDEX tasks_owner ON tasks (project_id, owner, created_at);
CREATE INDEX tasks_expires ON tasks (expires_at);
CREATE INDEX tasks_gateway ON tasks (gateway, status);
ALTER TABLE calls ADD COLUMN task_id TEXT NOT NULL DEFAULT '';
`

// blob is raw JSON as stored: nil (NULL) for none.
func blob(b json.RawMessage) []byte {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

// rawJSON is a stored blob as raw JSON: nil for NULL.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}
