package tasks

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// writeStore counts the task writes; while gate is open (not nil and not
// closed) a write waits for it, as SQLite's writer lock makes writes wait
// under load.
type writeStore struct {
	store.Tasks // only UpdateTask is used

	mu       sync.Mutex
	writes   []store.Task
	inflight int // writes started and not returned
	gate     chan struct{}
}

func (s *writeStore) UpdateTask(ctx context.Context, t store.Task) (bool, error) {
	s.mu.Lock()
	s.inflight++
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	s.writes = append(s.writes, t)
	return true, nil
}

func (s *writeStore) count() (writes, inflight int, last string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.writes) > 0 {
		last = s.writes[len(s.writes)-1].StatusMessage
	}
	return len(s.writes), s.inflight, last
}

type noCalls struct{}

func (noCalls) Add(store.Call) {}

// newTestRun is a running task as Run leaves it, without a call: what
// progress needs.
func newTestRun(st Store) *run {
	m := New(Options{Store: st, Calls: noCalls{}})
	now := m.now().UTC().Truncate(time.Millisecond)
	t := Task{ID: "task_progress", Status: Working, CreatedAt: now, UpdatedAt: now, Era: "job"}
	return &run{m: m, task: t, pub: t, changed: make(chan struct{}), written: now, notified: Working, stop: func() {}}
}

// A handler that reports progress ten times a second for ten seconds
// makes at most one store write a second, and the last line is written.
func TestProgressWritesAtMostOneASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &writeStore{}
		r := newTestRun(st)
		for i := range 100 {
			r.progress(fmt.Sprintf("step %d", i))
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(writeGap)
		synctest.Wait()
		writes, _, last := st.count()
		if writes < 9 || writes > 11 {
			t.Errorf("%d store writes in 11 s of progress lines ten a second; want about one a second, at most 11", writes)
		}
		if last != "step 99" {
			t.Errorf("last line written = %q, want %q", last, "step 99")
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		for i := 1; i < len(st.writes); i++ {
			if gap := st.writes[i].UpdatedAt.Sub(st.writes[i-1].UpdatedAt); gap < writeGap {
				t.Errorf("writes %d and %d are %v apart, want at least %v", i-1, i, gap, writeGap)
			}
		}
	})
}

// While the store does not answer, progress lines go on at once: the
// call's wait (which reads them) never waits for the store, and no more
// than one write per task is held back meanwhile. Once the store answers,
// the latest line is written.
func TestProgressNeverWaitsForTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &writeStore{gate: make(chan struct{})}
		r := newTestRun(st)
		start := time.Now()
		for i := range 50 {
			r.progress(fmt.Sprintf("step %d", i))
			if d := time.Since(start); d != 0 {
				t.Fatalf("progress line %d returned after %v: it waited", i, d)
			}
		}
		time.Sleep(10 * writeGap) // the store stays stuck; lines keep coming
		for i := 50; i < 100; i++ {
			r.progress(fmt.Sprintf("step %d", i))
		}
		synctest.Wait()
		if _, inflight, _ := st.count(); inflight != 1 {
			t.Errorf("%d writes wait for the store, want 1", inflight)
		}
		close(st.gate)
		time.Sleep(writeGap)
		synctest.Wait()
		writes, inflight, last := st.count()
		if inflight != 0 || writes != 2 || last != "step 99" {
			t.Errorf("after the store answered: %d writes (%d waiting), last %q; want 2 (the stuck one, then the latest line), %q", writes, inflight, last, "step 99")
		}
	})
}
