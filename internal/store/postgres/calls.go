package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
	"github.com/spacefix/spacefix/internal/store/sqlstore"
)

var insertCallBatch = sqlshared.Numbered(sqlstore.InsertCallBatch)

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
	for i, c := range calls {
		var err error
		if rows[i], err = sqlstore.AppendCallArgs(make([]any, 0, len(sqlstore.CallColumns)), c); err != nil {
			return fmt.Errorf("append %d calls: %w", len(calls), err)
		}
	}
	counts := sqlstore.UsageCounts(calls)
	// Replicas upsert counters at the same time: in one order, so that
	// two batches never wait on each other's rows in a cycle.
	keys := make([]sqlstore.UsageKey, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b sqlstore.UsageKey) int {
		return cmp.Or(cmp.Compare(a.Project, b.Project), cmp.Compare(a.Day, b.Day),
			cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	var (
		projects, days, ns []int64
		kinds, names       []string
	)
	for _, k := range keys {
		projects, days, kinds, names = append(projects, k.Project), append(days, k.Day), append(kinds, k.Kind), append(names, k.Name)
		ns = append(ns, counts[k])
	}
	batch := store.CallBatch(ctx)
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if batch != "" {
			tag, err := tx.Exec(ctx, insertCallBatch, batch, millis(now()))
			if err != nil || tag.RowsAffected() == 0 {
				return err // nil: written before
			}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"calls"}, sqlstore.CallColumns, pgx.CopyFromRows(rows)); err != nil {
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
