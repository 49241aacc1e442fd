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

// schemaTypes are SQLite's words for what the engines' schemas say
// differently.
var schemaTypes = sqlstore.SchemaTypes{
	Bytes:     "BLOB",
	Serial:    "INTEGER PRIMARY KEY",
	NowMillis: "CAST(strftime('%s', 'now') AS INTEGER) * 1000",
	AuditAppendOnly: `CREATE TRIGGER audit_append_only BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;`,
}

// migrations are the schema steps in SQLite's words: the first three, then
// the steps both engines share (sqlstore.FirstSteps, sqlstore.Steps).
var migrations = append(sqlstore.FirstSteps(schemaTypes), sqlstore.Steps(schemaTypes)...)

// migrate brings the file's schema up to date ([sqlstore.Migrate]); db is
// the write pool, whose transactions begin IMMEDIATE.
func migrate(ctx context.Context, w *sql.DB) error {
	return sqlstore.Migrate(ctx, &db{w: w}, dialect{}, "", "file", migrations)
}
