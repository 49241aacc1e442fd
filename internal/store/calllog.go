package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// CallLogOptions configure a [CallLog]. The zero value of each field means
// the default given in its comment.
type CallLogOptions struct {
	// BatchSize is the most records one AppendCalls writes; 0 means 256.
	BatchSize int
	// FlushInterval is the longest a record waits in memory before it is
	// written; 0 means 250ms.
	FlushInterval time.Duration
	// QueueSize is how many records may wait for the writer; once it is
	// full, Add drops records. 0 means 8192.
	QueueSize int
	// BufferSize is how many records the writer keeps, beyond the queue,
	// while the store refuses writes: it retries them, and once it holds
	// this many it takes no more from the queue, which fills, and Add
	// drops. 0 means 32768 (about 16 MB of typical records).
	BufferSize int
	// Logger receives warnings about failed writes and lost records; nil
	// means slog.Default().
	Logger *slog.Logger
	// Observe, if not nil, sees every record passed to Add, written or
	// not, before Add returns (metrics count calls with it). It must be
	// quick and safe for concurrent use.
	Observe func(Call)
}

// Timing of the call log. A failed write is retried after retryMin,
// doubling up to retryMax, until it succeeds; writes that keep failing for
// failingGrace make [Health.Failing] true (a restart of the store that
// takes a second or two should not turn every gateway unready at once).
const (
	warnEvery    = 10 * time.Second
	retryMin     = 100 * time.Millisecond
	retryMax     = 5 * time.Second
	failingGrace = 5 * time.Second
)

// CallLog writes call log records to a [CallWriter] in batches, off the request
// path: [CallLog.Add] only queues a record, and a background goroutine
// writes what is queued every FlushInterval or every BatchSize records,
// whichever comes first.
//
// A batch whose write fails is kept and written again, after 100 ms
// doubling up to 5 s, until the store takes it; records added meanwhile
// wait behind it, up to BufferSize of them plus the queue. Each batch
// carries an id ([WithCallBatch]) with which the store writes it at most
// once, so a write whose outcome was unknown (the connection dropped
// during the commit) is never stored twice.
//
// Records are lost, and counted by [CallLog.Dropped], only when the queue
// is full (the store refused writes long enough to fill the buffer, or
// writes too slowly) or when Close gives up on a store that does not take
// them: the log must never slow calls down or hold memory without bound
// while the store is unwell.
//
// Every method is safe for concurrent use.
type CallLog struct {
	s      CallWriter
	opts   CallLogOptions
	prefix string // of batch ids: unique to this log

	queue   chan Call
	flushes chan chan error // Flush requests; the reply is the write's error
	stop    chan struct{}   // closed by Close
	done    chan struct{}   // closed when the goroutine has returned

	ctx    context.Context // for writes; cancelled when Close gives up
	cancel context.CancelFunc

	mu       sync.RWMutex // Add holds it for reading; Close sets closed under it
	closed   bool
	stopOnce sync.Once
	closeErr error // the final write's error; read after done

	dropped  atomic.Int64
	held     atomic.Int64 // records the writer holds: gathered or kept to retry
	retries  atomic.Int64 // writes that repeated a failed one
	failing  atomic.Bool  // the latest write failed
	lossSaid atomic.Bool  // the ERROR for this failure's losses was logged
	dropWarn rateLimit

	healthMu sync.Mutex
	health   Health
}

// Health is what a [CallLog] has lost so far and whether its writes work.
type Health struct {
	// Dropped is how many records have been lost since the log started.
	Dropped int64
	// Since is when the first record was lost; zero while none was.
	Since time.Time
	// Reason says why the latest records were lost.
	Reason string
	// LastFailure is when a write last failed; zero if none did.
	LastFailure time.Time
	// LastWrite is when a write last succeeded; zero if none did.
	LastWrite time.Time
	// FailingSince is when the writes that fail now began to fail; zero
	// while writes work.
	FailingSince time.Time
	// LastError says why the latest failed write failed.
	LastError string
	// Waiting is how many records wait to be written again after a failed
	// write (at the time of the latest write).
	Waiting int64
}

