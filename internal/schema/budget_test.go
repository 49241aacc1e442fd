package schema

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A schema whose evaluation grows exponentially (every branch refers back
// to the root, or anyOf nested over shared definitions) used to spin for
// ever on each call; it runs out of steps and refuses the arguments.
func TestFailClosedStepBudget(t *testing.T) {
	defs := `"$defs":{"a0":{"type":"string"}`
	for i := 1; i <= 40; i++ {
		defs += fmt.Sprintf(`,"a%d":{"anyOf":[{"$ref":"#/$defs/a%d"},{"$ref":"#/$defs/a%d"}]}`, i, i-1, i-1)
	}
	defs += "}"
	for _, tc := range []struct{ name, schema, args string }{
		{"anyOf to root", `{"type":"object","anyOf":[{"$ref":"#"},{"$ref":"#"}]}`, `{}`},
		{"allOf to root", `{"type":"object","allOf":[{"$ref":"#"},{"$ref":"#"}]}`, `{"a":1}`},
		{"oneOf to root", `{"oneOf":[{"$ref":"#"},{"$ref":"#"},{"type":"string"}]}`, `{}`},
		{"anyOf over shared definitions", `{` + defs + `,"properties":{"s":{"$ref":"#/$defs/a40"}}}`, `{"s":1}`},
		{"recursion per level", `{"anyOf":[{"type":"array","items":{"$ref":"#"}},{"type":"array","items":{"$ref":"#"}}]}`,
			strings.Repeat("[", 100) + "1" + strings.Repeat("]", 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Compile(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			got := messages(t, s.Validate(json.RawMessage(tc.args)))
			if diff := cmp.Diff([]string{stepsMsg}, got); diff != "" {
				t.Errorf("Validate(%s) (-want +got):\n%s", tc.args, diff)
			}
		})
	}
	// The same shapes with arguments that pass early are unaffected.
	s, err := Compile(json.RawMessage(`{` + defs + `,"properties":{"s":{"$ref":"#/$defs/a40"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(json.RawMessage(`{"s":"x"}`)); err != nil {
		t.Errorf("Validate(s=x) = %v, want nil", err)
	}
}

// TestValidateMessageCap: a call keeps at most maxMessages messages, so an
// argument of many bad values costs bounded memory.
func TestValidateMessageCap(t *testing.T) {
	s, err := Compile(json.RawMessage(`{"type":"object","properties":{"l":{"items":{"type":"string"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	args := `{"l":[` + strings.TrimSuffix(strings.Repeat("1,", 1500), ",") + `]}`
	got := messages(t, s.Validate(json.RawMessage(args)))
	if len(got) != maxMessages || got[0] != "data/l/0 must be string" || got[maxMessages-1] != "data/l/999 must be string" {
		t.Errorf("Validate(1,500 bad items) = %d messages, %q … %q; want %d, the first ones", len(got), got[0], got[len(got)-1], maxMessages)
	}
}

// An exponential schema over deep arguments refuses the call without
// keeping the millions of messages its failed branches report.
func TestFailClosedStepBudgetMemory(t *testing.T) {
	s, err := Compile(json.RawMessage(`{"anyOf":[{"type":"array","items":{"$ref":"#"}},{"type":"array","items":{"$ref":"#"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Repeat("[", 100) + "1" + strings.Repeat("]", 100)
	allocs := testing.AllocsPerRun(1, func() {
		if err := s.Validate(json.RawMessage(args)); err == nil {
			t.Fatal("Validate = nil, want the step budget refusal")
		}
	})
	if allocs > 10_000 {
		t.Errorf("Validate allocated %v times, want at most 10,000 (messages are capped)", allocs)
	}
}
