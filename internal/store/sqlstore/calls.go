package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
	"github.com/spacefix/spacefix/internal/textfmt"
)

// The call log's writes differ between the engines (COPY on PostgreSQL,
// multi-row INSERTs on SQLite), so AppendCalls stays in each; what they
// write comes from here: [AppendCallArgs], [UsageCounts] and the batch id
// statement [InsertCallBatch].

// InsertCallBatch records a batch id; it changes no row if the batch was
// written before.
const InsertCallBatch = `INSERT INTO call_batches (id, written_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`

// CallColumns are the columns of a call log row, in the order of
// [AppendCallArgs].
var CallColumns = []string{"started_at", "project_id", "kind", "name", "key_id", "agent", "replica",
	"duration_us", "outcome", "error", "progress", "billable", "task_id",
	"call_id", "replay", "retry_of", "policy"}

// AppendCallArgs appends c's values, in the order of [CallColumns], to
// dst: text cleaned ([store.CleanText]) and the error cut to
// [store.MaxErrorRunes].
func AppendCallArgs(dst []any, c store.Call) ([]any, error) {
	progress, err := store.EncodeList(c.Progress)
	if err != nil {
		return dst, err
	}
	clean := store.CleanText
	return append(dst, millis(c.Time), c.ProjectID, clean(c.Kind), clean(c.Name), clean(c.KeyID), clean(c.Agent), clean(c.Replica),
		c.Duration.Microseconds(), clean(c.Outcome), clean(textfmt.Cut(c.Error, store.MaxErrorRunes)), progress, c.Billable, clean(c.TaskID),
		clean(c.CallID), c.Replay, clean(c.RetryOf), clean(c.Policy)), nil
}

// UsageKey is one usage counter.
type UsageKey struct {
	Project    int64
	Day        int64
	Kind, Name string
}

// UsageCounts counts the billable calls of a batch per counter.
func UsageCounts(calls []store.Call) map[UsageKey]int64 {
	counts := make(map[UsageKey]int64)
	for _, c := range calls {
		if c.Billable {
			counts[UsageKey{c.ProjectID, store.DayMillis(c.Time), store.CleanText(c.Kind), store.CleanText(c.Name)}]++
		}
	}
	return counts
}

// Calls implements [store.Store].
func (s *Store) Calls(ctx context.Context, f store.CallFilter) ([]store.Call, error) {
	q, args := sqlshared.CallsQuery(f, s.d.Param)
	cs, err := list(ctx, s.db, scanCall, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list calls: %w", err)
	}
	return cs, nil
}

func scanCall(row Row) (store.Call, error) { return sqlshared.ScanCall(row) }

// Usage implements [store.Store]. A projectID of 0 sums over every project.
func (s *Store) Usage(ctx context.Context, projectID int64, from, to time.Time) ([]store.Usage, error) {
	q, args := s.q.Usage, []any{store.DayMillis(from), store.DayMillis(to)}
	if projectID != 0 {
		q, args = s.q.ProjectUsage, append(args, projectID)
	}
	us, err := list(ctx, s.db, scanUsage, q, args...)
	if err != nil {
		return nil, fmt.Errorf("usage of project %d: %w", projectID, err)
	}
	return us, nil
}

func scanUsage(row Row) (store.Usage, error) { return sqlshared.ScanUsage(row) }

// pruneChunk is how many log rows one PruneCalls statement deletes, so a
// large prune never holds a lock for long. A variable for tests.
var pruneChunk = 5000

// SetPruneChunk sets how many rows one prune statement deletes, so tests
// can cross chunk boundaries without writing thousands of rows. For tests.
func SetPruneChunk(n int) (restore func()) {
	old := pruneChunk
	pruneChunk = n
	return func() { pruneChunk = old }
}

// PruneCalls implements [store.Store]. It deletes in chunks of a few
// thousand rows, one statement (and so one transaction) each, so call log
// writes and key changes from other processes are not held up by a large
// prune. It also forgets the ids of batches written more than
// [store.CallBatchKeep] ago.
func (s *Store) PruneCalls(ctx context.Context, before time.Time) (int64, error) {
	if _, err := s.db.Exec(ctx, s.q.PruneCallBatches, millis(now().Add(-store.CallBatchKeep))); err != nil {
		return 0, fmt.Errorf("prune call batch ids: %w", err)
	}
	var total int64
	for {
		n, err := s.db.Exec(ctx, s.q.PruneCalls, millis(before), pruneChunk)
		total += n
		if err != nil {
			return total, fmt.Errorf("prune calls before %s: %w", before.UTC().Format(time.RFC3339), err)
		}
		if n < int64(pruneChunk) {
			return total, nil
		}
	}
}
