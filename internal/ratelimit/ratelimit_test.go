package ratelimit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestAllowWithinWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New()
		for i := range 3 {
			if ok, _ := l.Allow("key_a", 3); !ok {
				t.Fatalf("call %d of 3 refused", i+1)
			}
			time.Sleep(10 * time.Second)
		}
		// Calls at 0s, 10s, 20s; now 30s.
		ok, retry := l.Allow("key_a", 3)
		if ok || retry != 30*time.Second {
			t.Fatalf("4th call = %v, retry %v; want refused, retry 30s (when the call at 0s leaves)", ok, retry)
		}
		if ok, _ := l.Allow("key_b", 3); !ok {
			t.Error("another key was refused: limits are per key")
		}
		time.Sleep(retry)
		if ok, _ := l.Allow("key_a", 3); !ok {
			t.Fatal("refused once the retry time passed")
		}
		// Refused calls are not counted: the next slot opens at 70s.
		ok, retry = l.Allow("key_a", 3)
		if ok || retry != 10*time.Second {
			t.Errorf("call at 60s = %v, retry %v; want refused, retry 10s", ok, retry)
		}
	})
}

func TestNoLimit(t *testing.T) {
	l := New()
	for range 1000 {
		if ok, _ := l.Allow("k", 0); !ok {
			t.Fatal("refused with no limit")
		}
	}
}

func TestLimitLowered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New()
		for range 5 {
			l.Allow("k", 10)
			time.Sleep(time.Second)
		}
		// Five calls at 0..4s, now 5s; the limit drops to 2: the calls up
		// to the one at 3s must leave first, at 63s.
		ok, retry := l.Allow("k", 2)
		if ok || retry != 58*time.Second {
			t.Errorf("after lowering = %v, %v; want refused, retry 58s", ok, retry)
		}
	})
}

func TestForgetsIdleKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New()
		for i := range 100 {
			l.Allow(fmt.Sprint("k", i), 5)
		}
		time.Sleep(2 * Window)
		l.Allow("fresh", 5)
		l.mu.Lock()
		n := len(l.keys)
		l.mu.Unlock()
		if n != 1 {
			t.Errorf("limiter remembers %d keys after they went idle, want 1", n)
		}
	})
}

func TestConcurrentExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New()
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range 100 {
					if ok, _ := l.Allow("k", 250); ok {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if n := allowed.Load(); n != 250 {
			t.Errorf("%d calls allowed at once, want exactly 250", n)
		}
	})
}

func TestMessage(t *testing.T) {
	for _, tt := range []struct {
		n     int
		retry time.Duration
		want  string
	}{
		{60, 12300 * time.Millisecond, "Rate limit exceeded: this key may make 60 calls per minute. Try again in 13 seconds."},
		{1, 0, "Rate limit exceeded: this key may make 1 call per minute. Try again in 1 second."},
		{100, 2 * time.Second, "Rate limit exceeded: this key may make 100 calls per minute. Try again in 2 seconds."},
	} {
		if got := Message(tt.n, tt.retry); got != tt.want {
			t.Errorf("Message(%d, %v) = %q, want %q", tt.n, tt.retry, got, tt.want)
		}
	}
}

func BenchmarkAllow(b *testing.B) {
	l := New()
	i := 0
	for b.Loop() {
		l.Allow(fmt.Sprint("k", i%64), 1_000_000)
		i++
	}
}

// Calls another gateway allowed count here: a key's limit holds across the
// gateways that exchange them.
func TestShared(t *testing.T) {
	a, b := New(), New()
	a.Share()
	b.Share()
	for i := range 3 {
		if ok, _ := a.Allow("k", 5); !ok {
			t.Fatalf("call %d on a refused", i)
		}
	}
	if f := b.Fresh(); f != nil {
		t.Errorf("b allowed nothing, yet has fresh calls %v", f)
	}
	fresh := a.Fresh()
	if len(fresh["k"]) != 3 {
		t.Fatalf("a's fresh calls = %v, want 3 of k", fresh)
	}
	if a.Fresh() != nil {
		t.Error("Fresh twice returned the same calls again")
	}
	b.Merge("k", fresh["k"])
	for i := range 2 {
		if ok, _ := b.Allow("k", 5); !ok {
			t.Fatalf("call %d on b refused with 3 of 5 used on a", i)
		}
	}
	ok, retry := b.Allow("k", 5)
	if ok || retry <= 0 || retry > Window {
		t.Errorf("sixth call across a and b: ok %v, retry %v; want refused", ok, retry)
	}
	// Calls older than the window are not merged.
	c := New()
	c.Merge("k", []time.Time{time.Now().Add(-2 * Window)})
	if ok, _ := c.Allow("k", 1); !ok {
		t.Error("a call from two windows ago counted")
	}
}
