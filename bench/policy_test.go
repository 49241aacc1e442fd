package bench

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkPolicy times tools/call of echo through a gateway without a
// policy and through one whose project has [FiftyRules], side by side, at
// one caller and 16 (2025-11-25 sessions) and one stateless caller; the
// figure to read is cpu-µs/call (CPU of the whole process per call):
//
//	go test ./bench -run '^$' -bench 'Policy$' -benchtime 5000x -count 5
func BenchmarkPolicy(b *testing.B) {
	if testing.Short() {
		b.Skip("starts two gateways; skipped under -short")
	}
	plain, err := StartGateway(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closeTarget(b, plain) })
	ruled, err := StartPolicyGateway(b.TempDir(), "gateway-50-rules", FiftyRules())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closeTarget(b, ruled) })
	ctx := context.Background()
	// The rules are live: the one call they decide is refused.
	probe := sessionsFor(b, ruled, Configs[0])[0]
	if r, err := probe.CallTool(ctx, &mcp.CallToolParams{Name: ToolName, Arguments: map[string]any{"text": "never-7"}}); err != nil || !r.IsError {
		b.Fatalf("echo never-7 through the 50 rules: %v %+v, want refused by rule call-7", err, r)
	}
	for _, cfg := range []Config{Configs[0], Configs[1], Configs[3]} {
		for _, t := range []*Target{plain, ruled} {
			b.Run(cfg.Name+"/"+t.Name, func(b *testing.B) {
				ss := sessionsFor(b, t, cfg)
				b.ResetTimer()
				res, err := Run(ctx, ss, cfg.Callers, b.N)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(micros(res.P50), "p50-µs")
				b.ReportMetric(res.PerSec(), "calls/s")
				b.ReportMetric(micros(res.CPUPerCall()), "cpu-µs/call")
			})
		}
	}
}