// Failing reports whether writes have failed for a while: the latest write
// failed, none succeeded since, the failure is less than window old (while
// no record waits, nothing is retried and nothing could show that the
// store recovered), and writes have been failing for at least a few
// seconds (a short blip, retried at once, is not a failure).
func (h Health) Failing(now time.Time, window time.Duration) bool {
	return !h.LastFailure.IsZero() && h.LastFailure.After(h.LastWrite) && now.Sub(h.LastFailure) < window &&
		now.Sub(h.FailingSince) >= failingGrace
}

// Problem says, for people, why the log is failing: since when, how many
// records wait and how many were lost, and the latest error.
func (h Health) Problem() string {
	s := fmt.Sprintf("call records are not being written since %s (%d waiting to be retried, %d lost",
		h.FailingSince.UTC().Format(time.RFC3339), h.Waiting, h.Dropped)
	if h.LastError != "" {
		s += ": " + h.LastError
	}
	return s + ")"
}

// NewCallLog starts a call log writing to s. Call [CallLog.Close] to stop it.
func NewCallLog(s CallWriter, opts *CallLogOptions) *CallLog {
	if s == nil {
		panic("store: NewCallLog with a nil CallWriter")
	}
	var o CallLogOptions
	if opts != nil {
		o = *opts
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 256
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 250 * time.Millisecond
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 8192
	}
	if o.BufferSize <= 0 {
		o.BufferSize = 32768
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	l := &CallLog{
		s:       s,
		opts:    o,
		prefix:  hex.EncodeToString(randomBytes(8)) + "-",
		queue:   make(chan Call, o.QueueSize),
		flushes: make(chan chan error),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	go l.run()
	return l
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand since Go 1.24)
	return b
}

// Add queues c to be written. It never blocks: when the queue is full, or
// the log is closed, the record is dropped and counted.
func (l *CallLog) Add(c Call) {
	// The read lock makes Close wait for Adds in progress, so that no
	// record lands in the queue after the final drain.
	if l.opts.Observe != nil {
		l.opts.Observe(c)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		l.drop(1, "the call log was closed: the gateway is shutting down")
		return
	}
	select {
	case l.queue <- c:
	default:
		if l.failing.Load() {
			l.drop(1, "the store does not take writes and the buffer is full")
		} else {
			l.drop(1, "queue full: the store writes too slowly")
		}
	}
}

// drop counts n lost records and says why: at ERROR once while writes
// fail (the recovery line says how many went in all), else at WARN at
// most once per warnEvery; every line carries the running count.
func (l *CallLog) drop(n int, reason string) {
	now := time.Now()
	total := l.dropped.Add(int64(n))
	l.healthMu.Lock()
	if l.health.Since.IsZero() {
		l.health.Since = now
	}
	l.health.Dropped = total
	l.health.Reason = reason
	lastErr := l.health.LastError
	l.healthMu.Unlock()
	if l.failing.Load() {
		if l.lossSaid.CompareAndSwap(false, true) {
			l.opts.Logger.Error("call log records lost: "+reason+"; more are lost until the store takes writes again",
				"droppedTotal", total, "buffered", l.Buffered(), "err", lastErr)
		}
		return
	}
	if l.dropWarn.allow(now) {
		l.opts.Logger.Warn("call log records lost: "+reason, "droppedTotal", total, "queueSize", l.opts.QueueSize)
	}
}

// logTotal says, when the log stops, how many records were lost in all:
// the rate-limited lines before may not have carried the final count.
func (l *CallLog) logTotal() {
	h := l.Health()
	if h.Dropped > 0 {
		l.opts.Logger.Warn("call log stopped; records were lost while it ran", "droppedTotal", h.Dropped, "since", h.Since, "reason", h.Reason)
	}
}

// Dropped returns how many records have been lost so far.
func (l *CallLog) Dropped() int64 { return l.dropped.Load() }

// Buffered returns how many records are in memory, not yet written:
// queued, gathered into a batch, or kept to be written again.
func (l *CallLog) Buffered() int64 { return int64(len(l.queue)) + l.held.Load() }

// Retries returns how many writes repeated a failed one.
func (l *CallLog) Retries() int64 { return l.retries.Load() }

// Health returns what the log has lost so far and when writes last failed
// and succeeded.
func (l *CallLog) Health() Health {
	l.healthMu.Lock()
	defer l.healthMu.Unlock()
	return l.health
}

// Flush writes, now, every record added before it was called and not
// written yet (records kept after a failed write first, without waiting
// for their retry), and returns the write's error, or ctx's error if ctx
// ends first. Records that could not be written are kept and retried as
// usual. After Close it returns nil: Close has done what it could.
func (l *CallLog) Flush(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case l.flushes <- reply:
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close writes what is queued and stops the log. While the store refuses
// the writes they are retried until ctx ends; then the write in progress
// is abandoned, the rest is lost (and logged at ERROR), and Close returns
// ctx's error. It is safe to call twice; later calls wait like the first
// and return the error of the final write.
func (l *CallLog) Close(ctx context.Context) error {
	l.stopOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		close(l.stop)
	})
	select {
	case <-l.done:
		return l.closeErr
	case <-ctx.Done():
		l.cancel()
		<-l.done
		return ctx.Err()
	}
}

