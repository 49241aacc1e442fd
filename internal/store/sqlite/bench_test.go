package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/spacefix/spacefix/internal/store/storetest"
)

// BenchmarkKeyByHash: see storetest.BenchKeyByHash.
func BenchmarkKeyByHash(b *testing.B) {
	storetest.BenchKeyByHash(b, openTemp(b, filepath.Join(b.TempDir(), "bench.db")))
}

// BenchmarkAppendCalls: see storetest.BenchAppendCalls.
func BenchmarkAppendCalls(b *testing.B) {
	storetest.BenchAppendCalls(b, openTemp(b, filepath.Join(b.TempDir(), "bench.db")))
}
