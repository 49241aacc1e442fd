// Package ratelimit limits how many calls one key makes per minute.
//
// The window slides: a key with a limit of N may make N calls in any 60
// seconds, never more, and a refused call is told exactly when the oldest
// call in the window leaves it. Each key costs memory for its calls in the
// last minute (8 bytes each), so keys that stopped calling are forgotten.
package ratelimit

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// Window is the span a limit counts calls over.
const Window = time.Minute

// forgetEvery is how often Allow drops keys with no call in the window.
const forgetEvery = time.Minute

// Limiter counts calls per key. Its methods are safe for concurrent use.
// The zero value is not usable; call [New].
type Limiter struct {
	mu         sync.Mutex
	keys       map[string]*log
	lastForget time.Time
	// fresh are the calls allowed here since the last Fresh, by key, while
	// the limiter is shared with other gateways (see Share).
	fresh map[string][]time.Time
}

// log holds the start times of a key's calls in the window, oldest first.
type log struct{ calls []time.Time }

// New returns a limiter with no calls counted.
func New() *Limiter {
	return &Limiter{keys: make(map[string]*log), lastForget: time.Now()}
}

// Allow counts a call by keyID and reports whether it is within perMinute
// calls in the last [Window]. A refused call is not counted; retryAfter is
// how long until a call would be allowed. perMinute ≤ 0 means no limit.
func (l *Limiter) Allow(keyID string, perMinute int) (ok bool, retryAfter time.Duration) {
	if perMinute <= 0 {
		return true, 0
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastForget) >= forgetEvery {
		l.forgetLocked(now)
	}
	lg := l.keys[keyID]
	if lg == nil {
		lg = &log{}
		l.keys[keyID] = lg
	}
	lg.trim(now)
	if n := len(lg.calls); n >= perMinute {
		// The call that must leave the window first for one more to fit.
		return false, lg.calls[n-perMinute].Add(Window).Sub(now)
	}
	lg.calls = append(lg.calls, now)
	if l.fresh != nil {
		l.fresh[keyID] = append(l.fresh[keyID], now)
	}
	return true, 0
}

// Share makes the limiter keep the calls it allows for [Limiter.Fresh], so
// that gateways sharing a store count each other's calls: a key's limit
// then holds across them, give or take the calls made between two
// exchanges.
func (l *Limiter) Share() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fresh == nil {
		l.fresh = make(map[string][]time.Time)
	}
}

// Fresh returns the calls allowed here since the last Fresh, by key, and
// forgets them; nil when there were none.
func (l *Limiter) Fresh() map[string][]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.fresh) == 0 {
		return nil
	}
	f := l.fresh
	l.fresh = make(map[string][]time.Time)
	return f
}

// Merge counts calls another gateway allowed for keyID: later calls here
// see them in the window.
func (l *Limiter) Merge(keyID string, calls []time.Time) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	lg := l.keys[keyID]
	if lg == nil {
		lg = &log{}
		l.keys[keyID] = lg
	}
	for _, c := range calls {
		if now.Before(c.Add(Window)) {
			lg.calls = append(lg.calls, c)
		}
	}
	slices.SortFunc(lg.calls, time.Time.Compare)
}

// trim drops calls that left the window.
func (lg *log) trim(now time.Time) {
	i := 0
	for i < len(lg.calls) && !now.Before(lg.calls[i].Add(Window)) {
		i++
	}
	// Reslicing is amortised O(1): append copies only the live calls
	// when it outgrows the array.
	lg.calls = lg.calls[i:]
}

func (l *Limiter) forgetLocked(now time.Time) {
	l.lastForget = now
	for id, lg := range l.keys {
		if lg.trim(now); len(lg.calls) == 0 {
			delete(l.keys, id)
		}
	}
}

// Message is what a refused caller reads:
// "Rate limit exceeded: this key may make N calls per minute. Try again in S seconds."
// S is retryAfter rounded up to a whole second, at least 1; "call" and
// "second" are singular for 1.
func Message(perMinute int, retryAfter time.Duration) string {
	s := Seconds(retryAfter)
	return fmt.Sprintf("Rate limit exceeded: this key may make %d %s per minute. Try again in %d %s.",
		perMinute, plural(perMinute, "call"), s, plural(s, "second"))
}

// Seconds is retryAfter in whole seconds, rounded up, at least 1: what a
// Retry-After header or a message says.
func Seconds(retryAfter time.Duration) int {
	return max(1, int(math.Ceil(retryAfter.Seconds())))
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
