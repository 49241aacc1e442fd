package cluster

import "time"

// recentIDs remembers ids for a while, at most a bounded number of them:
// the calls whose cancel came before the call (see [Cluster.onCtl]). The
// oldest go first when it is full. The zero value is ready; it is not safe
// for concurrent use (the cluster holds its mu).
type recentIDs struct {
	at    map[string]time.Time // when each id was added
	order []recentID           // ids in the order added, from head
	head  int
}

type recentID struct {
	id string
	at time.Time
}

// Bounds of the cancelled calls remembered: a call comes long before its
// wait (30 s at most) is over, and a flood of cancels for calls that never
// come holds at most maxRecent ids.
const (
	recentTTL = time.Minute
	maxRecent = 10_000
)

// add remembers id from now.
func (r *recentIDs) add(id string, now time.Time) {
	if r.at == nil {
		r.at = make(map[string]time.Time)
	}
	r.expire(now)
	if _, ok := r.at[id]; ok {
		return
	}
	for len(r.at) >= maxRecent {
		r.pop()
	}
	r.at[id] = now
	r.order = append(r.order, recentID{id, now})
}

// take reports whether id is remembered, and forgets it.
func (r *recentIDs) take(id string, now time.Time) bool {
	r.expire(now)
	if _, ok := r.at[id]; !ok {
		return false
	}
	delete(r.at, id) // its place in order goes when it reaches the head
	return true
}

// len returns how many ids are remembered.
func (r *recentIDs) len() int { return len(r.at) }

// expire forgets the ids older than recentTTL.
func (r *recentIDs) expire(now time.Time) {
	for r.head < len(r.order) && now.Sub(r.order[r.head].at) >= recentTTL {
		r.pop()
	}
}

// pop forgets the oldest id, or the place of one already taken.
func (r *recentIDs) pop() {
	if r.head == len(r.order) {
		return
	}
	e := r.order[r.head]
	r.order[r.head] = recentID{}
	r.head++
	if at, ok := r.at[e.id]; ok && at.Equal(e.at) { // not taken and added again since
		delete(r.at, e.id)
	}
	if r.head > 64 && r.head*2 > len(r.order) {
		r.order = append(r.order[:0:0], r.order[r.head:]...)
		r.head = 0
	}
}
