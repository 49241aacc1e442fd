package route

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/textfmt"
)

// Target picks, from a snapshot, the replicas that can serve a call and until
// when the thing called stays listed without any (its grace period). ok is
// false when the snapshot does not offer it at all.
type Target func(s *agents.Snapshot) (reps []*agents.Replica, graceUntil time.Time, ok bool)

// Request is one call to deliver.
type Request struct {
	Kind string // agentproto.KindTool, KindResource or KindPrompt
	Name string // as the agent registered it (a URI for a resource)
	// Exposed is the name the client calls it by, for the messages in
	// [Result.Detail]; "" means Name.
	Exposed  string
	Args     json.RawMessage
	Caller   agentproto.Caller
	Wait     time.Duration // how long the caller waits for the result
	Instance string        // if set, only replicas of this instance serve
	// RetryOf and RetryReason, for a repeat of a request id whose earlier
	// call's outcome is unknown, go on the call message as they are
	// (agentproto.Message.RetryOf).
	RetryOf, RetryReason string
	// Progress, if set, receives the call's progress lines in [Deliver], at
	// most [agentproto.MaxProgressPerSec] a second, each cut to 200
	// characters, on the caller's goroutine. With [Start], pass it to
	// [Call.Wait] instead: a call resumed by another request reports to that
	// request's client.
	Progress func(line string)
	// Tracer, if set, traces the call with a route span (see trace.go);
	// nil makes no span.
	Tracer trace.Tracer
	// Identity, if set, returns the identity token of the call with id
	// callID, which the gateway waits for until deadline: [Call.Send] puts
	// it in Caller.IdentityToken. Nil sends none (the agent key asked for
	// none).
	Identity func(callID string, deadline time.Time) string
}

// Result is how a call ended, from the gateway's side: one [Outcome] and
// its detail — or, with Question set, that it waits for the user.
type Result struct {
	Outcome Outcome
	// Result is the agent's result, when Outcome is OK.
	Result json.RawMessage
	// Detail is the message the client reads: the handler's message
	// (ToolError), or the gateway's words for TimedOut, Disconnected and
	// NoReplica. "" otherwise.
	Detail string
	// Code, when Outcome is ToolError, is set when the agent ended the
	// call with a protocol error: the JSON-RPC error code the client gets
	// instead of an isError result (agentproto.ClientErrorCode applied),
	// with Detail as its message and Data, any JSON, as its data.
	Code     int
	Data     json.RawMessage
	ID       string
	Wait     time.Duration   // how long the caller waits in all
	Replica  *agents.Replica // nil if no replica was reached
	Progress []string        // the lines passed on, for the call log
	// Question, when set, is the agent asking the user to confirm something
	// (confirm) or the client for input (ask): the call is still running;
	// answer with [Call.Answer] or [Call.Respond], then Wait again.
	Question *agentproto.Message
}

// Reached reports whether the call reached an agent (and so is billable).
func (r *Result) Reached() bool { return r.Replica != nil }

var (
	idPrefix = "c-" + rand.Text()[:8] + "-"
	idSeq    atomic.Uint64
	rrSeq    atomic.Uint64
)

// Call is one call delivered to a replica and not yet over. Wait may be
// called again after it returned a Question; Call is not safe for
// concurrent use.
type Call struct {
	req      Request
	res      Result
	conn     agents.Conn
	p        *agents.Pending
	deadline time.Time
	timer    *time.Timer
	th       throttle
	over     bool
	sent     int        // progress lines passed to a progress func, over every Wait
	span     trace.Span // nil when not traced
	// OnLog, when set, receives the agent's log messages for the client
	// while Wait runs; without it they are dropped.
	OnLog func(agentproto.Message)
	// OnProgress, when set, also receives each progress line Wait passes
	// on (after the throttle), on Wait's goroutine: for a client that
	// waits on a call someone else waits for (a job's first answer).
	OnProgress func(string)
}

