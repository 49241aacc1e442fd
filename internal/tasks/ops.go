package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// Get returns owner's task, ErrNotFound otherwise (any gateway: it reads
// the store; this gateway's runs from memory).
func (m *Manager) Get(ctx context.Context, owner Owner, projectID int64, id string) (Task, error) {
	if r := m.local(id); r != nil {
		t, _ := r.snapshot()
		if t.Owner != owner || t.ProjectID != projectID || m.expired(t) {
			return Task{}, ErrNotFound
		}
		return t, nil
	}
	return m.stored(ctx, owner, projectID, id)
}

// stored reads owner's task from the store.
func (m *Manager) stored(ctx context.Context, owner Owner, projectID int64, id string) (Task, error) {
	t, err := m.st.Task(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Task{}, ErrNotFound
	}
	if err != nil {
		return Task{}, fmt.Errorf("tasks: read task %s: %w", id, err)
	}
	if t.Owner != owner || t.ProjectID != projectID || m.expired(t) {
		return Task{}, ErrNotFound
	}
	return t, nil
}

// expired reports whether t ended longer than its TTL ago (the pruning
// loop has not deleted it yet).
func (m *Manager) expired(t Task) bool {
	return t.Status.Terminal() && !m.now().Before(t.UpdatedAt.Add(t.TTL))
}

// Wait returns the task once it is terminal or InputRequired (or ctx
// ends), for tasks/result and for the job tool's wait: it watches local
// runs directly and polls the store (with the task's poll interval) for
// tasks run by another gateway.
func (m *Manager) Wait(ctx context.Context, owner Owner, projectID int64, id string) (Task, error) {
	var last Status
	for {
		if r := m.local(id); r != nil {
			t, changed := r.snapshot()
			if t.Owner != owner || t.ProjectID != projectID {
				return Task{}, ErrNotFound
			}
			if settled(t) {
				return t, nil
			}
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return t, ctx.Err()
			}
		}
		t, err := m.stored(ctx, owner, projectID, id)
		if err != nil || settled(t) {
			return t, err
		}
		if last != "" && t.Status != last {
			m.notify(t) // watched by this gateway
		}
		last = t.Status
		if m.local(id) != nil {
			continue // started here meanwhile: watch it
		}
		poll := t.PollInterval
		if poll <= 0 {
			poll = pollFast
		}
		timer := time.NewTimer(poll)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return t, ctx.Err()
		}
	}
}

// settled reports whether a waiter on t is done waiting.
func settled(t Task) bool { return t.Status.Terminal() || t.Status == InputRequired }

// Page sizes of List.
const (
	defaultPage = 50
	maxPage     = 100
)

// List returns owner's tasks in the project, newest first, a page at a
// time (cursor "" first; the next cursor is "" after the last page).
// limit 0 means 50; at most 100.
func (m *Manager) List(ctx context.Context, owner Owner, projectID int64, cursor string, limit int) ([]Task, string, error) {
	if limit <= 0 {
		limit = defaultPage
	}
	limit = min(limit, maxPage)
	ts, err := m.st.ListTasks(ctx, projectID, owner, cursor, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("tasks: list: %w", err)
	}
	next := ""
	if len(ts) > limit {
		ts = ts[:limit]
		next = ts[limit-1].ID
	}
	ts = slices.DeleteFunc(ts, m.expired)
	for i, t := range ts {
		if r := m.local(t.ID); r != nil {
			ts[i], _ = r.snapshot()
		}
	}
	return ts, next, nil
}

// Cancel cancels owner's task: the agent's call is cancelled, the task
// becomes Cancelled, a result that arrives later is dropped. Cancelling a
// terminal task is not an error (it stays as it was). Works from any
// gateway (a signal to the runner).
func (m *Manager) Cancel(ctx context.Context, owner Owner, projectID int64, id string) (Task, error) {
	t, err := m.Get(ctx, owner, projectID, id)
	if err != nil || t.Status.Terminal() {
		return t, err
	}
	if r := m.local(id); r != nil {
		t, _ = r.end(Cancelled, MsgCancelled)
		return t, nil
	}
	// Another gateway runs it: the store says cancelled first (its
	// runner's next write finds it ended), then the signal stops the
	// agent's call at once.
	t.Status, t.StatusMessage, t.InputRequests = Cancelled, MsgCancelled, nil
	t.UpdatedAt = m.now().UTC().Truncate(time.Millisecond)
	if _, err := m.st.UpdateTask(ctx, t); err != nil {
		return Task{}, fmt.Errorf("tasks: cancel %s: %w", id, err)
	}
	if m.opts.Signals != nil {
		if err := m.opts.Signals.Send(ctx, t.Gateway, Signal{Kind: sigCancel, TaskID: id}); err != nil {
			m.log.Warn("tasks: signal a cancel to the task's gateway; it stops at its next write", "task", id, "gateway", t.Gateway, "err", err)
		}
	}
	return m.stored(ctx, owner, projectID, id)
}

