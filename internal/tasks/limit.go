package tasks

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"sync"
)

// Running tasks per caller: a project setting (store.ProjectSettings.
// MaxRunningTasks, default 100) caps how many tasks one owner — the person
// through OAuth, else the key — has running at once, in every era and as
// jobs alike: each holds memory on its gateway and writes its progress to
// the store, and a caller with thousands of them slowed every project on
// the gateway. The count is the store's (any gateway's tasks count); on
// this gateway, starts of one owner take turns between the count and the
// insert, so a burst cannot overshoot. Gateways that share a store may
// each let one start past the cap at the same moment: a bound, not an
// exact count, across gateways.

// ErrTooManyTasks is wrapped by the error [Manager.Run] returns when the
// caller already runs as many tasks as the project allows; its message is
// for the client, word for word ([TooManyTasksError]).
var ErrTooManyTasks = errors.New("too many running tasks")

// TooManyTasksError is the refusal of a task beyond the project's running
// tasks per caller.
type TooManyTasksError struct {
	Running int    // the cap the caller reached
	Project string // the project's name
}

func (e *TooManyTasksError) Error() string {
	return fmt.Sprintf("You have %d tasks running in project %s; wait for one to finish or cancel one.", e.Running, e.Project)
}

func (e *TooManyTasksError) Unwrap() error { return ErrTooManyTasks }

// ownerLocks serialise the starts of one owner on this gateway (striped:
// two owners may share a lock, which only makes them take turns).
type ownerLocks struct {
	seed  maphash.Seed
	locks [64]sync.Mutex
}

func (l *ownerLocks) lock(projectID int64, owner Owner) func() {
	mu := &l.locks[maphash.String(l.seed, strconv.FormatInt(projectID, 10)+"/"+string(owner))%uint64(len(l.locks))]
	mu.Lock()
	return mu.Unlock
}

// admit refuses a new task of owner when the owner runs the project's cap
// already. The caller holds the owner's lock until the task is stored.
func (m *Manager) admit(ctx context.Context, projectID int64, projectName string, owner Owner) error {
	limit := m.settings(ctx, projectID).RunningTaskCap()
	n, err := m.st.RunningTaskCount(ctx, projectID, owner)
	if err != nil {
		return fmt.Errorf("tasks: count the running tasks of %s: %w", owner, err)
	}
	if n < limit {
		return nil
	}
	if projectName == "" && m.opts.ProjectName != nil {
		projectName = m.opts.ProjectName(ctx, projectID)
	}
	return &TooManyTasksError{Running: limit, Project: projectName}
}