// batch is records written together, under one id.
type batch struct {
	id    string
	calls []Call
	tries int
}

// writer is the state of the writer goroutine.
type writer struct {
	l       *CallLog
	seq     int64
	cur     []Call  // gathered, not yet sealed into a batch
	pending []batch // sealed, oldest first; the first failed if backoff > 0
	backoff time.Duration
	flush   *time.Timer // FlushInterval after the first record of cur
	retry   *time.Timer // backoff after a failed write
}

// run is the writer goroutine.
func (l *CallLog) run() {
	defer close(l.done)
	defer l.cancel()
	w := &writer{l: l, flush: time.NewTimer(time.Hour), retry: time.NewTimer(time.Hour)}
	w.flush.Stop()
	w.retry.Stop()
	defer w.flush.Stop()
	defer w.retry.Stop()
	for {
		in := l.queue
		if int(l.held.Load()) >= l.opts.BufferSize {
			in = nil // the queue fills, and Add drops
		}
		select {
		case c := <-in:
			w.add(c)
		case <-w.flush.C:
			w.seal()
			w.write(false)
		case <-w.retry.C:
			w.write(true)
		case reply := <-l.flushes:
			w.take(len(l.queue), false)
			reply <- w.write(true)
		case <-l.stop:
			l.closeErr = w.finish()
			l.logTotal()
			return
		}
	}
}

// add gathers c, sealing and writing the batch once it is full.
func (w *writer) add(c Call) {
	if len(w.cur) == 0 {
		w.flush.Reset(w.l.opts.FlushInterval)
	}
	w.cur = append(w.cur, c)
	w.l.held.Add(1)
	if len(w.cur) == w.l.opts.BatchSize {
		w.seal()
		w.write(false)
	}
}

// take gathers up to n queued records, sealing full batches; unless all,
// it stops at the buffer's bound.
func (w *writer) take(n int, all bool) {
	for range n {
		if !all && int(w.l.held.Load()) >= w.l.opts.BufferSize {
			break
		}
		w.cur = append(w.cur, <-w.l.queue)
		w.l.held.Add(1)
		if len(w.cur) == w.l.opts.BatchSize {
			w.seal()
		}
	}
	w.seal()
}

// seal makes the gathered records a batch with an id of its own.
func (w *writer) seal() {
	w.flush.Stop()
	if len(w.cur) == 0 {
		return
	}
	w.seq++
	w.pending = append(w.pending, batch{id: w.l.prefix + strconv.FormatInt(w.seq, 10), calls: w.cur})
	w.cur = make([]Call, 0, w.l.opts.BatchSize)
}

// write writes the pending batches, oldest first, and returns the first
// error. While a failed write waits for its retry, it writes nothing
// unless now is set.
func (w *writer) write(now bool) error {
	if w.backoff > 0 && !now {
		return nil
	}
	for len(w.pending) > 0 {
		b := &w.pending[0]
		if b.tries > 0 {
			w.l.retries.Add(1)
		}
		b.tries++
		if err := w.l.s.AppendCalls(WithCallBatch(w.l.ctx, b.id), b.calls); err != nil {
			w.failed(err)
			return err
		}
		w.l.held.Add(-int64(len(b.calls)))
		w.pending[0] = batch{}
		w.pending = w.pending[1:]
		w.succeeded()
	}
	return nil
}

