package sqlite

import (
	"context"
	"database/sql"
)

// idempotencySchema is migration step 9: the outcome of each request id of
// a tool with an idempotency key (idempotency.go of package store), and
// the call log's call id, replays and retries.
const idempotencySchema = `
CREATE TABLE idempotency (
	project_id BIGINT NOT NULL,
	tool       TEXT   NOT NULL,
	id_hash    BLOB   NOT NULL,
	args_hash  BLOB   NOT NULL,
	state      TEXT   NOT NULL,
	call_id    TEXT   NOT NULL,
	result     BLOB,
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

// execWrite runs one statement in a write transaction and returns the
// rows it changed.
func (s *Store) execWrite(ctx context.Context, q string, args ...any) (int64, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
