package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/store"
)

// A replica that reads nothing holds no caller past its wait or its
// cancellation, and does not hold up the gateway's shutdown: calls with
// large arguments (far more than the socket takes) each end at their wait
// with the timeout message, a cancelled one ends at its cancellation, and
// the gateway closes within its bound.
func TestStuckAgentHoldsNoCaller(t *testing.T) {
	t.Parallel()
	// The watchdog would close the silent replica after two heartbeats
	// and so end everything it holds: far off here.
	e := newEnv(t, func(o *envOptions) { o.heartbeat = time.Minute })
	const wait = time.Second
	// This agent never reads: what the gateway sends it fills the socket,
	// as for an agent that is stuck or behind a very slow link.
	sink, hold := tool("sink"), tool("hold")
	sink.TimeoutMs = int(wait.Milliseconds())
	hold.TimeoutMs = 60_000
	e.dialAgent(t, agentproto.Registration{Tools: []agentproto.Tool{sink, hold}})
	waitFor(t, "the replica to register", func() bool { return len(e.gw.Registry().All()) == 1 })
	cs := e.connect("2025-11-25", e.clientKey, nil)
	args := map[string]any{"data": strings.Repeat("x", 900_000)}

	// 16 calls of 900 kB: some 14 MB, more than the socket and the
	// gateway's queue for it take together.
	const calls = 16
	// The gateway gives up on each call at its wait (the call log's
	// duration runs from when it took the call, checked below). Held by
	// the full socket, a call would end only with the client's own
	// deadline (wait + 30 s), as an error: that catches the hang. How
	// long the client takes to hear the answer is not asserted: it also
	// sends and parses 900 kB per call, which on a machine busy with
	// other suites took from 3 s to 28 s.
	const slack = 5 * time.Second
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), wait+30*time.Second)
			defer cancel()
			start := time.Now()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sink", Arguments: args})
			if err != nil {
				t.Errorf("call %d: %v after %v", i, err, time.Since(start))
				return
			}
			if want := `Request for tool "sink" timed out after 1000ms`; !res.IsError || text(res) != want {
				t.Errorf("call %d = isError %v %q, want %q", i, res.IsError, text(res), want)
			}
		})
	}
	wg.Wait()
	var timeouts []store.Call
	waitFor(t, "the call log to hold the timeouts", func() bool {
		timeouts = timeouts[:0]
		for _, c := range e.calls() {
			if c.Outcome == store.OutcomeTimeout {
				timeouts = append(timeouts, c)
			}
		}
		return len(timeouts) == calls
	})
	for _, c := range timeouts {
		if c.Duration < wait || c.Duration > wait+slack {
			t.Errorf("a call timed out after %v at the gateway, want its wait (%v) and at most %v more", c.Duration, wait, slack)
		}
	}

	// The socket is still full. A call the client cancels ends then: its
	// record says cancelled, long before its wait (a minute) would have
	// ended it.
	rep := e.gw.Registry().All()[0]
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hold", Arguments: map[string]any{"data": "cancel me"}})
		cancelled <- err
	}()
	waitFor(t, "the gateway to take the call", func() bool { return rep.Inflight() == 1 })
	left := time.Now()
	cancel()
	<-cancelled
	var record store.Call
	waitFor(t, "the cancelled call's record", func() bool {
		for _, c := range e.calls() {
			if c.Name == "hold" {
				record = c
				return true
			}
		}
		return false
	})
	if record.Outcome != store.OutcomeCancelled {
		t.Errorf("the cancelled call's outcome is %q, want %q", record.Outcome, store.OutcomeCancelled)
	}
	// Not cancelled, it would end at its own 60 s wait.
	if d := record.Time.Add(record.Duration).Sub(left); d > 30*time.Second {
		t.Errorf("the cancelled call ended %v after the client left, want well before its 60s wait", d)
	}
	if n := rep.Inflight(); n != 0 {
		t.Errorf("the replica has %d calls in flight after the cancel, want 0", n)
	}

	// Shutdown says goodbye to the replica whose socket is still full,
	// and does not wait for it to read.
	closing := time.Now()
	if err := e.gw.Close(); err != nil {
		t.Errorf("close gateway: %v", err)
	}
	if took := time.Since(closing); took > 10*time.Second {
		t.Errorf("the gateway took %v to close, want at most 10s (2s for the replica)", took)
	}
}
