package bridge

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// What the bridge logs of one source a server controls (its stderr, its
// log messages): a burst of logBurst lines, then logRate a second. A
// child that writes faster has the rest dropped and counted, in one line
// a second at most: a flooding child cannot fill the disk or keep the
// bridge busy formatting records.
const (
	logBurst = 200
	logRate  = 50
)

// logLimiter is a token bucket over one source's log lines. Lines over
// the rate are dropped and counted; the count is logged as one line
// ("dropped N lines from …") within dropReport of the first drop, and at
// close.
type logLimiter struct {
	log  *slog.Logger
	what string // "fx's stderr", "fx's log messages"

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int
	timer   *time.Timer // reports the count; nil when none is due
	closed  bool
	now     func() time.Time
	delay   time.Duration // dropReport; longer in tests
}

// dropReport is how long after the first dropped line its count is logged.
const dropReport = time.Second

func newLogLimiter(log *slog.Logger, what string) *logLimiter {
	return &logLimiter{log: log, what: what, tokens: logBurst, last: time.Now(), now: time.Now, delay: dropReport}
}

// allow reports whether one more line may be logged now; when not, the
// line is counted as dropped.
func (l *logLimiter) allow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.tokens = min(logBurst, l.tokens+now.Sub(l.last).Seconds()*logRate)
	l.last = now
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	l.dropped++
	if l.timer == nil && !l.closed {
		l.timer = time.AfterFunc(l.delay, l.report)
	}
	return false
}

// report logs the count of dropped lines, if any.
func (l *logLimiter) report() {
	l.mu.Lock()
	n := l.dropped
	l.dropped, l.timer = 0, nil
	l.mu.Unlock()
	if n > 0 {
		l.log.Warn(fmt.Sprintf("bridge: dropped %d lines from %s: it writes faster than the bridge logs (%d lines a second)", n, l.what, logRate), "dropped", n)
	}
}

// close reports what is left to report; later drops are counted no more.
func (l *logLimiter) close() {
	l.mu.Lock()
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
	l.report()
}