// Deliver sends req to one replica and waits for how it ends; see [Start].
func Deliver(ctx context.Context, reg *agents.Registry, projectID int64, target Target, req Request) Result {
	c, res := Start(ctx, reg, projectID, target, req)
	if c == nil {
		return res
	}
	return c.Wait(ctx, req.Progress)
}

// Start sends req to one replica chosen by target from reg's snapshot of
// the project, at most once: [Pick], then [Call.Send]. If the call could not
// be delivered, Start returns a nil Call and how it ended.
func Start(ctx context.Context, reg *agents.Registry, projectID int64, target Target, req Request) (*Call, Result) {
	c, res := Pick(ctx, reg, projectID, target, req)
	if c == nil {
		return nil, res
	}
	return c.Send(ctx)
}

// Pick chooses the replica that will serve req, from reg's snapshot of the
// project; the call's wait starts now. While the target is in its grace
// period with no replica, it waits for one to come back, within the wait.
// The call is not sent yet: check it against [Call.Replica] (its schema),
// then [Call.Send] it or [Call.Release] it. If no replica could be picked,
// Pick returns a nil Call and how it ended.
func Pick(ctx context.Context, reg *agents.Registry, projectID int64, target Target, req Request) (*Call, Result) {
	start := time.Now()
	c := &Call{req: req, deadline: start.Add(req.Wait), timer: time.NewTimer(req.Wait)}
	c.res.ID = idPrefix + strconv.FormatUint(idSeq.Add(1), 36)
	c.res.Wait = req.Wait
	ctx = c.startSpan(ctx, &req)

	rep, stop := c.pick(ctx, reg, projectID, target)
	if stop {
		c.timer.Stop()
		c.endSpan()
		return nil, c.res
	}
	c.conn = rep.Conn
	rep.Begin() // counted from now, so that concurrent picks spread
	c.res.Replica = rep
	return c, c.res
}

// Replica returns the replica the call goes to.
func (c *Call) Replica() *agents.Replica { return c.res.Replica }

// Send delivers a picked call to its replica. If it could not be sent, Send
// returns a nil Call and how it ended (disconnected).
func (c *Call) Send(ctx context.Context) (*Call, Result) {
	if c.req.Identity != nil {
		c.req.Caller.IdentityToken = c.req.Identity(c.res.ID, c.deadline)
	}
	m := &agentproto.Message{
		Type: agentproto.TypeCall, ID: c.res.ID, Kind: c.req.Kind, Name: c.req.Name, Args: c.req.Args,
		// Rounded up, so an agent never gives up before the gateway does.
		Deadline: c.deadline.Add(time.Millisecond - 1).UnixMilli(), Caller: &c.req.Caller,
		RetryOf: c.req.RetryOf, RetryReason: c.req.RetryReason,
	}
	if c.span != nil {
		ctx = trace.ContextWithSpan(ctx, c.span)
	}
	injectTrace(ctx, m)
	p, err := c.conn.Start(ctx, m)
	if err != nil {
		// The connection's queue stayed full until the wait's end or the
		// caller left (a replica that reads nothing), or it has ended.
		switch {
		case errors.Is(err, ErrDisconnected):
			c.end(Disconnected, MsgDisconnected)
		case ctx.Err() != nil:
			c.end(Cancelled, "")
		default:
			c.end(TimedOut, c.timedOut())
		}
		c.finish()
		return nil, c.res
	}
	c.p = p
	return c, c.res
}

// Release gives up a picked call that was never sent (its arguments were
// refused, or the cache answered): the replica is not counted as reached.
func (c *Call) Release() {
	if c.over || c.p != nil {
		return
	}
	c.finish()
	c.res.Replica = nil
}

// SetUpstreamToken puts the person's upstream token in the caller of a
// picked call, not yet sent (agentproto.Caller.UpstreamToken): a bridged
// per-person remote's check, made once the replica is known.
func (c *Call) SetUpstreamToken(token string) { c.req.Caller.UpstreamToken = token }

