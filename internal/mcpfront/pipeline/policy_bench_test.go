package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/policy"
)

// BenchmarkPolicyPoint50Rules is what the policy point adds to a call it
// lets through, with the rules of bench.FiftyRules (40 on call, 10 on
// result, all evaluated, none deciding): the call's policy view built,
// the call rules read, the result rules read on a one-line text result.
// Compare with the gateway's CPU per call (docs/benchmarks.md):
//
//	go test ./internal/mcpfront -run '^$' -bench PolicyPoint50Rules -count 5
func BenchmarkPolicyPoint50Rules(b *testing.B) {
	var rules []string
	for i := range 40 {
		rules = append(rules, fmt.Sprintf(`{"name":"call-%d","on":"call","tools":["ec*"],"when":"args.text == \"never-%d\" && caller.role != \"owner\"","effect":"deny"}`, i, i))
	}
	for i := range 10 {
		rules = append(rules, fmt.Sprintf(`{"name":"result-%d","on":"result","tools":["echo"],"when":"result.text.contains(\"never-%d\")","effect":"redact","redact":["never"]}`, i, i))
	}
	p, err := policy.Compile(must(policy.Parse([]byte(`{"rules":[`+strings.Join(rules, ",")+`]}`))), policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	c := &access.Controls{Policy: p}
	t := &agents.Tool{Name: "echo", AgentKey: "k", Def: agentproto.Tool{Name: "echo"}}
	f := &Pipeline{}
	ctx := context.Background()
	caller := agentproto.Caller{KeyID: "key_1", KeyName: "bench", Project: "p", Scopes: scopesRW}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}
	b.ReportAllocs()
	for b.Loop() {
		pc := &callPolicy{f: f, p: p, in: policy.Input{Caller: policyCaller(caller), Tool: c.PolicyTool(t), Args: json.RawMessage(`{"text":"hello"}`)}, ic: InvokeContext(caller)}
		if d := pc.decide(policy.OnCall); d.Effect != "" {
			b.Fatal(d)
		}
		if out := pc.shape(ctx, res); out != res {
			b.Fatal("the result was changed")
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
