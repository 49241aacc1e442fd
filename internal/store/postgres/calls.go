package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
	"github.com/spacefix/spacefix/internal/textfmt"
)

// pruneChunk is how many log rows one PruneCalls statement deletes, so a
// large prune never holds locks for long. A variable for tests.
var pruneChunk = 5000

var callColumns = []string{"started_at", "project_id", "kind", "name", "key_id", "agent", "replica",
	"duration_us", "outcome", "error", "progress", "billable", "task_id",
	"call_id", "replay", "retry_of", "policy"}

// usageKey is one usage counter.
type usageKey struct {
	project    int64
	day        int64
	kind, name string
}

// AppendCalls implements [store.Store]: the records go in with one COPY and
// the usage counters with one upsert, in one transaction. Errors longer
// than [store.MaxErrorRunes] characters are cut to that length. A batch
// whose id ([store.CallBatch]) was written before is not written again:
// pgx cannot tell whether a transaction whose connection dropped during
// COMMIT committed, so the id, inserted in the same transaction, says.
func (s *Store) AppendCalls(ctx context.Context, calls []store.Call) error {
	if len(calls) == 0 {
		return nil
	}
	rows := make([][]any, len(calls))
	counts := make(map[usageKey]int64)
	for i, c := range calls {
		progress, err := store.EncodeList(c.Progress)
		if err != nil {
			return fmt.Errorf("append %d calls: %w", len(calls), err)
		}
		clean := store.CleanText
		rows[i] = []any{millis(c.Time), c.ProjectID, clean(c.Kind), clean(c.Name), clean(c.KeyID), clean(c.Agent), clean(c.Replica),
			c.Duration.Microseconds(), clean(c.Outcome), clean(textfmt.Cut(c.Error, store.MaxErrorRunes)), progress, c.Billable, clean(c.TaskID),
			clean(c.CallID), c.Replay, clean(c.RetryOf), clean(c.Policy)}
		if c.Billable {
			counts[usageKey{c.ProjectID, store.DayMillis(c.Time), store.CleanText(c.Kind), store.CleanText(c.Name)}]++
		}
	}
	// Replicas upsert counters at the same time: in one order, so that
	// two batches never wait on each other's rows in a cycle.
	keys := make([]usageKey, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b usageKey) int {
		return cmp.Or(cmp.Compare(a.project, b.project), cmp.Compare(a.day, b.day),
			cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name))
	})
	var (
		projects, days, ns []int64
		kinds, names       []string
	)
	for _, k := range keys {
		projects, days, kinds, names = append(projects, k.project), append(days, k.day), append(kinds, k.kind), append(names, k.name)
		ns = append(ns, counts[k])
	}
	batch := store.CallBatch(ctx)
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if batch != "" {
			tag, err := tx.Exec(ctx, `INSERT INTO call_batches (id, written_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`,
				batch, millis(now()))
			if err != nil || tag.RowsAffected() == 0 {
				return err // nil: written before
			}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"calls"}, callColumns, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		if len(keys) == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, `INSERT INTO usage_daily (project_id, day, kind, name, calls)
SELECT p, d, k, n, c FROM unnest($1::BIGINT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[]) WITH ORDINALITY AS u(p, d, k, n, c, o)
ORDER BY o
ON CONFLICT (project_id, day, kind, name) DO UPDATE SET calls = usage_daily.calls + excluded.calls`,
			projects, days, kinds, names, ns)
		return err
	})
	if err != nil {
		return fmt.Errorf("append %d calls: %w", len(calls), err)
	}
	return nil
}

// Calls implements [store.Store].
func (s *Store) Calls(ctx context.Context, f store.CallFilter) ([]store.Call, error) {
	q, args := sqlshared.CallsQuery(f, sqlshared.Dollar)
	cs, err := list(ctx, s, sqlshared.ScanCall, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list calls: %w", err)
	}
	return cs, nil
}

// Usage implements [store.Store]. A projectID of 0 sums over every project.
func (s *Store) Usage(ctx context.Context, projectID int64, from, to time.Time) ([]store.Usage, error) {
	q, args := `SELECT day, kind, name, SUM(calls)::BIGINT FROM usage_daily WHERE day >= $1 AND day <= $2`, []any{store.DayMillis(from), store.DayMillis(to)}
	if projectID != 0 {
		q += ` AND project_id = $3`
		args = append(args, projectID)
	}
	us, err := list(ctx, s, sqlshared.ScanUsage, q+` GROUP BY day, kind, name ORDER BY day, name, kind`, args...)
	if err != nil {
		return nil, fmt.Errorf("usage of project %d: %w", projectID, err)
	}
	return us, nil
}

// PruneCalls implements [store.Store]. It deletes in chunks of a few
// thousand rows, one statement each, so a large prune holds no lock for
// long.
func (s *Store) PruneCalls(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM calls WHERE id IN
(SELECT id FROM calls WHERE started_at < $1 ORDER BY started_at LIMIT $2)`, millis(before), pruneChunk)
		if err != nil {
			return total, fmt.Errorf("prune calls before %s: %w", before.UTC().Format(time.RFC3339), err)
		}
		n := tag.RowsAffected()
		total += n
		if n < int64(pruneChunk) {
			return total, nil
		}
	}
}
