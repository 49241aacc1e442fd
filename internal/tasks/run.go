package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/textfmt"
)

// Timing of a run's store writes and of its clients' polls.
const (
	// writeGap is the least time between two writes of progress lines.
	writeGap = time.Second
	// pollFast is the poll interval suggested while a task is young;
	// pollSlow once it has run for slowAfter.
	pollFast  = time.Second
	pollSlow  = 2 * time.Second
	slowAfter = time.Minute
)

// errCannotAsk is what an agent reads when its question cannot reach the
// client of a task.
var errCannotAsk = errors.New("the task's client cannot be asked questions by this gateway; go on without asking")

// run is one task running on this gateway: the agent's call and the
// task's latest state, which the store follows (status changes at once,
// progress lines at most once a writeGap).
type run struct {
	m     *Manager
	ctx   context.Context // the call's; cancelled by cancel or Close
	stop  context.CancelFunc
	call  *route.Call
	key   store.Key
	tool  *agents.Tool
	start time.Time
	limit time.Duration
	// unauthorized is Spec.Unauthorized.
	unauthorized func(ctx context.Context) string
	// shape is Spec.Shape.
	shape func(ctx context.Context, result json.RawMessage) (json.RawMessage, string)

	answers chan map[string]json.RawMessage // the client's responses to the question asked

	wmu sync.Mutex // serialises store writes, so that they land in order

	mu      sync.Mutex
	task    Task          // the task as the run has it
	pub     Task          // the task as last written: what readers see
	changed chan struct{} // closed and replaced at each status change
	written time.Time     // when the task was last written
	flush   *time.Timer   // writes a held progress line; nil if none is held
	// flushing: a progress line is being written (flushProgress).
	flushing bool
	// notified is the status the subscribers last heard of.
	notified Status
}

// maxAnswersQueued is how many answers to one question a run holds before
// it takes them: a client may answer the requests of a round one by one,
// and a round has at most 8 (core.Together, the Node SDK's together).
const maxAnswersQueued = 8

// Run stores the task (status working) — so a tasks/get on any gateway
// finds it — and only then sends the call and returns. The call runs on the
// Manager's own context, not the request's: it ends when the handler
// returns, at Deadline (the agent's call is cancelled, the task fails "The
// task ran longer than the project's longest task (1h0m0s) and was
// stopped."), on Cancel, or when the agent disconnects (failed,
// route.MsgDisconnected — never retried). Progress lines become
// StatusMessage (store writes at most one a second). A question of the
// handler puts the task in InputRequired with InputRequests set (see
// [Questions]) until Answer is called. The end is logged as one call in
// the call log (billable, with the task id) and stored. A caller who
// runs the project's running tasks per caller already is refused with a
// [TooManyTasksError], before anything is stored or sent.
func (m *Manager) Run(ctx context.Context, s Spec) (Task, error) {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		s.Call.Release()
		return Task{}, ErrClosed
	}
	owner, err := m.OwnerOf(ctx, s.Key)
	if err != nil {
		s.Call.Release()
		return Task{}, err
	}
	ttl := m.TTLCap(ctx, s.Key.ProjectID)
	if s.TTL > 0 && s.TTL < ttl {
		ttl = s.TTL
	}
	start := s.Start
	if start.IsZero() {
		start = m.now()
	}
	now := m.now().UTC().Truncate(time.Millisecond)
	t := Task{
		ID: newID(), ProjectID: s.Key.ProjectID, Owner: owner, Tool: s.Tool.Name, AgentKey: s.Tool.AgentKey,
		Gateway: m.gateway, Era: s.Era, Status: Working, CreatedAt: now, UpdatedAt: now,
		TTL: ttl, PollInterval: pollFast, Deadline: s.Call.Deadline().UTC().Truncate(time.Millisecond), CallID: s.Call.ID(),
	}
	if s.Confirm != nil {
		// Asked before anything is sent: the task is stored waiting for
		// the answer, so its first tasks/get shows the question.
		if m.opts.Questions == nil || s.Confirmed == nil {
			s.Call.Release()
			return Task{}, errors.New("tasks: a task that must be confirmed needs Options.Questions and Spec.Confirmed")
		}
		reqs, err := m.opts.Questions.InputRequests(s.Confirm)
		if err != nil {
			s.Call.Release()
			return Task{}, fmt.Errorf("tasks: the confirmation of %s: %w", s.Tool.Name, err)
		}
		t.Status, t.InputRequests = InputRequired, reqs
	}
	unlock := m.starts.lock(t.ProjectID, owner)
	err = m.admit(ctx, t.ProjectID, s.Key.ProjectName, owner)
	if err == nil {
		err = m.st.CreateTask(ctx, t)
		if err != nil {
			err = fmt.Errorf("tasks: start a task of %s: %w", s.Tool.Name, err)
		}
	}
	unlock()
	if err != nil {
		s.Call.Release()
		return Task{}, err
	}
	r := &run{m: m, call: s.Call, key: s.Key, tool: s.Tool, start: start, limit: m.Limit(ctx, s.Key.ProjectID),
		answers: make(chan map[string]json.RawMessage, maxAnswersQueued), task: t, pub: t, changed: make(chan struct{}), written: now, notified: t.Status,
		unauthorized: s.Unauthorized, shape: s.Shape}
	r.ctx, r.stop = context.WithCancel(m.ctx)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		r.stop()
		s.Call.Release()
		r.finish(route.Result{Outcome: route.Cancelled})
		return Task{}, ErrClosed
	}
	m.runs[t.ID] = r
	m.runWG.Add(1)
	m.mu.Unlock()

	if s.Confirm != nil {
		go r.gate(t.InputRequests, s.Confirmed)
		return t, nil
	}
	call, res := s.Call.Send(r.ctx)
	go r.follow(call != nil, res)
	return t, nil
}

