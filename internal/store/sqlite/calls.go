package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlstore"
)

// insertCalls is the statement that inserts n call log rows at once: one
// statement per row cost more than the row (binding, stepping, the
// driver's per-statement work), ~10 µs a call.
func insertCalls(n int) string {
	return insertCallsPrefix + strings.TrimSuffix(strings.Repeat(insertCallRow+",", n), ",")
}

var (
	insertCallsPrefix = `INSERT INTO calls (` + strings.Join(sqlstore.CallColumns, ", ") + `) VALUES `
	insertCallRow     = "(" + strings.TrimSuffix(strings.Repeat("?, ", len(sqlstore.CallColumns)), ", ") + ")"
)

// insertChunk rows per statement: 1,088 parameters, well under SQLite's
// limit of 32,766.
const insertChunk = 64

const upsertUsage = `INSERT INTO usage_daily (project_id, day, kind, name, calls) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (project_id, day, kind, name) DO UPDATE SET calls = usage_daily.calls + excluded.calls`

// AppendCalls implements [store.Store]: multi-row INSERTs of the records
// and an upsert per usage counter, in one write transaction. Errors
// longer than [store.MaxErrorRunes] characters are cut to that length. A
// batch whose id ([store.CallBatch]) was written before is not written
// again.
func (s *Store) AppendCalls(ctx context.Context, calls []store.Call) error {
	if len(calls) == 0 {
		return nil
	}
	usage := sqlstore.UsageCounts(calls)
	batch := store.CallBatch(ctx)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if batch != "" {
			res, err := tx.ExecContext(ctx, sqlstore.InsertCallBatch, batch, millis(now()))
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return err // nil: written before
			}
		}
		args := make([]any, 0, len(sqlstore.CallColumns)*min(len(calls), insertChunk))
		for rest := calls; len(rest) > 0; {
			chunk := rest[:min(len(rest), insertChunk)]
			rest = rest[len(chunk):]
			args = args[:0]
			for _, c := range chunk {
				var err error
				if args, err = sqlstore.AppendCallArgs(args, c); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, insertCalls(len(chunk)), args...); err != nil {
				return err
			}
		}
		if len(usage) == 0 {
			return nil
		}
		up, err := tx.PrepareContext(ctx, upsertUsage)
		if err != nil {
			return err
		}
		defer up.Close()
		for k, n := range usage {
			if _, err := up.ExecContext(ctx, k.Project, k.Day, k.Kind, k.Name, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("append %d calls: %w", len(calls), err)
	}
	return nil
}
