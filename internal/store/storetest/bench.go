package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// BenchKeyByHash looks keys up among 1,000, as every request does on a
// cache miss, serially and from parallel goroutines. s must be empty.
func BenchKeyByHash(b *testing.B, s store.Store) {
	ctx := context.Background()
	p, err := s.CreateProject(ctx, "orders")
	if err != nil {
		b.Fatal(err)
	}
	const n = 1000
	hashes := make([][]byte, n)
	for i := range hashes {
		id := fmt.Sprintf("key_%04d", i)
		hashes[i] = hash(id)
		k := store.Key{ID: id, ProjectID: p.ID, Kind: store.KindClient, Tools: []string{"search_orders", "get_order"}}
		if _, err := s.CreateKey(ctx, k, hashes[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("serial", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, err := s.KeyByHash(ctx, hashes[i%n]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := s.KeyByHash(ctx, hashes[i%n]); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
	})
}

// BenchAppendCalls writes batches of 256 records, the call log's default
// batch size, half of them billable, and reports records/s.
func BenchAppendCalls(b *testing.B, s store.Store) {
	ctx := context.Background()
	const batch = 256
	calls := make([]store.Call, batch)
	start := time.Now()
	for i := range calls {
		calls[i] = store.Call{
			Time: start, ProjectID: 1, Kind: "tool", Name: fmt.Sprintf("tool_%d", i%8),
			KeyID: "key_client", Agent: "key_agent", Replica: "rep_1", Duration: 1500 * time.Microsecond,
			Outcome: store.OutcomeOK, Progress: []string{"fetching", "done"}, Billable: i%2 == 0,
		}
	}
	for b.Loop() {
		if err := s.AppendCalls(ctx, calls); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
}
