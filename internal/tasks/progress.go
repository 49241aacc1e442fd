package tasks

import (
	"context"
	"time"
)

// Progress and the store: a run keeps its task in memory and writes it to
// the store, where every gateway reads it. A status change is written at
// once, in order (wmu); a progress line at most once a writeGap, by a
// timer, never on the call's wait.

// progress makes line the task's status message: in memory at once, in
// the store at most once a writeGap (the latest line wins). It never
// waits for the store: it runs on the call's wait (the agent's progress
// is read there), and a store slow to write must neither hold up the call
// nor hold a goroutine, or grow a stack, per progress line. A held line
// is written by a timer ([run.flushProgress]), one write at a time.
func (r *run) progress(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.task.Status.Terminal() {
		return
	}
	r.task.StatusMessage = line
	r.scheduleFlush()
}

// scheduleFlush writes the held progress line writeGap after the last
// write, unless a write of progress is due or under way already; r.mu
// held.
func (r *run) scheduleFlush() {
	if r.flush == nil && !r.flushing {
		r.flush = time.AfterFunc(max(0, writeGap-r.m.now().Sub(r.written)), r.flushProgress)
	}
}

// flushProgress writes the held progress line and, if a newer one came
// while the store wrote it, holds that one for the next writeGap.
func (r *run) flushProgress() {
	r.mu.Lock()
	r.flush, r.flushing = nil, true
	r.mu.Unlock()
	r.write()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushing = false
	if !r.task.Status.Terminal() && r.task.StatusMessage != r.pub.StatusMessage {
		r.scheduleFlush()
	}
}

// write writes the task as it is now. A store that says the task had
// already ended (cancelled or failed from another gateway) ends the run.
func (r *run) write() {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.mu.Lock()
	if r.flush != nil {
		r.flush.Stop()
		r.flush = nil
	}
	now := r.m.now().UTC().Truncate(time.Millisecond)
	r.task.UpdatedAt, r.written = now, now
	if now.Sub(r.task.CreatedAt) >= slowAfter {
		r.task.PollInterval = pollSlow
	}
	t := r.task
	changed := t.Status != r.notified
	r.notified = t.Status
	r.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok, err := r.m.st.UpdateTask(ctx, t)
	switch {
	case err != nil:
		r.m.log.Warn("tasks: write a task's status", "task", t.ID, "status", t.Status, "err", err)
	case !ok:
		// Ended elsewhere: a cancel or a dead gateway's failure won.
		r.stop()
	}
	r.mu.Lock()
	r.pub = t
	r.mu.Unlock()
	r.wake(t, changed)
}
