package store

import (
	"context"
	"errors"
	"log/slog"
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
	// QueueSize is how many records may wait to be written; once it is
	// full, Add drops records. 0 means 8192.
	QueueSize int
	// Logger receives warnings about dropped records and failed writes;
	// nil means slog.Default().
	Logger *slog.Logger
	// Observe, if not nil, sees every record passed to Add, written or
	// not, before Add returns (metrics count calls with it). It must be
	// quick and safe for concurrent use.
	Observe func(Call)
}

// warnEvery is the least time between two warnings of one kind.
const warnEvery = 10 * time.Second

// CallLog writes call log records to a [Store] in batches, off the request
// path: [CallLog.Add] only queues a record, and a background goroutine
// writes what is queued every FlushInterval or every BatchSize records,
// whichever comes first.
//
// Records are lost, and counted by [CallLog.Dropped], when the queue is full
// or a write fails: the log must never slow calls down or hold memory
// without bound while the store is unwell.
//
// Every method is safe for concurrent use.
type CallLog struct {
	s    Store
	opts CallLogOptions

	queue   chan Call
	flushes chan chan error // Flush requests; the reply is the first write error
	stop    chan struct{}   // closed by Close
	done    chan struct{}   // closed when the goroutine has returned

	ctx    context.Context // for writes; cancelled when Close gives up
	cancel context.CancelFunc

	mu       sync.RWMutex // Add holds it for reading; Close sets closed under it
	closed   bool
	stopOnce sync.Once
	closeErr error // the final flush's error; read after done

	dropped   atomic.Int64
	dropWarn  rateLimit
	writeWarn rateLimit

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
}

// Failing reports whether the latest write failed, no later write
// succeeded, and the failure is less than window old (while no calls come,
// nothing is written and nothing can show that the store recovered).
func (h Health) Failing(now time.Time, window time.Duration) bool {
	return !h.LastFailure.IsZero() && h.LastFailure.After(h.LastWrite) && now.Sub(h.LastFailure) < window
}

// NewCallLog starts a call log writing to s. Call [CallLog.Close] to stop it.
func NewCallLog(s Store, opts *CallLogOptions) *CallLog {
	if s == nil {
		panic("store: NewCallLog with a nil Store")
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
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	l := &CallLog{
		s:       s,
		opts:    o,
		queue:   make(chan Call, o.QueueSize),
		flushes: make(chan chan error),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	go l.run()
	return l
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
		l.drop(1, "the call log was closed: the gateway is shutting down", nil)
		return
	}
	select {
	case l.queue <- c:
	default:
		l.drop(1, "queue full: the store writes too slowly", nil)
	}
}

// drop counts n lost records and says why, in the log at most once per
// warnEvery; every line carries the running count, so the last line
// before a quiet spell says how many were lost in all.
func (l *CallLog) drop(n int, reason string, err error) {
	now := time.Now()
	total := l.dropped.Add(int64(n))
	l.healthMu.Lock()
	if l.health.Since.IsZero() {
		l.health.Since = now
	}
	l.health.Dropped = total
	l.health.Reason = reason
	if err != nil {
		l.health.Reason = reason + ": " + err.Error()
		l.health.LastFailure = now
	}
	l.healthMu.Unlock()
	if err != nil {
		if l.writeWarn.allow(now) && !errors.Is(err, context.Canceled) {
			l.opts.Logger.Error("call log write failed; records lost", "records", n, "droppedTotal", total, "err", err)
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

// Dropped returns how many records have been lost so far: dropped by Add
// or lost in a failed write.
func (l *CallLog) Dropped() int64 { return l.dropped.Load() }

// Health returns what the log has lost so far and when writes last failed
// and succeeded.
func (l *CallLog) Health() Health {
	l.healthMu.Lock()
	defer l.healthMu.Unlock()
	return l.health
}

// Flush writes every record added before it was called and not written
// yet, and returns the first error of those writes (earlier background
// failures are only logged and counted), or ctx's error if ctx ends first. After Close
// it returns nil: Close has written everything.
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

// Close writes what is queued and stops the log. If ctx ends first, the
// write in progress is abandoned, the rest is lost, and Close returns ctx's
// error. It is safe to call twice; later calls wait like the first and
// return the error of the final write.
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

// run is the writer goroutine: it owns the batch.
func (l *CallLog) run() {
	defer close(l.done)
	defer l.cancel()
	batch := make([]Call, 0, l.opts.BatchSize)
	timer := time.NewTimer(l.opts.FlushInterval)
	timer.Stop()
	for {
		select {
		case c := <-l.queue:
			if len(batch) == 0 {
				timer.Reset(l.opts.FlushInterval)
			}
			batch = append(batch, c)
			if len(batch) == l.opts.BatchSize {
				l.write(batch)
				batch = batch[:0]
				timer.Stop()
			}
		case <-timer.C:
			l.write(batch)
			batch = batch[:0]
		case reply := <-l.flushes:
			reply <- l.drain(batch)
			batch = batch[:0]
			timer.Stop()
		case <-l.stop:
			timer.Stop()
			l.closeErr = l.drain(batch)
			l.logTotal()
			return
		}
	}
}

// drain writes batch and everything queued now, and returns the first
// error. Records added while it runs may or may not be included.
func (l *CallLog) drain(batch []Call) error {
	var first error
	for n := len(l.queue); ; n-- {
		if len(batch) == l.opts.BatchSize || (n <= 0 && len(batch) > 0) {
			if err := l.write(batch); first == nil {
				first = err
			}
			batch = batch[:0]
		}
		if n <= 0 {
			return first
		}
		batch = append(batch, <-l.queue)
	}
}

// write writes batch; a failed batch is counted as dropped and logged.
func (l *CallLog) write(batch []Call) error {
	if len(batch) == 0 {
		return nil
	}
	err := l.s.AppendCalls(l.ctx, batch)
	if err != nil {
		l.drop(len(batch), "writing to the store failed", err)
		return err
	}
	l.healthMu.Lock()
	recovered := l.health.LastFailure.After(l.health.LastWrite)
	l.health.LastWrite = time.Now()
	total := l.health.Dropped
	l.healthMu.Unlock()
	if recovered {
		l.opts.Logger.Info("call log writes work again", "droppedTotal", total)
	}
	return nil
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
