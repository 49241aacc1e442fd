package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// q is the statements the PostgreSQL store shares with the SQLite one,
// their placeholders rewritten as $n once, here.
var q = sqlshared.Q.Numbered()

// projectExists returns [store.ErrNotFound] unless the project exists.
func projectExists(ctx context.Context, tx pgx.Tx, id int64) error {
	var one int
	if err := tx.QueryRow(ctx, q.ProjectExists, id).Scan(&one); err != nil {
		return fmt.Errorf("project %d: %w", id, notFound(err))
	}
	return nil
}
