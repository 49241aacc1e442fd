package gateway

import (
	"context"
	"sync"
	"testing"

	"github.com/spacefix/spacefix/internal/store"
)

// Replicas starting at once on an empty store: one of them bootstraps, and
// none fails to start because another created the project first.
func TestBootstrapRace(t *testing.T) {
	for range 10 {
		st := openStore(t)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			first int
		)
		for range 4 {
			wg.Go(func() {
				f, err := Bootstrap(context.Background(), st)
				if err != nil {
					t.Errorf("Bootstrap: %v", err)
				}
				mu.Lock()
				if f != nil {
					first++
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		if first != 1 {
			t.Fatalf("first starts = %d, want 1", first)
		}
		keys, err := st.Keys(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 2 || keys[0].Kind != store.KindAgent || keys[1].Kind != store.KindClient {
			t.Fatalf("keys after racing first starts: %+v, want one agent and one client key", keys)
		}
		st.Close()
	}
}
