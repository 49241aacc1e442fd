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

// flaky is a SQLite store whose AppendCalls fails while told to: the edge
// the call log writes to, failing as PostgreSQL does when it restarts.
type flaky struct {
	store.Store

	mu       sync.Mutex
	failures int            // how many more writes fail
	forever  bool           // every write fails
	commit   bool           // a failing write commits first (the reply was lost)
	attempts []attempt      // every write, in order
	err      error          // what a failing write returns
	started  time.Time      // for attempt times
	written  map[string]int // records stored, by batch id
}

type attempt struct {
	at    time.Duration // since started
	batch string
	n     int
	ok    bool
}

var errRestart = errors.New("FATAL: terminating connection due to administrator command (SQLSTATE 57P01)")

func newFlaky(t *testing.T) *flaky {
	return &flaky{Store: openStore(t).Store, err: errRestart, started: time.Now(), written: map[string]int{}}
}

func (f *flaky) AppendCalls(ctx context.Context, calls []store.Call) error {
	f.mu.Lock()
	fail := f.forever || f.failures > 0
	if f.failures > 0 {
		f.failures--
	}
	f.attempts = append(f.attempts, attempt{time.Since(f.started), store.CallBatch(ctx), len(calls), !fail})
	commit := !fail || f.commit
	f.mu.Unlock()
	if commit {
		if err := f.Store.AppendCalls(ctx, calls); err != nil {
			return err
		}
	}
	if fail {
		return f.err
	}
	return nil
}

func (f *flaky) set(fn func(f *flaky)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *flaky) tries() []attempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]attempt(nil), f.attempts...)
}

// TestCallLogRetriesFailedWrites: a store that refuses writes for a while
// (PostgreSQL restarting) loses no record: the failed batch is written
// again after 100 ms, 200 ms, 400 ms…, records added meanwhile wait behind
// it, the failure is logged once at WARN and the recovery once at INFO,
// and readiness turns failing only once writes have failed for a while.
func TestCallLogRetriesFailedWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFlaky(t)
		s.set(func(f *flaky) { f.failures = 6 })
		var logs logBuffer
		l := store.NewCallLog(s, &store.CallLogOptions{BatchSize: 5, Logger: logs.logger()})
		defer l.Close(context.Background())
		start := time.Now()
		for i := range 5 { // a full batch: written at once, and fails
			l.Add(call(i))
		}
		synctest.Wait()
		for i := range 7 { // waits behind the failed batch
			l.Add(call(5 + i))
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if h := l.Health(); h.Failing(time.Now(), time.Minute) {
			t.Errorf("Failing after 3 s of failed writes, want not yet (a blip): %+v", h)
		}
		if b := l.Buffered(); b != 12 {
			t.Errorf("Buffered = %d while writes fail, want 12", b)
		}
		time.Sleep(3 * time.Second) // 6 failures: 0, .1, .3, .7, 1.5, 3.1 s
		synctest.Wait()
		if h := l.Health(); !h.Failing(time.Now(), time.Minute) {
			t.Errorf("Failing = false after 6 s of failed writes: %+v", h)
		} else if want := "call records are not being written since " + start.UTC().Format(time.RFC3339) +
			" (12 waiting to be retried, 0 lost: " + errRestart.Error() + ")"; h.Problem() != want {
			t.Errorf("Problem() = %q, want %q", h.Problem(), want)
		}
		time.Sleep(time.Second) // the retry at 6.3 s works
		synctest.Wait()

		var got []time.Duration
		for _, a := range s.tries() {
			got = append(got, a.at.Round(time.Millisecond))
		}
		ms := time.Millisecond
		want := []time.Duration{0, 100 * ms, 300 * ms, 700 * ms, 1500 * ms, 3100 * ms, 6300 * ms, 6300 * ms, 6300 * ms}
		// The last three: the retried batch, then the two that waited
		// behind it (5 records, and 2 sealed at the flush interval).
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("write times (-want +got):\n%s", diff)
		}
		if n := count(t, s); n != 12 {
			t.Errorf("store holds %d records, want 12", n)
		}
		if d, r := l.Dropped(), l.Retries(); d != 0 || r != 6 {
			t.Errorf("Dropped, Retries = %d, %d; want 0, 6", d, r)
		}
		if b := l.Buffered(); b != 0 {
			t.Errorf("Buffered = %d after recovery, want 0", b)
		}
		if h := l.Health(); h.Failing(time.Now(), time.Minute) {
			t.Errorf("Failing after recovery: %+v", h)
		}
		if n := logs.count("level=WARN msg=\"call log write failed; the records are kept and the write retried\""); n != 1 {
			t.Errorf("%d WARN lines for 6 failed writes, want 1:\n%s", n, logs.buf.String())
		}
		if n := logs.count("level=INFO msg=\"call log writes work again\" failedFor=6.3s retries=6 droppedTotal=0"); n != 1 {
			t.Errorf("%d recovery lines, want 1:\n%s", n, logs.buf.String())
		}
		if n := logs.count("level=ERROR"); n != 0 {
			t.Errorf("%d ERROR lines though nothing was lost:\n%s", n, logs.buf.String())
		}
	})
}

