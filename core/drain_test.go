//go:build go1.25

package core

import (
	"testing"
	"testing/synctest"
	"time"
)

// A stopping agent waits for its running calls on the event of the last
// one ending, not by polling: in a bubble of fake time, waitIdle returns at
// the very instant the last call ends, never at the next tick of a clock.
func TestDrainWakesWhenTheLastCallEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSession(&Agent{}, nil)
		s.calls["c-1"], s.calls["c-2"] = &call{}, &call{}
		start := time.Now()
		var took time.Duration
		var ok bool
		done := make(chan struct{})
		go func() {
			ok = s.waitIdle(100*time.Millisecond, 10*time.Second)
			took = time.Since(start)
			close(done)
		}()
		time.Sleep(153 * time.Millisecond)
		s.forget("c-1")
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("waitIdle returned while a call was still running")
		default:
		}
		time.Sleep(4 * time.Millisecond)
		s.forget("c-2")
		<-done
		if !ok || took != 157*time.Millisecond {
			t.Errorf("waitIdle = %v after %v; want true after 157ms, when the last call ended", ok, took)
		}
	})
}

// Calls that end before the settle time (when the gateway may still send
// calls it sent before it heard drain) do not cut it short.
func TestDrainKeepsTheSettleTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSession(&Agent{}, nil)
		s.calls["c-1"] = &call{}
		start := time.Now()
		go func() {
			time.Sleep(30 * time.Millisecond)
			s.forget("c-1")
		}()
		if ok := s.waitIdle(100*time.Millisecond, 10*time.Second); !ok || time.Since(start) != 100*time.Millisecond {
			t.Errorf("waitIdle = %v after %v; want true after the 100ms settle time", ok, time.Since(start))
		}
	})
}

// A call that does not end is given up on at the drain timeout.
func TestDrainTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSession(&Agent{}, nil)
		s.calls["c-1"] = &call{}
		start := time.Now()
		if ok := s.waitIdle(100*time.Millisecond, time.Second); ok || time.Since(start) != time.Second {
			t.Errorf("waitIdle = %v after %v; want false after the 1s timeout", ok, time.Since(start))
		}
	})
}
