package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// Migrate brings the schema up to date with steps (an engine's first
// steps, then [Steps]): step i brings it to version i+1, one step per
// transaction of db. Each transaction runs lock first, if there is one
// (PostgreSQL's advisory lock; SQLite's transactions take the write lock
// as they begin), then rereads the version, so processes that start at
// the same moment apply every step exactly once. what names the store in
// messages ("file", "database"). It fails with an error wrapping
// [store.ErrSchemaTooNew] if a newer build has migrated the store.
func Migrate(ctx context.Context, db DB, d Dialect, lock, what string, steps []string) error {
	record := d.Rebind(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`)
	for {
		var v int
		applied := false
		err := db.Tx(ctx, func(tx Querier) error {
			if lock != "" {
				if _, err := tx.Exec(ctx, lock); err != nil {
					return fmt.Errorf("take the migration lock: %w", err)
				}
			}
			if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at BIGINT  NOT NULL
)`); err != nil {
				return fmt.Errorf("create schema_migrations: %w", err)
			}
			if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
				return fmt.Errorf("read schema version: %w", err)
			}
			switch {
			case v > len(steps):
				return fmt.Errorf("%w: the %s is at version %d, this build knows up to %d; upgrade spacefix", store.ErrSchemaTooNew, what, v, len(steps))
			case v == len(steps):
				return nil
			}
			if _, err := tx.Exec(ctx, steps[v]); err != nil {
				return fmt.Errorf("migrate to version %d: %w", v+1, err)
			}
			if _, err := tx.Exec(ctx, record, v+1, time.Now().UnixMilli()); err != nil {
				return fmt.Errorf("record version %d: %w", v+1, err)
			}
			applied = true
			return nil
		})
		switch {
		case err != nil && applied: // the commit failed
			return fmt.Errorf("migrate to version %d: %w", v+1, err)
		case err != nil || !applied:
			return err
		}
	}
}