// follow waits for the call, if it was sent, to end, passing its questions
// to the client, and records its end (res, when it was not sent).
func (r *run) follow(sent bool, res route.Result) {
	defer r.m.runWG.Done()
	if sent {
		res = r.call.Wait(r.ctx, r.progress)
		for res.Question != nil {
			res = r.ask(res.Question)
		}
	}
	r.finish(res)
}

// gate waits for the caller's answer to the confirmation asked before the
// call (reqs): a yes sends it; anything else ends the task with nothing
// sent (Spec.Confirm).
func (r *run) gate(reqs json.RawMessage, confirmed func(map[string]json.RawMessage) (bool, string)) {
	got, reason := r.await(reqs)
	yes, refusal := false, ""
	if reason == "" {
		yes, refusal = confirmed(got)
	}
	if yes {
		call, res := r.call.Send(r.ctx)
		r.follow(call != nil, res)
		return
	}
	defer r.m.runWG.Done()
	r.call.Release()
	switch reason {
	case agentproto.ReasonTimeout:
		r.finish(route.Result{Outcome: route.TimedOut})
	case agentproto.ReasonCancelled:
		r.finish(route.Result{Outcome: route.Cancelled})
	default:
		r.finish(route.Result{Outcome: route.ToolError, Detail: refusal})
	}
}

// ask puts the task in InputRequired with question q until the client
// answers, the deadline passes or the task is cancelled; then it waits for
// the call again.
func (r *run) ask(q *agentproto.Message) route.Result {
	var (
		reqs json.RawMessage
		err  = errCannotAsk
	)
	// A job's client (the MCP front's job tool, for clients without
	// tasks) has nobody on the other end to answer: its questions are
	// refused, as for a client that cannot be asked.
	if r.m.opts.Questions != nil && r.task.Era != "job" {
		reqs, err = r.m.opts.Questions.InputRequests(q)
	}
	if err != nil {
		if q.Type == agentproto.TypeAsk {
			r.call.Respond(nil, err.Error(), -32602)
		} else {
			r.call.Answer(q.Input, false, err)
		}
		return r.call.Wait(r.ctx, r.progress)
	}
	select {
	case <-r.answers: // a late answer to an earlier question
	default:
	}
	r.call.Note("asked the client: " + textfmt.Cut(string(reqs), 180))
	r.setStatus(InputRequired, func(t *Task) { t.InputRequests = reqs })
	got, reason := r.await(reqs)
	if reason != "" {
		return r.call.Abandon(reason)
	}
	r.m.opts.Questions.Answer(r.call, q, reqs, got)
	return r.call.Wait(r.ctx, r.progress)
}

