package mcpfront

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spacefix/spacefix/internal/agents"
	sfauth "github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

// New starts nothing and hears of no change; Start subscribes, Close
// unsubscribes, is safe twice, and no Start comes after it.
func TestFrontLifecycle(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	calls := store.NewCallLog(st, nil)
	defer calls.Close(ctx)
	bus := changes.New(nil)
	f := New(Options{Registry: agents.New(&agents.Options{Changes: bus}), Changes: bus, Store: st,
		Verifier: sfauth.NewVerifier(st, 0), CallLog: calls, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	p, err := st.CreateProject(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	key := store.Key{ID: "key_client", ProjectID: p.ID, Kind: store.KindClient}
	revoke := changes.Change{Project: p.ID, Kind: changes.KeyRevoked, Key: key.ID}
	// revoked reports whether a revocation published now drops the key's
	// view, as it does while the endpoint hears of changes.
	revoked := func() bool {
		f.viewFor(key)
		bus.Publish(revoke)
		return f.ViewCount() == 0
	}

	if revoked() {
		t.Error("after New, the endpoint heard of a revoked key; New must not subscribe to changes")
	}
	if err := f.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if !revoked() {
		t.Error("after Start, the endpoint did not hear of a revoked key")
	}
	if err := f.Start(ctx); !errors.Is(err, errStarted) {
		t.Errorf("Start twice = %v, want %v", err, errStarted)
	}
	if err := f.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("Close twice: %v", err)
	}
	if revoked() {
		t.Error("after Close, the endpoint still heard of a revoked key")
	}
	if err := f.Start(ctx); !errors.Is(err, errClosed) {
		t.Errorf("Start after Close = %v, want %v", err, errClosed)
	}
}

// WaitIdle returns the moment the last request in flight ends, not at a
// poll's next tick, and ctx's error when ctx ends first.
func TestWaitIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c inFlight
		if err := c.wait(context.Background()); err != nil {
			t.Fatalf("wait with nothing in flight = %v, want nil at once", err)
		}
		c.add()
		c.add()
		go func() {
			time.Sleep(time.Second)
			c.done()
			time.Sleep(time.Second)
			c.done()
		}()
		start := time.Now()
		if err := c.wait(context.Background()); err != nil {
			t.Fatalf("wait = %v", err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("wait returned %v after it began, want 2s: when the second request ended", d)
		}

		c.add()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start = time.Now()
		if err := c.wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("wait with a request in flight past ctx = %v, want %v", err, context.DeadlineExceeded)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("wait gave up after %v, want 3s: when ctx ended", d)
		}
		c.done()
	})
}
