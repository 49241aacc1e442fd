package sqlite

// SetPruneChunk sets how many rows one prune transaction deletes, so tests
// can cross chunk boundaries without writing thousands of rows.
func SetPruneChunk(n int) (restore func()) {
	old := pruneChunk
	pruneChunk = n
	return func() { pruneChunk = old }
}
