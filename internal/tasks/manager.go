package tasks

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// Manager runs tasks and answers for them: the runs of this gateway in
// memory, every task in the store. Every method is safe for concurrent
// use.
type Manager struct {
	st      Store
	calls   CallLog
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	gateway string

	ctx    context.Context // the runs' and loops' context; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the loops
	runWG  sync.WaitGroup // the runners

	mu       sync.Mutex
	closed   bool
	runs     map[string]*run // this gateway's runs, by task id
	subs     map[int]func(Task)
	nextSub  int
	stopRecv func()

	owners sync.Map // OAuth grant id → Owner
	starts ownerLocks

	closeOnce sync.Once
	closeErr  error
}

// New returns a Manager; [Manager.Start] starts its background work. It
// panics without a Store or a CallLog.
func New(opts Options) *Manager {
	if opts.Store == nil || opts.Calls == nil {
		panic("tasks: New without a Store or a CallLog")
	}
	m := &Manager{st: opts.Store, calls: opts.Calls, opts: opts, log: opts.Log, now: opts.Now, gateway: opts.Gateway,
		runs: map[string]*run{}, subs: map[int]func(Task){}, starts: ownerLocks{seed: maphash.MakeSeed()}}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.gateway == "" {
		m.gateway = "local"
	}
	if m.opts.PruneEvery <= 0 {
		m.opts.PruneEvery = time.Minute
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m
}

// Start fails the tasks left running by gateways that are gone and prunes
// ended ones (sweep.go), then starts doing so every PruneEvery, and
// subscribes to the signals for this gateway's tasks; it returns once
// those are received.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	signals := m.opts.Signals
	m.mu.Unlock()
	if signals != nil {
		stop, err := signals.Receive(m.signal)
		if err != nil {
			return fmt.Errorf("tasks: receive signals: %w", err)
		}
		m.mu.Lock()
		m.stopRecv = stop
		m.mu.Unlock()
	}
	// A gateway that was killed left its tasks working: fail them now,
	// before any client asks for them here.
	m.sweep()
	m.wg.Add(1)
	go m.pruneLoop()
	return nil
}

// Close stops taking tasks and stops the loops. The gateway calls it once
// the drain grace has ended: the tasks still running here fail ("The
// gateway running this task shut down.") and their agents' calls are
// cancelled. It is safe to call twice.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		stop := m.stopRecv
		runs := make([]*run, 0, len(m.runs))
		for _, r := range m.runs {
			runs = append(runs, r)
		}
		m.mu.Unlock()
		if stop != nil {
			stop()
		}
		for _, r := range runs {
			r.end(Failed, MsgGatewayShutDown)
		}
		m.cancel()
		m.wg.Wait()
		m.runWG.Wait()
	})
	return m.closeErr
}

// Subscribe calls fn with each status change of a task run or watched by
// this gateway; the returned func unsubscribes. fn must be quick and must
// not call back into the Manager's Subscribe.
func (m *Manager) Subscribe(fn func(Task)) (unsubscribe func()) {
	m.mu.Lock()
	id := m.nextSub
	m.nextSub++
	m.subs[id] = fn
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(m.subs, id)
		m.mu.Unlock()
	}
}

// notify passes t to the subscribers.
func (m *Manager) notify(t Task) {
	m.mu.Lock()
	fns := make([]func(Task), 0, len(m.subs))
	for _, fn := range m.subs {
		fns = append(fns, fn)
	}
	m.mu.Unlock()
	for _, fn := range fns {
		fn(t)
	}
}

// settings returns a project's settings; the defaults when they cannot be
// read (logged).
func (m *Manager) settings(ctx context.Context, projectID int64) store.ProjectSettings {
	if m.opts.Settings == nil {
		return store.ProjectSettings{}
	}
	s, err := m.opts.Settings(ctx, projectID)
	if err != nil {
		m.log.Warn("tasks: read project settings; using the defaults", "project", projectID, "err", err)
		return store.ProjectSettings{}
	}
	return s
}

// Limit is the project's longest task (default 1 h, at most 24 h).
func (m *Manager) Limit(ctx context.Context, projectID int64) time.Duration {
	return m.settings(ctx, projectID).LongestTask()
}

// TTLCap is the longest an ended task of the project is kept (default
// 24 h, at most 7 days).
func (m *Manager) TTLCap(ctx context.Context, projectID int64) time.Duration {
	return m.settings(ctx, projectID).TaskTTL()
}

// OwnerOf returns whose tasks key starts and sees: the key's, or, for an
// OAuth grant, its person's (any of their apps' grants), looked up once
// per grant.
func (m *Manager) OwnerOf(ctx context.Context, key store.Key) (Owner, error) {
	if !key.OAuth || m.opts.Grants == nil {
		return Owner("key:" + key.ID), nil
	}
	if o, ok := m.owners.Load(key.ID); ok {
		return o.(Owner), nil
	}
	g, err := m.opts.Grants.OAuthGrant(ctx, key.ID)
	if err != nil {
		return "", fmt.Errorf("tasks: owner of grant %s: %w", key.ID, err)
	}
	o := Owner("user:" + strconv.FormatInt(g.UserID, 10))
	m.owners.Store(key.ID, o)
	return o, nil
}

// FailGateway marks the non-terminal tasks of a dead gateway Failed ("The
// gateway running this task stopped."); the cluster calls it when a peer's
// heartbeats stop.
func (m *Manager) FailGateway(ctx context.Context, gatewayID string) error {
	if gatewayID == m.gateway {
		return nil // this gateway's runs end by themselves
	}
	n, err := m.st.FailGatewayTasks(ctx, gatewayID, MsgGatewayStopped, m.now())
	if err != nil {
		return fmt.Errorf("tasks: fail the tasks of gateway %s: %w", gatewayID, err)
	}
	if n > 0 {
		m.log.Warn("tasks: failed the running tasks of a gateway that stopped", "gateway", gatewayID, "tasks", n)
	}
	return nil
}

// pruneLoop sweeps and prunes the tasks every PruneEvery (see sweep.go).
func (m *Manager) pruneLoop() {
	defer m.wg.Done()
	t := time.NewTicker(m.opts.PruneEvery)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			m.sweep()
		}
	}
}

// prune deletes the ended tasks past their TTL.
func (m *Manager) prune(ctx context.Context) {
	if _, err := m.st.PruneTasks(ctx, m.now()); err != nil && !errors.Is(err, context.Canceled) {
		m.log.Warn("tasks: prune ended tasks", "err", err)
	}
}

// newID returns a new task id: "task_" and 26 lowercase base32 characters
// of crypto/rand.
func newID() string {
	return "task_" + strings.ToLower(rand.Text())
}

// local returns this gateway's run of task id, or nil.
func (m *Manager) local(id string) *run {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runs[id]
}

// UseSignals sets the signals to the other gateways, before Start (the
// gateway joins the bus after it built the Manager).
func (m *Manager) UseSignals(s Signals) {
	m.mu.Lock()
	m.opts.Signals = s
	m.mu.Unlock()
}

// WaitIdle returns once no task runs here, or when ctx ends: a gateway
// that stops gracefully lets its tasks run until the drain grace ends,
// then closes the Manager.
func (m *Manager) WaitIdle(ctx context.Context) {
	for {
		m.mu.Lock()
		n := len(m.runs)
		m.mu.Unlock()
		if n == 0 {
			return
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
