package store_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

// recorder is a SQLite store that records the size of every AppendCalls
// batch and can hold writes at a gate or fail them.
type recorder struct {
	store.Store
	gate chan struct{} // if not nil, AppendCalls waits for it to close
	fail error         // if not nil, AppendCalls returns it

	mu      sync.Mutex
	batches []int
}

func (r *recorder) AppendCalls(ctx context.Context, calls []store.Call) error {
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	r.batches = append(r.batches, len(calls))
	r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	return r.Store.AppendCalls(ctx, calls)
}

func (r *recorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.batches...)
}

func openStore(t *testing.T) *recorder {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "spacefix.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &recorder{Store: s}
}

// count returns how many records the store holds.
func count(t *testing.T, s store.Store) int {
	t.Helper()
	cs, err := s.Calls(context.Background(), store.CallFilter{Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return len(cs)
}

func call(i int) store.Call {
	return store.Call{
		Time: time.Unix(int64(i), 0), ProjectID: 1, Kind: "tool", Name: "search_orders",
		Outcome: store.OutcomeOK, Billable: true,
	}
}

// checkGoroutines fails the test if it ends with more goroutines than it
// started with.
func checkGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		var now int
		for range 100 {
			if now = runtime.NumGoroutine(); now <= before {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines before, %d after:\n%s", before, now, buf[:runtime.Stack(buf, true)])
	})
}

// logBuffer is a logger whose output the test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

func TestCallLogWritesEverything(t *testing.T) {
	checkGoroutines(t)
	s := openStore(t)
	l := NewCallLogT(t, s, &store.CallLogOptions{BatchSize: 64})
	const writers, each = 4, 500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				l.Add(call(w*each + i))
			}
		})
	}
	wg.Wait()
	if err := l.Flush(t.Context()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if n := count(t, s); n != writers*each {
		t.Errorf("after Flush the store holds %d records, want %d", n, writers*each)
	}
	for _, n := range s.sizes() {
		if n > 64 {
			t.Errorf("a batch of %d records, want at most 64", n)
		}
	}
	if err := l.Close(t.Context()); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := l.Dropped(); d != 0 {
		t.Errorf("Dropped = %d, want 0", d)
	}
}

// NewCallLogT starts a call log that the test closes at its end.
func NewCallLogT(t *testing.T, s store.Store, opts *store.CallLogOptions) *store.CallLog {
	l := store.NewCallLog(s, opts)
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

func TestCallLogCloseWritesQueue(t *testing.T) {
	checkGoroutines(t)
	s := openStore(t)
	l := store.NewCallLog(s, &store.CallLogOptions{FlushInterval: time.Hour})
	for i := range 300 {
		l.Add(call(i))
	}
	if err := l.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := count(t, s); n != 300 {
		t.Errorf("after Close the store holds %d records, want 300", n)
	}
	if err := l.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := l.Flush(t.Context()); err != nil {
		t.Errorf("Flush after Close: %v", err)
	}
	l.Add(call(1))
	if d := l.Dropped(); d != 1 {
		t.Errorf("Dropped after an Add after Close = %d, want 1", d)
	}
	if n := count(t, s); n != 300 {
		t.Errorf("an Add after Close reached the store")
	}
}

func TestCallLogTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := openStore(t)
		l := store.NewCallLog(s, &store.CallLogOptions{BatchSize: 10, FlushInterval: 250 * time.Millisecond})
		defer l.Close(context.Background())

		// A record waits at most FlushInterval from when it was added.
		l.Add(call(1))
		time.Sleep(100 * time.Millisecond)
		l.Add(call(2))
		time.Sleep(149 * time.Millisecond)
		synctest.Wait()
		if got := s.sizes(); len(got) != 0 {
			t.Fatalf("batches before the interval: %v, want none", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if diff := cmp.Diff([]int{2}, s.sizes()); diff != "" {
			t.Fatalf("batches after the interval (-want +got):\n%s", diff)
		}

		// A full batch goes at once; the rest waits for the interval.
		for i := range 13 {
			l.Add(call(i))
		}
		synctest.Wait()
		if diff := cmp.Diff([]int{2, 10}, s.sizes()); diff != "" {
			t.Fatalf("batches right after a full batch (-want +got):\n%s", diff)
		}
		time.Sleep(250 * time.Millisecond)
		synctest.Wait()
		if diff := cmp.Diff([]int{2, 10, 3}, s.sizes()); diff != "" {
			t.Fatalf("batches an interval later (-want +got):\n%s", diff)
		}

		// Nothing queued, nothing written.
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(s.sizes()); n != 3 {
			t.Errorf("%d batches after an idle second, want 3", n)
		}
		if n := count(t, s); n != 15 {
			t.Errorf("store holds %d records, want 15", n)
		}
	})
}

func TestCallLogDropsWhenFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := openStore(t)
		s.gate = make(chan struct{})
		var logs logBuffer
		l := store.NewCallLog(s, &store.CallLogOptions{BatchSize: 1, QueueSize: 4, Logger: logs.logger()})

		l.Add(call(0)) // taken by the writer, which waits at the gate
		synctest.Wait()
		for i := range 4 { // fill the queue
			l.Add(call(1 + i))
		}
		start := time.Now()
		for i := range 3 {
			l.Add(call(5 + i))
		}
		if d := l.Dropped(); d != 3 {
			t.Errorf("Dropped = %d, want 3", d)
		}
		if n := logs.count("queue full"); n != 1 {
			t.Errorf("%d warnings for 3 drops at once, want 1", n)
		}
		time.Sleep(warnEvery - time.Millisecond)
		l.Add(call(8))
		if n := logs.count("queue full"); n != 1 {
			t.Errorf("%d warnings within %v, want 1", n, time.Since(start))
		}
		time.Sleep(time.Millisecond)
		l.Add(call(9))
		if n := logs.count("queue full"); n != 2 {
			t.Errorf("%d warnings after %v, want 2", n, time.Since(start))
		}

		close(s.gate)
		if err := l.Close(t.Context()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if d := l.Dropped(); d != 5 {
			t.Errorf("Dropped = %d, want 5", d)
		}
		if n := count(t, s); n != 5 {
			t.Errorf("store holds %d records, want the 5 that fitted", n)
		}
	})
}