// await waits for the client's responses to every input request of reqs,
// until the call's deadline (reason agentproto.ReasonTimeout) or the
// task's cancel (agentproto.ReasonCancelled). A client may answer the
// input requests a few at a time (SEP-2663): the task waits on for the
// rest, showing only those, and gets every answer at once.
func (r *run) await(reqs json.RawMessage) (got map[string]json.RawMessage, reason string) {
	timer := time.NewTimer(time.Until(r.call.Deadline()))
	defer timer.Stop()
	var asked map[string]json.RawMessage
	_ = json.Unmarshal(reqs, &asked)
	got = make(map[string]json.RawMessage, len(asked))
	for {
		select {
		case resp := <-r.answers:
			for k := range asked {
				if a, ok := resp[k]; ok {
					got[k] = a
				}
			}
			if len(got) < len(asked) {
				continue // answer has shown the requests left
			}
			return got, ""
		case <-timer.C:
			return nil, agentproto.ReasonTimeout
		case <-r.ctx.Done():
			return nil, agentproto.ReasonCancelled
		}
	}
}

// setStatus changes the task's status (and what change says) and writes
// it at once.
func (r *run) setStatus(s Status, change func(*Task)) {
	r.mu.Lock()
	if r.task.Status.Terminal() {
		r.mu.Unlock()
		return
	}
	r.task.Status = s
	if change != nil {
		change(&r.task)
	}
	r.mu.Unlock()
	r.write()
}

