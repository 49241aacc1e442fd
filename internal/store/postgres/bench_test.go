package postgres_test

import (
	"testing"

	"github.com/spacefix/spacefix/internal/store/storetest"
	"github.com/spacefix/spacefix/internal/testenv"
)

// BenchmarkKeyByHash: see storetest.BenchKeyByHash.
func BenchmarkKeyByHash(b *testing.B) {
	storetest.BenchKeyByHash(b, openB(b, testenv.Postgres(b)))
}

// BenchmarkAppendCalls: see storetest.BenchAppendCalls (COPY, one usage
// upsert per batch).
func BenchmarkAppendCalls(b *testing.B) {
	storetest.BenchAppendCalls(b, openB(b, testenv.Postgres(b)))
}
