package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config is one load shape.
type Config struct {
	Name    string // as in the benchmark's name: c1, c16, c16-sessions, c16-stateless
	Callers int    // concurrent callers
	// PerCaller gives each caller its own session; otherwise all share one.
	PerCaller bool
	// Version is the protocol version the sessions speak; "" is
	// [ProtocolVersion].
	Version string
}

// ProtocolVersion returns the protocol version of c's sessions.
func (c Config) ProtocolVersion() string {
	if c.Version == "" {
		return ProtocolVersion
	}
	return c.Version
}

// Configs are the shapes measured, in order: 2025-11-25 sessions, then the
// stateless 2026-07-28 protocol (c1-stateless, c16-stateless).
var Configs = []Config{
	{Name: "c1", Callers: 1},
	{Name: "c16", Callers: 16},
	{Name: "c16-sessions", Callers: 16, PerCaller: true},
	{Name: "c1-stateless", Callers: 1, Version: StatelessVersion},
	{Name: "c16-stateless", Callers: 16, Version: StatelessVersion},
}

// Result is how one run went.
type Result struct {
	Calls   int
	Elapsed time.Duration // wall time of the whole run
	P50     time.Duration
	P99     time.Duration
	// CPU is the CPU time the whole process (client, server, agent) used
	// during the run; 0 where it is not measured.
	CPU time.Duration
}

// CPUPerCall returns the process CPU time per call.
func (r Result) CPUPerCall() time.Duration {
	if r.Calls == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Calls)
}

// PerSec returns the calls completed per second of wall time.
func (r Result) PerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Calls) / r.Elapsed.Seconds()
}

// Text is the echo argument every call sends.
const Text = "hello from spacefix-bench"

// Run makes calls tools/call requests to echo from callers goroutines, each
// using sessions[i%len(sessions)], and returns the latency percentiles and
// throughput. Any failed call, or an answer other than the text sent, ends
// the run with an error.
func Run(ctx context.Context, sessions []*mcp.ClientSession, callers, calls int) (Result, error) {
	if len(sessions) == 0 || callers <= 0 {
		return Result{}, errors.New("run: need a session and a caller")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		lats  = make([][]time.Duration, callers)
		start = time.Now()
		cpu0  = processCPU()
	)
	labelled(ctx, SideClient, func(ctx context.Context) {
		for i := range callers {
			cs := sessions[i%len(sessions)]
			lats[i] = make([]time.Duration, 0, calls/callers+1)
			wg.Go(func() {
				params := &mcp.CallToolParams{Name: ToolName, Arguments: EchoIn{Text: Text}}
				for next.Add(1) <= int64(calls) && ctx.Err() == nil {
					t0 := time.Now()
					res, err := cs.CallTool(ctx, params)
					d := time.Since(t0)
					if err == nil {
						err = check(res)
					}
					if err != nil {
						cancel(fmt.Errorf("tools/call: %w", err))
						return
					}
					lats[i] = append(lats[i], d)
				}
			})
		}
		wg.Wait()
	})
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	if err := context.Cause(ctx); err != nil {
		return Result{}, err
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	return Result{Calls: len(all), Elapsed: elapsed, CPU: cpu, P50: quantile(all, 0.50), P99: quantile(all, 0.99)}, nil
}

func check(res *mcp.CallToolResult) error {
	if res.IsError || len(res.Content) != 1 {
		return fmt.Errorf("unexpected result %+v", res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok || tc.Text != Text {
		return fmt.Errorf("unexpected content %+v", res.Content[0])
	}
	return nil
}

// quantile returns the q-quantile of sorted by the nearest-rank method.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