// wake wakes the waiters and, when the status changed, tells the
// subscribers of t.
// Subscribers hear first, so that a waiter that returns has been told.
func (r *run) wake(t Task, statusChanged bool) {
	if statusChanged {
		r.m.notify(t)
	}
	r.mu.Lock()
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// snapshot returns the task as last written, and a channel closed at its
// next write.
func (r *run) snapshot() (Task, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pub, r.changed
}

// end ends the task here with status s and message msg (a cancel, a
// shutdown) unless it has ended already, and stops the agent's call; the
// call's own end is then logged and dropped.
func (r *run) end(s Status, msg string) (Task, bool) {
	r.mu.Lock()
	if r.task.Status.Terminal() {
		t := r.task
		r.mu.Unlock()
		return t, false
	}
	r.task.Status, r.task.StatusMessage, r.task.InputRequests = s, msg, nil
	if s == Failed {
		r.task.Error = &RPCError{Code: codeInternal, Message: msg}
	}
	r.mu.Unlock()
	r.write()
	r.stop()
	t, _ := r.snapshot()
	return t, true
}

// msgUpstreamRefused ends a task whose per-person remote refused the
// person's upstream token, when the front gave no answer of its own.
const msgUpstreamRefused = "The remote refused your account's token. Connect your account again, then call the tool again."

// codeInternal is the JSON-RPC code of a task the gateway failed.
const codeInternal = -32603

// finish records how the call ended: the task's end (unless a cancel or
// a shutdown ended it first) and one call in the call log.
func (r *run) finish(res route.Result) {
	defer func() {
		r.m.mu.Lock()
		delete(r.m.runs, r.task.ID)
		r.m.mu.Unlock()
		r.stop()
	}()
	if res.Outcome == route.ToolError && res.Code == agentproto.CodeUpstreamUnauthorized {
		// Not for a client: the task ends with an isError result that
		// says what to do.
		res.Code, res.Detail = 0, msgUpstreamRefused
		if r.unauthorized != nil {
			res.Detail = r.unauthorized(r.ctx)
		}
	}
	var words string
	if r.shape != nil {
		var result json.RawMessage
		if res.Outcome == route.OK {
			result = res.Result
		}
		if result, words = r.shape(context.WithoutCancel(r.ctx), result); res.Outcome == route.OK {
			res.Result = result
		}
	}
	outcome, errText := r.outcome(res)
	r.mu.Lock()
	id := r.task.ID
	if !r.task.Status.Terminal() {
		r.apply(res, errText)
		r.task.InputRequests = nil
		r.mu.Unlock()
		r.write()
	} else {
		r.mu.Unlock()
	}
	if res.Reached() {
		r.m.calls.Add(store.Call{
			Time: r.start, ProjectID: r.key.ProjectID, Kind: agentproto.KindTool, Name: r.tool.Name,
			KeyID: r.key.ID, Agent: r.tool.AgentKey, Replica: res.Replica.ID, Duration: r.m.now().Sub(r.start),
			Outcome: outcome, Error: textfmt.Cut(errText, agentproto.MaxErrorLogLen), Progress: res.Progress,
			Billable: true, TaskID: id, Policy: words,
		})
	}
}

// outcome is how the call log words res, and its error text.
func (r *run) outcome(res route.Result) (outcome, errText string) {
	switch res.Outcome {
	case route.OK:
		if isError(res.Result) {
			return store.OutcomeError, firstText(res.Result)
		}
		return store.OutcomeOK, ""
	case route.TimedOut:
		return store.OutcomeTimeout, msgLimit(r.limit)
	case route.Cancelled:
		r.mu.Lock()
		msg := r.task.StatusMessage
		if r.task.Status != Failed {
			msg = ""
		}
		r.mu.Unlock()
		return store.OutcomeCancelled, msg
	case route.Disconnected:
		return store.OutcomeDisconnected, route.MsgDisconnected
	default:
		return store.OutcomeError, res.Detail
	}
}

// apply sets the task's end from res; r.mu held.
func (r *run) apply(res route.Result, errText string) {
	t := &r.task
	fail := func(msg string, code int, data json.RawMessage) {
		t.Status, t.StatusMessage, t.Error = Failed, msg, &RPCError{Code: code, Message: msg, Data: data}
	}
	switch res.Outcome {
	case route.OK:
		t.Status, t.Result = Completed, res.Result
		if isError(res.Result) {
			t.StatusMessage = textfmt.Cut(errText, agentproto.MaxErrorLogLen)
			if t.Era == era2025 {
				t.Status = Failed // an isError result is failed in 2025-11-25
			}
		}
	case route.ToolError:
		switch {
		case res.Code != 0:
			fail(res.Detail, res.Code, res.Data)
		case strings.HasPrefix(res.Detail, tooLargePrefix):
			fail(res.Detail, codeInternal, nil)
		default:
			t.Status, t.StatusMessage, t.Result = Completed, textfmt.Cut(res.Detail, agentproto.MaxErrorLogLen), errorResult(res.Detail)
			if t.Era == era2025 {
				t.Status = Failed
			}
		}
	case route.Cancelled:
		t.Status, t.StatusMessage = Cancelled, MsgCancelled
	case route.TimedOut, route.Disconnected:
		fail(errText, codeInternal, nil)
	default: // NoReplica, NotFound: the call was never sent
		msg := res.Detail
		if msg == "" {
			msg = fmt.Sprintf("The tool %s is no longer offered. List the tools again.", r.tool.Name)
		}
		fail(msg, codeInternal, nil)
	}
}

// era2025 is the era whose isError results are failed tasks.
const era2025 = "2025-11-25"

// tooLargePrefix starts route.TooLarge's message.
var tooLargePrefix = strings.SplitN(route.TooLarge(0), ":", 2)[0] + ":"

// isError reports whether a CallToolResult has isError set.
func isError(result json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(result, &r) == nil && r.IsError
}

// firstText returns the first text content of a CallToolResult.
func firstText(result json.RawMessage) string {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(result, &r) != nil {
		return ""
	}
	for _, c := range r.Content {
		if c.Type == "text" {
			return c.Text
		}
	}
	return ""
}

// errorResult is an isError CallToolResult saying msg.
func errorResult(msg string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": msg}}, "isError": true})
	return b
}
