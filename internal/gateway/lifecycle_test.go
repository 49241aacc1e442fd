package gateway

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

// countingStore counts the call log prunes that reach the store.
type countingStore struct {
	store.Store
	prunes atomic.Int64
}

func (s *countingStore) PruneCalls(ctx context.Context, before time.Time) (int64, error) {
	s.prunes.Add(1)
	return s.Store.PruneCalls(ctx, before)
}

func openStore(t *testing.T) *countingStore {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "spacefix.db"))
	if err != nil {
		t.Fatal(err)
	}
	return &countingStore{Store: st}
}

// A zero Config is the documented defaults, not an error.
func TestConfigZero(t *testing.T) {
	g, err := New(Config{}, openStore(t))
	if err != nil {
		t.Fatalf("New(Config{}) = %v, want the documented defaults", err)
	}
	defer g.Close()
	want := DefaultConfig()
	got := g.cfg
	if got.Addr != want.Addr || got.ShutdownGrace != want.ShutdownGrace || got.Heartbeat != want.Heartbeat ||
		got.Grace != want.Grace || got.LogRetention != want.LogRetention || got.SessionIdle != want.SessionIdle ||
		got.KeepAlive != want.KeepAlive || got.MaxConns != want.MaxConns || got.MaxSessionsPerKey != want.MaxSessionsPerKey ||
		got.MaxInFlightPerKey != want.MaxInFlightPerKey || got.BodyTimeout != want.BodyTimeout ||
		got.WriteTimeout != want.WriteTimeout || got.IdleTimeout != want.IdleTimeout || got.Version != want.Version ||
		got.Logger == nil {
		t.Errorf("New(Config{}) config = %+v, want the defaults %+v", got, want)
	}
	if g.Addr() != "127.0.0.1:8080" {
		t.Errorf("Addr() = %q, want 127.0.0.1:8080", g.Addr())
	}
	// Defaults do not hide a wrong value.
	st := openStore(t)
	defer st.Close()
	if _, err := New(Config{ShutdownGrace: -time.Second}, st); err == nil ||
		err.Error() != "config: shutdown grace -1s must not be negative" {
		t.Errorf("New(negative grace) = %v", err)
	}
}

// New starts no background work: a gateway built and closed without Start
// never prunes the call log; one that was started does.
func TestConfigZeroPrunesOnlyAfterStart(t *testing.T) {
	st := openStore(t)
	g, err := New(Config{}, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if n := st.prunes.Load(); n != 0 {
		t.Errorf("New then Close pruned the call log %d times, want 0 (pruning starts in Start)", n)
	}

	st = openStore(t)
	g, err = New(Config{Addr: "127.0.0.1:0"}, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil { // waits for the pruner, which prunes first thing
		t.Fatal(err)
	}
	if n := st.prunes.Load(); n != 1 {
		t.Errorf("Start then Close pruned the call log %d times, want 1", n)
	}
}

// A Start that fails stops what it had started (here the metrics
// listener, opened before the main one) and says what failed; Close then
// still closes the store.
func TestStartRollsBack(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := free.Addr().String()
	free.Close()

	st := openStore(t)
	g, err := New(Config{Addr: busy.Addr().String(), MetricsAddr: metricsAddr}, st)
	if err != nil {
		t.Fatal(err)
	}
	err = g.Start()
	if want := "listen on " + busy.Addr().String() + ": "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Start on a busy address = %v, want an error starting %q", err, want)
	}
	if ln, err := net.Listen("tcp", metricsAddr); err != nil {
		t.Errorf("the metrics listener is still open after Start failed: %v", err)
	} else {
		ln.Close()
	}
	if err := g.Close(); err != nil {
		t.Errorf("Close after a failed Start: %v", err)
	}
	if _, err := st.Projects(context.Background()); err == nil {
		t.Error("the store is still open after Close")
	}
}
