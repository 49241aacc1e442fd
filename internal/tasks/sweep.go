package tasks

import (
	"context"
	"errors"
	"slices"
	"time"
)

// Sweeps: the tasks nobody runs any more. A gateway that is killed (or
// loses its machine) leaves its tasks working in the store; on a bus its
// peers fail them when its heartbeats stop ([Manager.FailGateway]), but a
// gateway alone, or a whole cluster that restarts, has no peer to notice.
// So each gateway, when it starts and then every PruneEvery, fails the
// running tasks of the gateways whose record in the store is gone ("The
// gateway running this task stopped."), and the tasks past their deadline
// by more than overdueGrace, whoever ran them (the runner would have
// stopped them: it is gone, or stuck). They then end like any task: their
// waiters wake, and they are pruned their TTL later.

// overdueGrace is how long past its deadline a running task is left to
// its runner, which stops it at the deadline itself.
const overdueGrace = time.Minute

// sweepBatch is how many overdue tasks one read returns.
const sweepBatch = 500

// sweep fails the tasks of gone gateways and the overdue ones, then
// prunes the ended tasks past their TTL.
func (m *Manager) sweep() {
	ctx, cancel := context.WithTimeout(m.ctx, time.Minute)
	defer cancel()
	if err := m.failGone(ctx); err != nil && !errors.Is(err, context.Canceled) {
		m.log.Warn("tasks: fail the tasks of gateways that are gone", "err", err)
	}
	if err := m.failOverdue(ctx); err != nil && !errors.Is(err, context.Canceled) {
		m.log.Warn("tasks: fail the tasks past their deadline", "err", err)
	}
	m.prune(ctx)
}

// failGone fails the running tasks of the gateways that are neither this
// one nor among Options.LiveGateways.
func (m *Manager) failGone(ctx context.Context) error {
	if m.opts.LiveGateways == nil {
		return nil
	}
	running, err := m.st.TaskGateways(ctx)
	if err != nil || len(running) == 0 {
		return err
	}
	live, err := m.opts.LiveGateways(ctx)
	if err != nil {
		return err
	}
	for _, gw := range running {
		if gw == m.gateway || slices.Contains(live, gw) {
			continue
		}
		if err := m.FailGateway(ctx, gw); err != nil {
			return err
		}
	}
	return nil
}

// failOverdue fails, with the longest task's message, the running tasks
// past their deadline by overdueGrace that this gateway does not run.
func (m *Manager) failOverdue(ctx context.Context) error {
	before := m.now().Add(-overdueGrace)
	for {
		ts, err := m.st.OverdueTasks(ctx, before, sweepBatch)
		if err != nil {
			return err
		}
		failed := 0
		for _, t := range ts {
			if m.local(t.ID) != nil {
				continue // ending here right now
			}
			msg := msgLimit(t.Deadline.Sub(t.CreatedAt).Round(time.Minute))
			t.Status, t.StatusMessage, t.InputRequests = Failed, msg, nil
			t.Error = &RPCError{Code: codeInternal, Message: msg}
			t.UpdatedAt = m.now().UTC().Truncate(time.Millisecond)
			ok, err := m.st.UpdateTask(ctx, t)
			if err != nil {
				return err
			}
			if ok {
				failed++
			}
		}
		if failed > 0 {
			m.log.Warn("tasks: failed running tasks past their deadline whose gateway did not stop them", "tasks", failed)
		}
		if len(ts) < sweepBatch || failed == 0 {
			return nil
		}
	}
}