// Answer gives the handler the client's responses to the task's
// InputRequests (2026-07-28 inputResponses shape: id → response).
// Responses to input requests never asked are refused with an error that
// wraps [ErrBadResponses]; an answer for a task no longer InputRequired is
// ignored. Works from any gateway.
func (m *Manager) Answer(ctx context.Context, owner Owner, projectID int64, id string, responses map[string]json.RawMessage) error {
	t, err := m.Get(ctx, owner, projectID, id)
	if err != nil {
		return err
	}
	if t.Status != InputRequired {
		return nil
	}
	var asked map[string]json.RawMessage
	if err := json.Unmarshal(t.InputRequests, &asked); err != nil {
		return fmt.Errorf("tasks: input requests of %s: %w", id, err)
	}
	for k := range responses {
		if _, ok := asked[k]; !ok {
			return fmt.Errorf("%w: the task asked no input request %q", ErrBadResponses, k)
		}
	}
	if r := m.local(id); r != nil {
		r.answer(responses)
		return nil
	}
	if m.opts.Signals == nil {
		return nil
	}
	// As a local answer does, the next waiter finds the task working, or
	// still input_required with the requests left open when the client
	// answered only some (SEP-2663); written before the signal, so that it
	// cannot land after the runner's next question.
	if rest := openLeft(asked, responses); rest != nil {
		t.InputRequests = rest
	} else {
		t.Status, t.InputRequests = Working, nil
	}
	t.UpdatedAt = m.now().UTC().Truncate(time.Millisecond)
	if _, err := m.st.UpdateTask(ctx, t); err != nil {
		return fmt.Errorf("tasks: answer %s: %w", id, err)
	}
	if err := m.opts.Signals.Send(ctx, t.Gateway, Signal{Kind: sigAnswer, TaskID: id, Responses: responses}); err != nil {
		return fmt.Errorf("tasks: pass the answer of %s to gateway %s: %w", id, t.Gateway, err)
	}
	return nil
}

// answer passes responses to the run's question, if it still waits for
// them, and before it returns makes the task working again, or, when the
// client answered only some of the open requests, leaves it
// input_required with those left (a waiter that comes next must not find
// an answered request still open, nor an open one gone); answers beyond
// what the run can take are dropped.
func (r *run) answer(responses map[string]json.RawMessage) {
	// The hand-over and the status it leaves are one step under r.mu:
	// the run's loop never sets the status for an answer, so two answers
	// in a row cannot leave their changes in the wrong order (a task
	// shown input_required while its agent already works).
	r.mu.Lock()
	if r.task.Status != InputRequired {
		r.mu.Unlock()
		return
	}
	select {
	case r.answers <- responses:
	default:
		r.mu.Unlock()
		return
	}
	var open map[string]json.RawMessage
	_ = json.Unmarshal(r.task.InputRequests, &open)
	if rest := openLeft(open, responses); rest != nil {
		r.task.InputRequests = rest
	} else {
		r.task.Status, r.task.InputRequests = Working, nil
	}
	r.mu.Unlock()
	r.write()
}

// openLeft returns, as JSON, the input requests of open that responses
// do not answer, or nil when they answer them all.
func openLeft(open, responses map[string]json.RawMessage) json.RawMessage {
	rest := make(map[string]json.RawMessage, len(open))
	for k, v := range open {
		if _, ok := responses[k]; !ok {
			rest[k] = v
		}
	}
	if len(rest) == 0 {
		return nil
	}
	b, _ := json.Marshal(rest)
	return b
}

// Kinds of [Signal].
const (
	sigCancel = "cancel"
	sigAnswer = "answer"
)

// signal acts on a signal from another gateway for a task run here.
func (m *Manager) signal(s Signal) {
	r := m.local(s.TaskID)
	if r == nil {
		return
	}
	switch s.Kind {
	case sigCancel:
		r.end(Cancelled, MsgCancelled)
	case sigAnswer:
		r.answer(s.Responses)
	}
}
