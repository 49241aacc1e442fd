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
	sink := tool("sink")
	sink.TimeoutMs = int(wait.Milliseconds())
	e.dialAgent(t, agentproto.Registration{Tools: []agentproto.Tool{sink}})
	waitFor(t, "the replica to register", func() bool { return len(e.gw.Registry().All()) == 1 })
	cs := e.connect("2025-11-25", e.clientKey, nil)
	args := map[string]any{"data": strings.Repeat("x", 900_000)}

	// 24 calls of 900 kB: some 21 MB, several times what a socket takes.
	const calls = 24
	const slack = 2 * time.Second // the bound over the wait, for a loaded machine
	start := time.Now()
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), wait+30*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sink", Arguments: args})
			took := time.Since(start)
			if err != nil {
				t.Errorf("call %d: %v after %v", i, err, took)
				return
			}
			if want := `Request for tool "sink" timed out after 1000ms`; !res.IsError || text(res) != want {
				t.Errorf("call %d = isError %v %q, want %q", i, res.IsError, text(res), want)
			}
			if took > wait+slack {
				t.Errorf("call %d answered after %v, want its wait (%v) and at most %v more", i, took, wait, slack)
			}
		})
	}

	wg.Wait()
	timeouts := func() (n int) {
		for _, c := range e.calls() {
			if c.Outcome == store.OutcomeTimeout {
				n++
			}
		}
		return n
	}
	waitFor(t, "the call log to hold the timeouts", func() bool { return timeouts() == calls })

	// The socket is still full. A call the client cancels ends then: its
	// record says cancelled, long before its wait would have ended it.
	rep := e.gw.Registry().All()[0]
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sink", Arguments: map[string]any{"data": "cancel me"}})
		cancelled <- err
	}()
	waitFor(t, "the gateway to take the call", func() bool { return rep.Inflight() == 1 })
	left := time.Now()
	cancel()
	<-cancelled
	var record store.Call
	waitFor(t, "the cancelled call's record", func() bool {
		for _, c := range e.calls() {
			if c.Outcome != store.OutcomeTimeout {
				record = c
				return true
			}
		}
		return false
	})
	if record.Outcome != store.OutcomeCancelled {
		t.Errorf("the cancelled call's outcome is %q, want %q", record.Outcome, store.OutcomeCancelled)
	}
	if d := record.Time.Add(record.Duration).Sub(left); d > slack {
		t.Errorf("the cancelled call ended %v after the client left, want at most %v", d, slack)
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
	if took := time.Since(closing); took > 5*time.Second {
		t.Errorf("the gateway took %v to close, want at most 5s", took)
	}
}