// SetArgs replaces a picked call's arguments before it is sent (an
// interceptor of the project's policy rewrote them, and they were
// validated again).
func (c *Call) SetArgs(args json.RawMessage) { c.req.Args = args }

// UpstreamToken returns the token [Call.SetUpstreamToken] set, "" if none.
func (c *Call) UpstreamToken() string { return c.req.Caller.UpstreamToken }

// MarkRetry makes a picked call, not yet sent, a retry of call of, whose
// outcome is unknown for reason ([Request.RetryOf]).
func (c *Call) MarkRetry(of, reason string) { c.req.RetryOf, c.req.RetryReason = of, reason }

// ID returns the call id.
func (c *Call) ID() string { return c.res.ID }

// ProgressSent returns how many progress lines the call has passed to the
// progress funcs of its waits so far: a call resumed after a question goes
// on numbering its client's progress notifications from there (MCP: the
// progress value increases with each notification).
func (c *Call) ProgressSent() int { return c.sent }

// Deadline returns when the gateway stops waiting for the call.
func (c *Call) Deadline() time.Time { return c.deadline }

// Wait waits for the outcome, the wait's end, ctx, or a question from the
// agent. progress (may be nil) receives the progress lines meanwhile.
func (c *Call) Wait(ctx context.Context, progress func(string)) Result {
	c.res.Question = nil
	for {
		select {
		case out := <-c.p.Result:
			c.drainEvents(progress)
			switch {
			case !time.Now().Before(c.deadline):
				// The handler saw the same deadline and answered at it
				// (typically with its context's error): the wait is over all
				// the same, and the caller is told so.
				c.end(TimedOut, c.timedOut())
			case out.Disconnected:
				c.end(Disconnected, MsgDisconnected)
			case out.Err != "":
				c.end(ToolError, out.Err)
				c.res.Code, c.res.Data = out.Code, out.Data
			default:
				c.end(OK, "")
				c.res.Result = out.Result
			}
			return c.finish()
		case q := <-c.p.Confirm:
			// Lines the agent sent before it asked go first, as before a
			// result: the question may end the call.
			c.drainEvents(progress)
			c.res.Question = q
			return c.res
		case ev := <-c.p.Events:
			c.event(ev, progress)
		case <-c.th.flush():
			c.deliverLine(progress, c.th.take(time.Now()))
		case <-c.timer.C:
			return c.Abandon(agentproto.ReasonTimeout)
		case <-ctx.Done():
			return c.Abandon(agentproto.ReasonCancelled)
		}
	}
}

// event passes on a progress line (through the throttle) or a log message.
func (c *Call) event(ev agents.Event, progress func(string)) {
	if ev.Log != nil {
		if c.OnLog != nil {
			c.OnLog(*ev.Log)
		}
		return
	}
	if l, ok := c.th.admit(ev.Line, time.Now()); ok {
		c.deliverLine(progress, l)
	}
}

// drainEvents passes on the lines and log messages that arrived before
// the result or a question, in their order: the agent sent them first, so
// the client sees them first. A line the throttle still holds goes too,
// just before the result: the latest line wins, and whether it was held a
// moment longer must not decide whether it is seen.
func (c *Call) drainEvents(progress func(string)) {
	for {
		select {
		case ev := <-c.p.Events:
			c.event(ev, progress)
		default:
			if c.th.timer != nil {
				c.th.timer.Stop()
				c.deliverLine(progress, c.th.take(time.Now()))
			}
			return
		}
	}
}