// warnEvery mirrors the call log's rate limit for warnings.
const warnEvery = 10 * time.Second

func TestCallLogWriteError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := openStore(t)
		s.fail = errors.New("disk on fire")
		var logs logBuffer
		l := store.NewCallLog(s, &store.CallLogOptions{BatchSize: 5, Logger: logs.logger()})
		for i := range 12 {
			l.Add(call(i))
		}
		err := l.Flush(t.Context())
		if !errors.Is(err, s.fail) {
			t.Errorf("Flush: %v, want %v", err, s.fail)
		}
		if d := l.Dropped(); d != 12 {
			t.Errorf("Dropped = %d, want 12", d)
		}
		if n := logs.count("write failed"); n != 1 {
			t.Errorf("%d errors logged for 3 failed writes at once, want 1", n)
		}
		s.fail = nil
		l.Add(call(1))
		if err := l.Close(t.Context()); err != nil {
			t.Errorf("Close once the store works: %v", err)
		}
		if n := count(t, s); n != 1 {
			t.Errorf("store holds %d records, want 1", n)
		}
	})
}

func TestCallLogCloseGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := openStore(t)
		s.gate = make(chan struct{}) // never opens: the store hangs
		l := store.NewCallLog(s, &store.CallLogOptions{Logger: slog.New(slog.DiscardHandler)})
		for i := range 3 {
			l.Add(call(i))
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := l.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Flush on a hung store: %v, want DeadlineExceeded", err)
		}
		ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := l.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close on a hung store: %v, want DeadlineExceeded", err)
		}
		if d := l.Dropped(); d != 3 {
			t.Errorf("Dropped = %d, want 3", d)
		}
		// synctest.Test fails if the writer goroutine outlives this.
	})
}

func TestCallLogDefaults(t *testing.T) {
	checkGoroutines(t)
	s := openStore(t)
	opts := &store.CallLogOptions{}
	l := store.NewCallLog(s, opts)
	defer l.Close(t.Context())
	if opts.BatchSize != 0 || opts.FlushInterval != 0 || opts.QueueSize != 0 || opts.Logger != nil || opts.Observe != nil {
		t.Errorf("NewCallLog changed the caller's options to %+v", *opts)
	}
	for i := range 300 {
		l.Add(call(i))
	}
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, n := range s.sizes() {
		if n > 256 {
			t.Errorf("batch of %d with the default BatchSize, want at most 256", n)
		}
	}
}

// TestDroppedHealth: a store that refuses writes loses every record, and
// Health, the log and Observe say so; the first good write ends the failure.
func TestDroppedHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := openStore(t)
		s.fail = errors.New("disk full")
		var logs logBuffer
		var observed atomic.Int64
		l := store.NewCallLog(s, &store.CallLogOptions{
			BatchSize: 4, Logger: logs.logger(),
			Observe: func(store.Call) { observed.Add(1) },
		})
		start := time.Now()
		if h := l.Health(); h != (store.Health{}) {
			t.Errorf("Health before any write = %+v, want zero", h)
		}
		for i := range 10 {
			l.Add(call(i))
		}
		l.Flush(t.Context())
		time.Sleep(warnEvery)
		for i := range 3 {
			l.Add(call(10 + i))
		}
		l.Flush(t.Context())

		h := l.Health()
		want := store.Health{Dropped: 13, Since: start, Reason: "writing to the store failed: disk full", LastFailure: time.Now()}
		if diff := cmp.Diff(want, h); diff != "" {
			t.Errorf("Health (-want +got):\n%s", diff)
		}
		if !h.Failing(time.Now(), time.Minute) {
			t.Error("Failing = false while every write fails")
		}
		if h.Failing(time.Now().Add(time.Minute), time.Minute) {
			t.Error("Failing = true a minute after the last failure")
		}
		if n := logs.count("droppedTotal=13"); n != 1 {
			t.Errorf("%d log lines carry the running total 13, want 1:\n%s", n, logs.buf.String())
		}
		if n := observed.Load(); n != 13 {
			t.Errorf("Observe saw %d records, want 13", n)
		}

		s.fail = nil
		l.Add(call(20))
		if err := l.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if h := l.Health(); h.Failing(time.Now(), time.Minute) || h.Dropped != 13 {
			t.Errorf("after a good write: Failing = %v, Dropped = %d; want false, 13", h.Failing(time.Now(), time.Minute), h.Dropped)
		}
		if n := logs.count("call log writes work again"); n != 1 {
			t.Errorf("%d recovery lines, want 1", n)
		}
		l.Close(t.Context())
		if n := logs.count("call log stopped; records were lost while it ran\" droppedTotal=13"); n != 1 {
			t.Errorf("%d final lines with the total, want 1:\n%s", n, logs.buf.String())
		}
	})
}
