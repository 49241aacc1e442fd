package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// warmup is how many calls each target and shape gets before it is timed.
const warmup = 500

// BenchmarkToolCall times tools/call of echo, direct, through the gateway
// and through a gateway that caches echo's results (gateway-cached: every
// call after the first is a hit), with 1 caller, 16 callers on one session and 16 callers on a
// session each. Besides ns/op (wall time per call, the inverse of
// throughput) it reports p50-µs, p99-µs, calls/s and cpu-µs/call
// (CPU time of the whole process per call). Fix the count for
// comparable runs:
//
//	go test ./bench -run '^$' -bench 'ToolCall$' -benchtime 5000x -count 5
func BenchmarkToolCall(b *testing.B) {
	if testing.Short() {
		b.Skip("starts a gateway and a server; skipped under -short")
	}
	ctx := context.Background()
	for _, t := range startTargets(b) {
		b.Run(t.Name, func(b *testing.B) {
			for _, cfg := range Configs {
				b.Run(cfg.Name, func(b *testing.B) {
					ss := sessionsFor(b, t, cfg)
					b.ReportAllocs()
					b.ResetTimer()
					res, err := Run(ctx, ss, cfg.Callers, b.N)
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(micros(res.P50), "p50-µs")
					b.ReportMetric(micros(res.P99), "p99-µs")
					b.ReportMetric(res.PerSec(), "calls/s")
					b.ReportMetric(micros(res.CPUPerCall()), "cpu-µs/call")
				})
			}
		})
	}
}

// BenchmarkToolCallSplit splits one caller's tools/call, direct and through
// the gateway, into its legs (medians): in-µs from the client to the echo
// handler, handler-µs, and out-µs from the handler back to the client.
//
//	go test ./bench -run '^$' -bench ToolCallSplit -benchtime 5000x
func BenchmarkToolCallSplit(b *testing.B) {
	if testing.Short() {
		b.Skip("starts a gateway and a server; skipped under -short")
	}
	ctx := context.Background()
	for _, t := range startTargets(b) {
		b.Run(t.Name, func(b *testing.B) {
			ss := sessionsFor(b, t, Configs[0])
			b.ResetTimer()
			sp, err := RunSplit(ctx, ss[0], b.N)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(micros(sp.In), "in-µs")
			b.ReportMetric(micros(sp.Handler), "handler-µs")
			b.ReportMetric(micros(sp.Out), "out-µs")
		})
	}
}

// startTargets starts both targets for the benchmark b; they stop when it
// ends.
func startTargets(b *testing.B) []*Target {
	b.Helper()
	direct, err := StartDirect()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closeTarget(b, direct) })
	gw, err := StartGateway(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closeTarget(b, gw) })
	cg, err := StartCachedGateway(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closeTarget(b, cg) })
	return []*Target{direct, gw, cg}
}

// TestTargetsBothEras checks that direct and gateway answer echo over
// 2025-11-25 sessions and the stateless 2026-07-28 protocol.
func TestTargetsBothEras(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a gateway and a server; skipped under -short")
	}
	direct, err := StartDirect()
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	gw, err := StartGateway(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tg := range []*Target{direct, gw} {
		for _, v := range []string{ProtocolVersion, StatelessVersion} {
			ss, err := tg.SessionsAt(ctx, 1, v)
			if err != nil {
				t.Fatalf("%s %s: %v", tg.Name, v, err)
			}
			if got := ss[0].InitializeResult(); got == nil || got.ProtocolVersion != v {
				t.Errorf("%s %s: initialize (or discover) result %+v, want version %s", tg.Name, v, got, v)
			}
			if _, err := Run(ctx, ss, 4, 40); err != nil {
				t.Errorf("%s %s: %v", tg.Name, v, err)
			}
		}
	}
}

// TestCachedGatewayHits checks the cached target: from 16 callers, in both
// protocol eras, only the first call reaches the agent and every answer is
// still right.
func TestCachedGatewayHits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a gateway; skipped under -short")
	}
	cg, err := StartCachedGateway(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cg.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ss, err := cg.Sessions(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, ss, 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, ss, 16, 400); err != nil {
		t.Fatal(err)
	}
	if ss, err = cg.SessionsAt(ctx, 1, StatelessVersion); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, ss, 16, 400); err != nil {
		t.Fatal(err)
	}
	if n := cg.AgentCalls(); n != 1 {
		t.Errorf("calls that reached the agent = %d, want 1 (the rest cache hits)", n)
	}
}

