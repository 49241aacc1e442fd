package main

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// The gateway's garbage collection, unless the environment sets GOGC or
// GOMEMLIMIT (then Go's own settings are left alone):
//
//   - GOGC=400. Most of what a call allocates is short-lived JSON, and a
//     gateway's live heap is a few MiB: collecting a fifth as often saves
//     CPU per call (docs/benchmarks.md) for memory a machine has.
//   - A soft memory limit of the live memory plus [gcHeadroom] of it,
//     set again after every collection. GOGC=400 lets garbage grow to four
//     times the live memory, which with 10,000 agents (~150 MiB live, mostly
//     idle connections) is 600 MiB more; the limit caps the garbage at the
//     larger of 100 MiB and half the live memory, so a big gateway collects
//     as if GOGC were 50–100 and a small one is not touched.
//
// The limit is never under the live memory, so it cannot make the collector
// run without pause; its cost is more collections on a gateway whose live
// memory is over ~25 MiB, measured in docs/benchmarks.md ("Fan-in").
func setGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(400)
	gcTunerOnce.Do(func() {
		t := &gcTuner{samples: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}}
		t.update()
		t.arm()
	})
}

var gcTunerOnce sync.Once

// gcHeadroom returns how much garbage may pile up over live bytes of live
// memory before a collection, beyond what GOGC already allows.
func gcHeadroom(live uint64) uint64 {
	return max(100<<20, live/2)
}

// gcTuner sets the soft memory limit after each collection.
type gcTuner struct {
	samples []metrics.Sample // live heap, goroutine stacks
	stopped atomic.Bool      // set: no more updates (tests)
}

// update sets the limit from the live memory the last collection found.
func (t *gcTuner) update() {
	metrics.Read(t.samples)
	var live uint64
	for _, s := range t.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			live += s.Value.Uint64()
		}
	}
	limit := live + gcHeadroom(live)
	debug.SetMemoryLimit(int64(min(limit, math.MaxInt64)))
}

// sentinel is what the collector frees each cycle to call the tuner; it
// holds a pointer so that it is not a tiny allocation (whose cleanups may
// never run).
type sentinel struct{ _ *int }

// arm calls update, and arms again, once the next collection is over.
func (t *gcTuner) arm() {
	runtime.AddCleanup(new(sentinel), func(t *gcTuner) {
		if t.stopped.Load() {
			return
		}
		t.update()
		t.arm()
	}, t)
}