// Answer gives the agent the user's answer to question input; a non-nil
// noAnswer says why there is none, in words the agent's developer reads.
func (c *Call) Answer(input string, accepted bool, noAnswer error) {
	m := &agentproto.Message{Type: agentproto.TypeConfirmed, ID: c.res.ID, Input: input}
	if noAnswer != nil {
		m.Message = noAnswer.Error()
	} else {
		m.Accepted = &accepted
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.conn.Send(ctx, m)
}

// Respond gives the agent the client's responses to its ask (JSON by
// input request id), or, with responses nil, why there are none: msg, and a
// JSON-RPC code when there is one.
func (c *Call) Respond(responses json.RawMessage, msg string, code int) {
	m := &agentproto.Message{Type: agentproto.TypeAnswered, ID: c.res.ID, Responses: responses}
	if responses == nil {
		m.Message, m.Code = msg, code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.conn.Send(ctx, m)
}

// Note adds a line to what the call log keeps of the call beside its
// progress (what the agent asked the client, for instance).
func (c *Call) Note(line string) { c.res.Progress = append(c.res.Progress, line) }

// Abandon gives up on the call — the wait expired (reason timeout) or the
// caller left (cancelled) — tells the agent, and returns how it ended.
func (c *Call) Abandon(reason string) Result {
	if c.over {
		return c.res
	}
	c.conn.Cancel(c.res.ID, reason)
	if reason == agentproto.ReasonTimeout {
		c.end(TimedOut, c.timedOut())
	} else {
		c.end(Cancelled, "")
	}
	return c.finish()
}

// end sets how the call ended.
func (c *Call) end(o Outcome, detail string) {
	c.res.Outcome, c.res.Detail = o, detail
}

func (c *Call) timedOut() string { return timedOut(c.req.Kind, c.req.exposed(), c.req.Wait) }

func (r *Request) exposed() string {
	if r.Exposed != "" {
		return r.Exposed
	}
	return r.Name
}

func (c *Call) finish() Result {
	if !c.over {
		c.over = true
		c.timer.Stop()
		c.res.Replica.End()
		c.endSpan()
	}
	c.res.Question = nil
	return c.res
}

// pick chooses a replica, waiting through a grace period if need be. stop is
// true when c.res already says how the call ended.
func (c *Call) pick(ctx context.Context, reg *agents.Registry, projectID int64, target Target) (_ *agents.Replica, stop bool) {
	for {
		snap := reg.Snapshot(projectID)
		reps, graceUntil, ok := target(snap)
		if !ok {
			c.end(NotFound, "")
			return nil, true
		}
		if rep := choose(reps, c.req.Instance); rep != nil {
			return rep, false
		}
		wait := time.Until(graceUntil)
		if graceUntil.IsZero() || wait <= 0 {
			c.end(NoReplica, noReplica(c.req.exposed()))
			return nil, true
		}
		graceOver := time.NewTimer(wait)
		select {
		case <-snap.Changed:
		case <-graceOver.C:
		case <-c.timer.C:
			graceOver.Stop()
			c.end(TimedOut, c.timedOut())
			return nil, true
		case <-ctx.Done():
			graceOver.Stop()
			c.end(Cancelled, "")
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

// deliverLine passes line to fn, if any, and keeps it for the call log.
func (c *Call) deliverLine(fn func(string), line string) {
	if fn != nil {
		fn(line)
		c.sent++
	}
	if c.OnProgress != nil {
		c.OnProgress(line)
	}
	if len(c.res.Progress) < maxLoggedProgress {
		c.res.Progress = append(c.res.Progress, line)
	}
}

// throttle passes at most MaxProgressPerSec lines in any second; a line that
// comes too soon is held, and a newer one replaces it ("the latest wins").
type throttle struct {
	sent  [agentproto.MaxProgressPerSec]time.Time // ring of the last send times
	next  int
	held  string
	timer *time.Timer
}

func (t *throttle) admit(line string, now time.Time) (string, bool) {
	line = textfmt.Cut(line, agentproto.MaxProgressLen)
	oldest := t.sent[t.next]
	if oldest.IsZero() || now.Sub(oldest) >= time.Second {
		t.record(now)
		return line, true
	}
	t.held = line
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
	t.held = ""
	t.record(now)
	return line
}

func (t *throttle) record(now time.Time) {
	t.sent[t.next] = now
	t.next = (t.next + 1) % len(t.sent)
}