// TestGatewayAloneWithAgent checks the pieces of bench/sep/run.sh: a
// gateway started without its agent answers echo once an echo agent
// connects with the key it gave, in both eras, and its calls reach that
// agent (a cached gateway's first call too, then hits), and the policy
// gateway's rules decide.
func TestGatewayAloneWithAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a gateway; skipped under -short")
	}
	ic, err := StartInterceptor()
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	for _, name := range []string{SideGateway, SideGatewayCached, SideGatewayPolicy, SideGatewayInterceptor} {
		gw, agentKey, url, err := StartGatewayAlone(t.TempDir(), name, ic.URL)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		ran := make(chan error, 1)
		go func() { ran <- RunEchoAgent(ctx, url, agentKey) }()
		for _, v := range []string{ProtocolVersion, StatelessVersion} {
			ss, err := gw.SessionsAt(ctx, 1, v)
			if err != nil {
				t.Fatalf("%s %s: %v", name, v, err)
			}
			// The agent connects in the background: Run checks every answer.
			invoked := ic.Invoked()
			var runErr error
			for range 100 {
				if _, runErr = Run(ctx, ss, 4, 40); runErr == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if runErr != nil {
				t.Errorf("%s %s: %v", name, v, runErr)
			}
			if n := ic.Invoked() - invoked; name == SideGatewayInterceptor && n < 40 {
				t.Errorf("%s %s: the interceptor ran %d times for 40 calls, want once a call", name, v, n)
			}
			if n := ic.Conns(); n > 8 {
				// Go's transport keeps 2 idle connections per host: past
				// that, 4 callers dialled anew for most calls.
				t.Errorf("%s %s: 4 callers reached the interceptor server over %d connections, want at most 8", name, v, n)
			}
			if name == SideGatewayPolicy {
				// The rules are live: the one call they decide is refused.
				r, err := ss[0].CallTool(ctx, &mcp.CallToolParams{Name: ToolName, Arguments: map[string]any{"text": "never-7"}})
				if err != nil || !r.IsError {
					t.Errorf("%s %s: echo never-7: %v %+v, want refused by rule call-7", name, v, err, r)
				}
			}
		}
		cancel()
		if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("%s: the agent ended with %v", name, err)
		}
		if err := gw.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestRunInvokes checks the bare round trip the interceptor target is
// compared with: every invoke is answered valid, and counted.
func TestRunInvokes(t *testing.T) {
	ic, err := StartInterceptor()
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	r, err := RunInvokes(t.Context(), ic.URL, 200, 4)
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls != 200 || r.P50 <= 0 || ic.Invoked() < 200 {
		t.Errorf("RunInvokes = %+v with %d invokes served, want 200 calls (and their warm-up) served", r, ic.Invoked())
	}
}

// sessionsFor opens and warms up the sessions a shape uses, once per target
// and shape: the benchmark function runs several times with growing b.N.
func sessionsFor(b *testing.B, t *Target, cfg Config) []*mcp.ClientSession {
	b.Helper()
	key := t.Name + "/" + cfg.Name
	if ss, ok := opened[key]; ok {
		return ss
	}
	n := 1
	if cfg.PerCaller {
		n = cfg.Callers
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ss, err := t.SessionsAt(ctx, n, cfg.ProtocolVersion())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := Run(ctx, ss, cfg.Callers, warmup); err != nil {
		b.Fatal(err)
	}
	opened[key] = ss
	return ss
}

// opened holds the sessions of the running benchmark by target and shape;
// they close with their target.
var opened = map[string][]*mcp.ClientSession{}

func closeTarget(b *testing.B, t *Target) {
	for k := range opened {
		if strings.HasPrefix(k, t.Name+"/") {
			delete(opened, k)
		}
	}
	if err := t.Close(); err != nil {
		b.Errorf("close %s: %v", t.Name, err)
	}
}
