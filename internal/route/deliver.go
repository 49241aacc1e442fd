package route

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
)

// Target picks, from a snapshot, the replicas that can serve a call and until
// when the thing called stays listed without any (its grace period). ok is
// false when the snapshot does not offer it at all.
type Target func(s *agents.Snapshot) (reps []*agents.Replica, graceUntil time.Time, ok bool)

// Request is one call to deliver.
type Request struct {
	Kind     string // agentproto.KindTool, KindResource or KindPrompt
	Name     string // as the agent registered it (a URI for a resource)
	Args     json.RawMessage
	Caller   agentproto.Caller
	Wait     time.Duration // how long the caller waits for the result
	Instance string        // if set, only replicas of this instance serve
	// Progress, if set, receives the call's progress lines, at most
	// [agentproto.MaxProgressPerSec] a second, each cut to 200 characters.
	// It runs on the caller's goroutine.
	Progress func(line string)
}

// Result is how a call ended, from the gateway's side.
type Result struct {
	Outcome
	ID       string
	Replica  *agents.Replica // nil if no replica was reached
	Progress []string        // the lines passed on, for the call log
	// NotFound: the target is not offered (any more).
	NotFound bool
	// NoReplica: it is offered, but no replica could take the call in time.
	NoReplica bool
	// TimedOut: the wait expired; Cancelled: the caller gave up.
	TimedOut  bool
	Cancelled bool
}

// Reached reports whether the call reached an agent (and so is billable).
func (r *Result) Reached() bool { return r.Replica != nil }

var (
	idPrefix = "c-" + rand.Text()[:8] + "-"
	idSeq    atomic.Uint64
	rrSeq    atomic.Uint64
)

// Deliver sends req to one replica chosen by target from reg's snapshot of
// the project, at most once, and waits for the outcome, the wait, or ctx.
// While the target is in its grace period with no replica, it waits for one
// to come back, within the wait.
func Deliver(ctx context.Context, reg *agents.Registry, projectID int64, target Target, req Request) Result {
	start := time.Now()
	timer := time.NewTimer(req.Wait)
	defer timer.Stop()
	res := Result{ID: idPrefix + strconv.FormatUint(idSeq.Add(1), 36)}

	rep, stop := pick(ctx, reg, projectID, target, req.Instance, timer.C, &res)
	if stop {
		return res
	}
	conn := rep.Conn.(*Conn)
	rep.Begin()
	defer rep.End()
	deadline := start.Add(req.Wait)
	p, err := conn.Start(ctx, &agentproto.Message{
		Type: agentproto.TypeCall, ID: res.ID, Kind: req.Kind, Name: req.Name, Args: req.Args,
		// Rounded up, so an agent never gives up before the gateway does.
		Deadline: deadline.Add(time.Millisecond - 1).UnixMilli(), Caller: &req.Caller,
	})
	res.Replica = rep
	if err != nil {
		res.Disconnected = true
		return res
	}

	var th throttle
	for {
		select {
		case out := <-p.Result:
			if !time.Now().Before(deadline) {
				// The handler saw the same deadline and answered at it
				// (typically with its context's error): the wait is over all
				// the same, and the caller is told so.
				res.TimedOut = true
				return res
			}
			res.Outcome = out
			return res
		case line := <-p.Progress:
			if l, ok := th.admit(line, time.Now()); ok {
				res.Progress = deliverLine(req.Progress, res.Progress, l)
			}
		case <-th.flush():
			res.Progress = deliverLine(req.Progress, res.Progress, th.take(time.Now()))
		case <-timer.C:
			conn.Cancel(res.ID, agentproto.ReasonTimeout)
			res.TimedOut = true
			return res
		case <-ctx.Done():
			conn.Cancel(res.ID, agentproto.ReasonCancelled)
			res.Cancelled = true
			return res
		}
	}
}

// pick chooses a replica, waiting through a grace period if need be. stop is
// true when res already says how the call ended.
func pick(ctx context.Context, reg *agents.Registry, projectID int64, target Target, instance string, expired <-chan time.Time, res *Result) (_ *agents.Replica, stop bool) {
	for {
		snap := reg.Snapshot(projectID)
		reps, graceUntil, ok := target(snap)
		if !ok {
			res.NotFound = true
			return nil, true
		}
		if rep := choose(reps, instance); rep != nil {
			return rep, false
		}
		wait := time.Until(graceUntil)
		if graceUntil.IsZero() || wait <= 0 {
			res.NoReplica = true
			return nil, true
		}
		graceOver := time.NewTimer(wait)
		select {
		case <-snap.Changed:
		case <-graceOver.C:
		case <-expired:
			graceOver.Stop()
			res.TimedOut = true
			return nil, true
		case <-ctx.Done():
			graceOver.Stop()
			res.Cancelled = true
			return nil, true
		}
		graceOver.Stop()
	}
}

// choose returns the replica with the fewest calls in flight, rotating among
// equals so that load spreads; nil if none qualifies.
func choose(reps []*agents.Replica, instance string) *agents.Replica {
	n := len(reps)
	if n == 0 {
		return nil
	}
	off := int(rrSeq.Add(1) % uint64(n))
	var best *agents.Replica
	for i := range n {
		r := reps[(off+i)%n]
		if instance != "" && r.Instance != instance {
			continue
		}
		if best == nil || r.Inflight() < best.Inflight() {
			best = r
		}
	}
	return best
}

const maxLoggedProgress = 100

func deliverLine(fn func(string), logged []string, line string) []string {
	if fn != nil {
		fn(line)
	}
	if len(logged) < maxLoggedProgress {
		logged = append(logged, line)
	}
	return logged
}

// throttle passes at most MaxProgressPerSec lines in any second; a line that
// comes too soon is held, and a newer one replaces it ("the latest wins").
type throttle struct {
	sent  [agentproto.MaxProgressPerSec]time.Time // ring of the last send times
	next  int
	held  string
	has   bool
	timer *time.Timer
}

func (t *throttle) admit(line string, now time.Time) (string, bool) {
	line = cut(line)
	oldest := t.sent[t.next]
	if oldest.IsZero() || now.Sub(oldest) >= time.Second {
		t.record(now)
		return line, true
	}
	t.held, t.has = line, true
	if t.timer == nil {
		t.timer = time.NewTimer(oldest.Add(time.Second).Sub(now))
	}
	return "", false
}

// flush is the channel that fires when a held line may go; nil when none is
// held.
func (t *throttle) flush() <-chan time.Time {
	if t.timer == nil {
		return nil
	}
	return t.timer.C
}

func (t *throttle) take(now time.Time) string {
	t.timer = nil
	line := t.held
	t.held, t.has = "", false
	t.record(now)
	return line
}

func (t *throttle) record(now time.Time) {
	t.sent[t.next] = now
	t.next = (t.next + 1) % len(t.sent)
}

// cut shortens a progress line to MaxProgressLen characters.
func cut(s string) string {
	if utf8.RuneCountInString(s) <= agentproto.MaxProgressLen {
		return s
	}
	r := []rune(s)
	return string(r[:agentproto.MaxProgressLen])
}
