package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

// The garbage allowed over the live memory: 100 MiB while that is more
// than half of it, half of it after.
func TestGCHeadroom(t *testing.T) {
	for _, c := range []struct{ live, want uint64 }{
		{0, 100 << 20},
		{10 << 20, 100 << 20},
		{150 << 20, 100 << 20},
		{200 << 20, 100 << 20},
		{1 << 30, 512 << 20},
	} {
		if got := gcHeadroom(c.live); got != c.want {
			t.Errorf("gcHeadroom(%d MiB) = %d MiB, want %d MiB", c.live>>20, got>>20, c.want>>20)
		}
	}
}

// A user's GOGC or GOMEMLIMIT is kept: serve sets neither.
func TestSetGCKeepsTheUsers(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "123")
			pct := debug.SetGCPercent(77)
			limit := debug.SetMemoryLimit(-1)
			defer debug.SetGCPercent(pct)
			setGC()
			if got := debug.SetGCPercent(pct); got != 77 {
				t.Errorf("GC percent %d, want the 77 set before", got)
			}
			if got := debug.SetMemoryLimit(-1); got != limit {
				t.Errorf("memory limit %d, want %d as before", got, limit)
			}
		})
	}
}

// The tuner sets the limit to the live memory plus the headroom after
// every collection.
func TestGCTunerFollowsCollections(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	tu := &gcTuner{samples: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}}
	tu.arm()
	defer tu.stopped.Store(true)
	for range 10 {
		debug.SetMemoryLimit(math.MaxInt64)
		runtime.GC()
		for range 100 {
			if debug.SetMemoryLimit(-1) != math.MaxInt64 {
				break
			}
			runtime.Gosched()
		}
		if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
			if got < 100<<20 {
				t.Errorf("limit %d MiB, want at least the 100 MiB headroom", got>>20)
			}
			return
		}
	}
	t.Error("ten collections and the tuner did not set the limit")
}
