package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FiftyRules is a policy of 50 rules that every call of echo evaluates and
// none decides: 40 on call, reading the arguments and the caller, and 10
// on result, reading the result's text. The worst case for a policy that
// lets a call through: no rule stops the search early.
func FiftyRules() json.RawMessage {
	type rule struct {
		Name   string   `json:"name"`
		On     string   `json:"on"`
		Tools  []string `json:"tools"`
		When   string   `json:"when"`
		Effect string   `json:"effect"`
		Redact []string `json:"redact,omitempty"`
	}
	var rules []rule
	for i := range 40 {
		rules = append(rules, rule{Name: fmt.Sprintf("call-%d", i), On: "call", Tools: []string{"ec*"},
			When: fmt.Sprintf(`args.text == "never-%d" && caller.role != "owner"`, i), Effect: "deny"})
	}
	for i := range 10 {
		rules = append(rules, rule{Name: fmt.Sprintf("result-%d", i), On: "result", Tools: []string{"echo"},
			When: fmt.Sprintf(`result.text.contains("never-%d")`, i), Effect: "redact", Redact: []string{"never"}})
	}
	b, err := json.Marshal(map[string]any{"rules": rules})
	if err != nil {
		panic(err)
	}
	return b
}

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
