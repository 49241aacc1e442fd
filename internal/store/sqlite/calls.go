package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
	"github.com/spacefix/spacefix/internal/textfmt"
)

// pruneChunk is how many log rows one PruneCalls transaction deletes, so a
// large prune never holds the write lock for long. A variable for tests.
var pruneChunk = 5000

// insertCalls is the statement that inserts n call log rows at once: one
// statement per row cost more than the row (binding, stepping, the
// driver's per-statement work), ~10 µs a call.
func insertCalls(n int) string {
	return insertCallsPrefix + strings.TrimSuffix(strings.Repeat(insertCallRow+",", n), ",")
}

const (
	insertCallsPrefix = `INSERT INTO calls
(started_at, project_id, kind, name, key_id, agent, replica, duration_us, outcome, error, progress, billable, task_id,
 call_id, replay, retry_of, policy)
VALUES `
	insertCallRow  = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	insertCallArgs = 17
	// insertChunk rows per statement: 1,088 parameters, well under SQLite's
	// limit of 32,766.
	insertChunk = 64
)

const upsertUsage = `INSERT INTO usage_daily (project_id, day, kind, name, calls) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (project_id, day, kind, name) DO UPDATE SET calls = usage_daily.calls + excluded.calls`

// usageKey is one usage counter.
type usageKey struct {
	project    int64
	day        int64
	kind, name string
}

// AppendCalls implements [store.Store]. Errors longer than [store.MaxErrorRunes]
// characters are cut to that length. A batch whose id ([store.CallBatch])
// was written before is not written again.
func (s *Store) AppendCalls(ctx context.Context, calls []store.Call) error {
	if len(calls) == 0 {
		return nil
	}
	usage := make(map[usageKey]int64)
	for _, c := range calls {
		if c.Billable {
			usage[usageKey{c.ProjectID, store.DayMillis(c.Time), store.CleanText(c.Kind), store.CleanText(c.Name)}]++
		}
	}
	batch := store.CallBatch(ctx)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if batch != "" {
			res, err := tx.ExecContext(ctx, `INSERT INTO call_batches (id, written_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`,
				batch, millis(now()))
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return err // nil: written before
			}
		}
		args := make([]any, 0, insertCallArgs*min(len(calls), insertChunk))
		for rest := calls; len(rest) > 0; {
			chunk := rest[:min(len(rest), insertChunk)]
			rest = rest[len(chunk):]
			args = args[:0]
			for _, c := range chunk {
				progress, err := store.EncodeList(c.Progress)
				if err != nil {
					return err
				}
				clean := store.CleanText
				args = append(args, millis(c.Time), c.ProjectID, clean(c.Kind), clean(c.Name), clean(c.KeyID), clean(c.Agent), clean(c.Replica),
					c.Duration.Microseconds(), clean(c.Outcome), clean(textfmt.Cut(c.Error, store.MaxErrorRunes)), progress, c.Billable, clean(c.TaskID),
					clean(c.CallID), c.Replay, clean(c.RetryOf), clean(c.Policy))
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
			if _, err := up.ExecContext(ctx, k.project, k.day, k.kind, k.name, n); err != nil {
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

// Calls implements [store.Store].
func (s *Store) Calls(ctx context.Context, f store.CallFilter) ([]store.Call, error) {
	query, args := sqlshared.CallsQuery(f, sqlshared.Question)
	cs, err := queryList(ctx, s.r, sqlshared.ScanCall, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list calls: %w", err)
	}
	return cs, nil
}

// Usage implements [store.Store]. A projectID of 0 sums over every project.
func (s *Store) Usage(ctx context.Context, projectID int64, from, to time.Time) ([]store.Usage, error) {
	q, args := `SELECT day, kind, name, SUM(calls) FROM usage_daily WHERE day >= ? AND day <= ?`, []any{store.DayMillis(from), store.DayMillis(to)}
	if projectID != 0 {
		q += ` AND project_id = ?`
		args = append(args, projectID)
	}
	us, err := queryList(ctx, s.r, sqlshared.ScanUsage, q+` GROUP BY day, kind, name ORDER BY day, name, kind`, args...)
	if err != nil {
		return nil, fmt.Errorf("usage of project %d: %w", projectID, err)
	}
	return us, nil
}

// PruneCalls implements [store.Store]. It deletes in chunks of a few
// thousand rows, one transaction each, so call log writes and key changes
// from other processes are not held up by a large prune. It also forgets
// the ids of batches written more than [store.CallBatchKeep] ago.
func (s *Store) PruneCalls(ctx context.Context, before time.Time) (int64, error) {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM call_batches WHERE written_at < ?`, millis(now().Add(-store.CallBatchKeep))); err != nil {
		return 0, fmt.Errorf("prune call batch ids: %w", err)
	}
	var total int64
	for {
		var n int64
		err := s.writeTx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `DELETE FROM calls WHERE id IN
(SELECT id FROM calls WHERE started_at < ? ORDER BY started_at LIMIT ?)`, millis(before), pruneChunk)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("prune calls before %s: %w", before.UTC().Format(time.RFC3339), err)
		}
		if n < int64(pruneChunk) {
			return total, nil
		}
	}
}
