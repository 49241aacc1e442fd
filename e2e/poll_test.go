package e2e

import (
	"fmt"
	"testing"
	"time"
)

// Waiting in the end-to-end suite: every wait for something the gateway,
// an agent or a child process does in its own time goes through poll (or
// waitFor, poll for a condition), so that each is bounded and, when it
// gives up, says what it waited for and what it saw last. Waits on a
// channel (a call's answer, a process's exit) select with a bound instead.

// waitWithin is how long a wait lasts when the caller gives no bound.
const waitWithin = 10 * time.Second

// poll calls probe until it reports done and returns the value it saw then.
// Past within (waitWithin when zero) it fails tb: "gave up after 10s
// waiting for <what>; last seen: <the last value>". It probes at once, then
// every 10 ms (every 100 ms for a wait over 30 s: a child process, npm, a
// container, whose probes cost more than a look at memory).
func poll[T any](tb testing.TB, what string, within time.Duration, probe func() (T, bool)) T {
	tb.Helper()
	if within <= 0 {
		within = waitWithin
	}
	deadline := time.Now().Add(within)
	every := 10 * time.Millisecond
	if within > 30*time.Second {
		every = 100 * time.Millisecond
	}
	for {
		v, ok := probe()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			tb.Fatalf("gave up after %v waiting for %s; last seen: %s", within, what, seen(v))
		}
		time.Sleep(every) // the poll interval, bounded by the deadline
	}
}

// waitFor polls cond until it holds, failing tb after waitWithin.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	poll(tb, what, 0, func() (notYet, bool) { return notYet{}, cond() })
}

// notYet is what waitFor saw last: its condition, false.
type notYet struct{}

func (notYet) String() string { return "the condition still false" }

// seen renders a probe's last value for the failure message.
func seen(v any) string {
	switch v := v.(type) {
	case fmt.Stringer:
		return v.String()
	case error:
		return v.Error()
	case string:
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%+v", v)
}

// attempt is a probe's last outcome when it is an error or some output:
// "output (err)".
type attempt struct {
	out string
	err error
}

func (a attempt) String() string {
	if a.err != nil {
		return fmt.Sprintf("%q (%v)", a.out, a.err)
	}
	return fmt.Sprintf("%q", a.out)
}