// waiting counts the records in pending batches.
func (w *writer) waiting() int64 {
	var n int
	for _, b := range w.pending {
		n += len(b.calls)
	}
	return int64(n)
}

// failed notes a failed write and schedules its retry.
func (w *writer) failed(err error) {
	l := w.l
	now := time.Now()
	first := w.backoff == 0
	if first {
		w.backoff = retryMin
	} else {
		w.backoff = min(2*w.backoff, retryMax)
	}
	w.retry.Reset(w.backoff)
	l.failing.Store(true)
	waiting := w.waiting()
	l.healthMu.Lock()
	if first {
		l.health.FailingSince = now
	}
	l.health.LastFailure = now
	l.health.LastError = err.Error()
	l.health.Waiting = waiting
	l.healthMu.Unlock()
	if first && !errors.Is(err, context.Canceled) {
		l.opts.Logger.Warn("call log write failed; the records are kept and the write retried",
			"records", waiting, "err", err)
	}
}

// succeeded notes a good write, and says so once writes that failed work
// again.
func (w *writer) succeeded() {
	l := w.l
	now := time.Now()
	waiting := w.waiting()
	l.healthMu.Lock()
	since := l.health.FailingSince
	l.health.LastWrite = now
	l.health.FailingSince = time.Time{}
	l.health.Waiting = waiting
	total := l.health.Dropped
	l.healthMu.Unlock()
	if w.backoff == 0 {
		return
	}
	w.backoff = 0
	w.retry.Stop()
	l.failing.Store(false)
	l.lossSaid.Store(false)
	l.opts.Logger.Info("call log writes work again", "failedFor", now.Sub(since).Round(time.Millisecond),
		"retries", l.retries.Load(), "droppedTotal", total)
}

// finish writes everything queued, retrying until the store takes it or
// Close gives up, and returns the last write's error.
func (w *writer) finish() error {
	l := w.l
	w.take(len(l.queue), true) // closed: nothing more comes
	for {
		err := w.write(true)
		if err == nil {
			return nil
		}
		select {
		case <-w.retry.C:
		case <-l.ctx.Done():
		}
		if l.ctx.Err() != nil {
			n := w.waiting()
			l.held.Add(-n)
			total := l.dropped.Add(n)
			l.healthMu.Lock()
			if l.health.Since.IsZero() {
				l.health.Since = time.Now()
			}
			l.health.Dropped = total
			l.health.Reason = "the gateway stopped while the store refused writes"
			l.healthMu.Unlock()
			l.opts.Logger.Error("call log stopped before the store took its records; they are lost",
				"records", n, "droppedTotal", total, "err", err)
			return err
		}
	}
}

// rateLimit lets one event through per warnEvery.
type rateLimit struct{ last atomic.Int64 } // UnixNano of the last event let through; 0: none yet

func (r *rateLimit) allow(now time.Time) bool {
	last := r.last.Load()
	if last != 0 && now.UnixNano()-last < int64(warnEvery) {
		return false
	}
	return r.last.CompareAndSwap(last, now.UnixNano())
}

// CallBatchKeep is how long a store remembers the id of a batch it wrote.
const CallBatchKeep = 24 * time.Hour

type callBatchKey struct{}

// WithCallBatch returns ctx carrying id, the identity of a batch of call
// records. A store's AppendCalls writes a batch with a given id at most
// once: a write retried after an error whose outcome is unknown (the
// connection dropped while the transaction committed) succeeds without
// storing the records again. Ids must be unique across gateways; a store
// may forget an id [CallBatchKeep] after its write.
func WithCallBatch(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callBatchKey{}, id)
}

// CallBatch returns the batch id ctx carries, or "".
func CallBatch(ctx context.Context) string {
	id, _ := ctx.Value(callBatchKey{}).(string)
	return id
}
