package policy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// The guards only ever pass over a rule whose condition cel-go would find
// false: every decision, audit hit and failure is the same with them as
// without, for conditions with and without guards, over arguments of
// every shape (absent fields, other types, nested maps, not an object).
func TestGuardsDecideAsCEL(t *testing.T) {
	conds := []string{
		`args.kind == "refund"`,
		`"refund" == args.kind`,
		`args.kind != "refund"`,
		`caller.role != "owner"`,
		`caller.role == "viewer" && !tool.readOnly`,
		`tool.name in ["pay", "refund"]`,
		`args.kind in ["refund", "void"]`,
		`args.kind in ["refund", args.other]`,
		`args.kind == "refund" && args.amount > 5`,
		`args.amount > 5 && args.kind == "refund"`,
		`has(args.kind) && args.kind == "refund"`,
		`args.kind == "refund" || args.kind == "void"`,
		`!(args.kind == "refund")`,
		`args["kind"] == "refund"`,
		`args.a.b == "x"`,
		`args.flag == true`,
		`args.flag != false && args.kind == "refund"`,
		`tool.annotations.team == "payments"`,
		`caller.person.email.endsWith("@example.com") && caller.role != "owner"`,
		`args.kind.startsWith("re")`,
		`args.kind.contains("fun") && caller.key.name == "ci"`,
		`result.text.contains("secret")`,
		`result.isError == true`,
		`result.structured.card.startsWith("4")`,
		`args.kind == "é€"`,
	}
	args := []string{
		``, `null`, `[]`, `{}`, `{"kind":"refund"}`, `{"kind":"void"}`, `{"kind":"x","amount":9}`, `{"kind":"refund","amount":9}`,
		`{"kind":5}`, `{"kind":true}`, `{"kind":null}`, `{"kind":{"a":1}}`, `{"kind":["refund"]}`, `{"kind":"é€"}`,
		`{"a":{"b":"x"}}`, `{"a":{"b":"y"}}`, `{"a":"b"}`, `{"a":{}}`, `{"flag":true}`, `{"flag":false,"kind":"refund"}`, `{"flag":"true"}`,
		`{"kind":"refund","other":"void"}`, `{"kind":"refunded"}`,
	}
	results := []*Result{nil, {Text: "a secret here"}, {Text: "nothing", IsError: true},
		{Structured: map[string]any{"card": "4111"}, Size: 20}, {Structured: map[string]any{"card": 4111.0}, Size: 20}, {Structured: "x", Size: 3}}
	tools := []Tool{{Name: "pay"}, {Name: "refund", ReadOnly: true, Annotations: map[string]any{"team": "payments"}}, {Name: "other", Annotations: map[string]any{"team": 7.0}}}
	callers := []Caller{alice, victor, ci}

	var rules []string
	for i, c := range conds {
		q, _ := json.Marshal(c)
		mode := ""
		if i%4 == 3 {
			mode = `,"mode":"audit"`
		}
		rules = append(rules, fmt.Sprintf(`{"name":"r%d","on":"call","when":%s,"effect":"deny"%s}`, i, q, mode),
			fmt.Sprintf(`{"name":"s%d","on":"result","when":%s,"effect":"deny"%s}`, i, q, mode))
	}
	// Each condition alone, and all of them in one policy in order.
	docs := []string{}
	for i := range conds {
		docs = append(docs, `{"rules":[`+rules[2*i]+`,`+rules[2*i+1]+`]}`)
	}
	all := `{"rules":[`
	for i, r := range rules {
		if i > 0 {
			all += ","
		}
		all += r
	}
	docs = append(docs, all+`]}`)

	guarded := 0
	for _, doc := range docs {
		with := mustCompile(t, doc, Options{})
		without := mustCompile(t, doc, Options{})
		for _, rs := range without.rules {
			for _, r := range rs {
				r.guards = nil
			}
		}
		for _, rs := range with.rules {
			for _, r := range rs {
				if len(r.guards) > 0 {
					guarded++
				}
			}
		}
		for _, a := range args {
			for _, res := range results {
				for _, tl := range tools {
					for _, c := range callers {
						for _, on := range []string{OnCall, OnResult} {
							in := Input{Caller: c, Tool: tl, Args: json.RawMessage(a), Result: res}
							in2 := in
							got, want := with.Decide(on, &in), without.Decide(on, &in2)
							got.patterns, want.patterns = nil, nil
							if !reflect.DeepEqual(got, want) {
								t.Fatalf("%s\non %s, args %s, result %+v, tool %s, caller %s:\nwith guards    %+v\nwithout guards %+v", doc, on, a, res, tl.Name, c.Role, got, want)
							}
						}
					}
				}
			}
		}
	}
	// The test reads guards: most conditions above have one.
	if guarded < 2*15 {
		t.Errorf("%d rules have guards, want most of them", guarded)
	}
}

// What makes a guard, and what does not.
func TestGuardsOf(t *testing.T) {
	for cond, want := range map[string]int{
		`args.kind == "refund"`:                             1,
		`args.kind == "refund" && caller.role != "owner"`:   2,
		`(args.a == "x" && args.b == "y") && args.c == "z"`: 3,
		`tool.name in ["a", "b"]`:                           1,
		`result.text.contains("x")`:                         1,
		`args.kind == "a" || args.kind == "b"`:              0,
		`!(args.kind == "a")`:                               0,
		`has(args.kind)`:                                    0,
		`args.amount > 5`:                                   0,
		`args.amount == 5`:                                  0,
		`now.getHours() > 5`:                                0,
		`args.kind == args.other`:                           0,
		`args.kind.contains(args.other)`:                    0,
	} {
		p := mustCompile(t, fmt.Sprintf(`{"rules":[{"name":"r","on":"call","when":%q,"effect":"deny"}]}`, cond), Options{})
		if got := len(p.rules[OnCall][0].guards); got != want {
			t.Errorf("%s: %d guards, want %d", cond, got, want)
		}
	}
}
