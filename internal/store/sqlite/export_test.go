package sqlite

import "github.com/spacefix/spacefix/internal/store/sqlstore"

// SetPruneChunk sets how many rows one prune transaction deletes, so tests
// can cross chunk boundaries without writing thousands of rows.
func SetPruneChunk(n int) (restore func()) { return sqlstore.SetPruneChunk(n) }
