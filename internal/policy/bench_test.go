package policy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkDecide50Rules: a call meets 50 rules, most on other tools, a
// few reading its arguments and caller, none deciding: the cost a
// policy adds to a call that it lets through.
func BenchmarkDecide50Rules(b *testing.B) {
	var rules []string
	for i := range 50 {
		switch i % 5 {
		case 0:
			rules = append(rules, fmt.Sprintf(`{"name":"r%d","on":"call","when":"args.amount > %d && caller.role != \"owner\"","effect":"deny"}`, i, 1000+i))
		case 1:
			rules = append(rules, fmt.Sprintf(`{"name":"r%d","on":"call","tools":["other_%d_*"],"when":"true","effect":"deny"}`, i, i))
		default:
			rules = append(rules, fmt.Sprintf(`{"name":"r%d","on":"call","tools":["t*"],"when":"caller.key.name == \"k%d\"","effect":"deny"}`, i, i))
		}
	}
	d, err := Parse([]byte(`{"rules":[` + strings.Join(rules, ",") + `]}`))
	if err != nil {
		b.Fatal(err)
	}
	p, err := Compile(d, Options{})
	if err != nil {
		b.Fatal(err)
	}
	in := Input{Caller: alice, Tool: Tool{Name: "tool"}, Args: json.RawMessage(`{"amount": 10, "note": "hello"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if d := p.Decide(OnCall, &in); d.Effect != "" {
			b.Fatal(d)
		}
	}
}