// TestCallLogBackoffCapped: retries double from 100 ms and stop doubling
// at 5 s.
func TestCallLogBackoffCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFlaky(t)
		s.set(func(f *flaky) { f.forever = true })
		l := store.NewCallLog(s, &store.CallLogOptions{BatchSize: 1, Logger: slog.New(slog.DiscardHandler)})
		l.Add(call(1))
		time.Sleep(30 * time.Second)
		synctest.Wait()
		var gaps []time.Duration
		tries := s.tries()
		for i := 1; i < len(tries); i++ {
			gaps = append(gaps, (tries[i].at - tries[i-1].at).Round(time.Millisecond))
		}
		ms := time.Millisecond
		want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms, 5000 * ms, 5000 * ms}
		if diff := cmp.Diff(want, gaps); diff != "" {
			t.Errorf("gaps between writes (-want +got):\n%s", diff)
		}
		s.set(func(f *flaky) { f.forever = false })
		if err := l.Close(t.Context()); err != nil {
			t.Errorf("Close once the store works: %v", err)
		}
		if n := count(t, s); n != 1 {
			t.Errorf("store holds %d records, want 1", n)
		}
	})
}

// TestCallLogBufferBound: while the store refuses writes the log holds at
// most BufferSize records plus the queue; beyond that it drops, says so at
// ERROR once per failure (not once per record), and the recovery says how
// many went. A later failure is a new episode with an ERROR of its own.
func TestCallLogBufferBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFlaky(t)
		s.set(func(f *flaky) { f.forever = true })
		var logs logBuffer
		l := store.NewCallLog(s, &store.CallLogOptions{BatchSize: 5, QueueSize: 5, BufferSize: 10, Logger: logs.logger()})
		defer l.Close(context.Background())
		add := func(n int) {
			for i := range n {
				l.Add(call(i))
				synctest.Wait() // the writer takes what it may
			}
		}
		add(30)
		if b, d := l.Buffered(), l.Dropped(); b != 15 || d != 15 {
			t.Errorf("Buffered, Dropped = %d, %d; want 15 (buffer 10 + queue 5), 15", b, d)
		}
		time.Sleep(time.Minute)
		add(2)
		if n := logs.count("level=ERROR msg=\"call log records lost: the store does not take writes and the buffer is full; more are lost until the store takes writes again\" droppedTotal=1 buffered=15"); n != 1 {
			t.Errorf("want one ERROR at the first loss:\n%s", logs.buf.String())
		}
		if n := logs.count("level=ERROR"); n != 1 {
			t.Errorf("%d ERROR lines for 17 lost records in one failure, want 1", n)
		}

		s.set(func(f *flaky) { f.forever = false })
		time.Sleep(5 * time.Second) // the next retry
		synctest.Wait()
		if n := count(t, s); n != 15 {
			t.Errorf("store holds %d records, want the 15 buffered", n)
		}
		if n := logs.count("msg=\"call log writes work again\""); n != 1 || !strings.Contains(logs.buf.String(), "droppedTotal=17") {
			t.Errorf("want one recovery line with droppedTotal=17:\n%s", logs.buf.String())
		}

		s.set(func(f *flaky) { f.forever = true })
		add(30)
		if n := logs.count("level=ERROR"); n != 2 {
			t.Errorf("%d ERROR lines after a second failure with losses, want 2:\n%s", n, logs.buf.String())
		}
		s.set(func(f *flaky) { f.forever = false })
	})
}

// TestCallLogRetryWritesOnce: a write that committed but whose reply was
// lost (the connection dropped during COMMIT) is retried, and the store
// holds each record once.
func TestCallLogRetryWritesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFlaky(t)
		s.set(func(f *flaky) { f.failures, f.commit = 2, true })
		l := store.NewCallLog(s, &store.CallLogOptions{BatchSize: 4, Logger: slog.New(slog.DiscardHandler)})
		for i := range 10 {
			l.Add(call(i))
		}
		if err := l.Close(t.Context()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if n := count(t, s); n != 10 {
			t.Errorf("store holds %d records after retries of committed writes, want 10", n)
		}
		tries := s.tries()
		if len(tries) != 5 || tries[0].batch != tries[1].batch || tries[1].batch != tries[2].batch || tries[2].batch == tries[3].batch {
			t.Errorf("writes %+v; want the first batch three times under one id, then two others", tries)
		}
	})
}

// TestCallLogCloseWhileStoreDown: Close keeps retrying until its context
// ends, then gives up, counts what is lost and says so at ERROR; a store
// that comes back before then gets everything.
func TestCallLogCloseWhileStoreDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFlaky(t)
		s.set(func(f *flaky) { f.forever = true })
		var logs logBuffer
		l := store.NewCallLog(s, &store.CallLogOptions{BatchSize: 4, Logger: logs.logger()})
		for i := range 10 {
			l.Add(call(i))
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		if err := l.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close on a store that stays down: %v, want DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("Close took %v, want its 5 s", d)
		}
		if d, b := l.Dropped(), l.Buffered(); d != 10 || b != 0 {
			t.Errorf("Dropped, Buffered = %d, %d; want 10, 0", d, b)
		}
		if n := logs.count("level=ERROR msg=\"call log stopped before the store took its records; they are lost\" records=10 droppedTotal=10"); n != 1 {
			t.Errorf("want one ERROR with the loss:\n%s", logs.buf.String())
		}
	})
	synctest.Test(t, func(t *testing.T) {
		s := newFlaky(t)
		s.set(func(f *flaky) { f.failures = 4 }) // 0, .1, .3, .7 s; then works
		l := store.NewCallLog(s, &store.CallLogOptions{BatchSize: 4, Logger: slog.New(slog.DiscardHandler)})
		for i := range 10 {
			l.Add(call(i))
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := l.Close(ctx); err != nil {
			t.Errorf("Close on a store back within its time: %v", err)
		}
		if n := count(t, s); n != 10 || l.Dropped() != 0 {
			t.Errorf("store holds %d records, %d dropped; want 10, 0", n, l.Dropped())
		}
	})
}
