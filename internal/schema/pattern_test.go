package schema

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Backtracking-only patterns (the lookahead keeps them off RE2). On "a"×40
// followed by "z", slowPattern does match, but only after an exponential
// failed attempt at its first branch; slowNoMatch does not match, and says
// so only after the same exponential search.
const (
	slowPattern = `^(?!b)(?:(a+)+b|a*z)$`
	slowNoMatch = `^(?!b)(a+)+$`
)

var slowValue = strings.Repeat("a", 40) + "z"

// undecidedMsg is the one message of a call refused because slowPattern
// (or slowNoMatch) could not be decided in time.
func undecidedMsg(where, pat, what string) []string {
	return []string{where + ` could not be checked against pattern "` + pat + `" in time for ` + what +
		`; the arguments are refused: send a shorter or simpler value`}
}

func TestFailClosedUndecidedPattern(t *testing.T) {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	p, n, v := q(slowPattern), q(slowNoMatch), q(slowValue)
	keyName := `property name "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…"`
	for _, tc := range []struct {
		name, schema, args string
		want               []string
	}{
		{"pattern", `{"properties":{"s":{"pattern":` + n + `}}}`, `{"s":` + v + `}`,
			undecidedMsg("data/s", slowNoMatch, "this value")},
		{"not pattern", `{"properties":{"s":{"not":{"pattern":` + p + `}}}}`, `{"s":` + v + `}`,
			undecidedMsg("data/s", slowPattern, "this value")},
		{"patternProperties false", `{"patternProperties":{` + p + `:false}}`, `{` + v + `:1}`,
			undecidedMsg("data", slowPattern, keyName)},
		{"patternProperties schema", `{"patternProperties":{` + p + `:{"type":"string"}}}`, `{` + v + `:1}`,
			undecidedMsg("data", slowPattern, keyName)},
		{"patternProperties with additionalProperties", `{"patternProperties":{` + n + `:true},"additionalProperties":{"type":"string"}}`, `{` + v + `:"x"}`,
			undecidedMsg("data", slowNoMatch, keyName)},
		{"propertyNames not pattern", `{"propertyNames":{"not":{"pattern":` + p + `}}}`, `{` + v + `:1}`,
			undecidedMsg("data", slowPattern, "this value")},
		{"if pattern then", `{"properties":{"s":{"if":{"pattern":` + p + `},"then":false}}}`, `{"s":` + v + `}`,
			undecidedMsg("data/s", slowPattern, "this value")},
		{"if pattern else", `{"properties":{"s":{"if":{"not":{"pattern":` + p + `}},"else":false}}}`, `{"s":` + v + `}`,
			undecidedMsg("data/s", slowPattern, "this value")},
		{"contains", `{"properties":{"l":{"not":{"contains":{"pattern":` + p + `}}}}}`, `{"l":["b",` + v + `]}`,
			undecidedMsg("data/l/1", slowPattern, "this value")},
		{"anyOf", `{"properties":{"s":{"anyOf":[{"pattern":` + n + `},{"type":"string"}]}}}`, `{"s":` + v + `}`,
			undecidedMsg("data/s", slowNoMatch, "this value")},
		{"oneOf", `{"properties":{"s":{"oneOf":[{"not":{"pattern":` + p + `}},{"type":"number"}]}}}`, `{"s":` + v + `}`,
			undecidedMsg("data/s", slowPattern, "this value")},
		{"dependentSchemas", `{"dependentSchemas":{"k":{"properties":{"s":{"not":{"pattern":` + p + `}}}}}}`, `{"k":1,"s":` + v + `}`,
			undecidedMsg("data/s", slowPattern, "this value")},
		{"unevaluatedProperties", `{"$schema":"https://json-schema.org/draft/2020-12/schema","patternProperties":{` + n + `:true},"unevaluatedProperties":true}`, `{` + v + `:1}`,
			undecidedMsg("data", slowNoMatch, keyName)},
		{"items not pattern", `{"properties":{"l":{"items":{"not":{"pattern":` + p + `}}}}}`, `{"l":["b",` + v + `]}`,
			undecidedMsg("data/l/1", slowPattern, "this value")},
		{"other errors dropped", `{"required":["x"],"properties":{"s":{"not":{"pattern":` + p + `}}}}`, `{"s":` + v + `}`,
			undecidedMsg("data/s", slowPattern, "this value")},

		// Decided quickly: the same schemas validate as before.
		{"not pattern short valid", `{"properties":{"s":{"not":{"pattern":` + p + `}}}}`, `{"s":"b"}`, nil},
		{"not pattern short invalid", `{"properties":{"s":{"not":{"pattern":` + p + `}}}}`, `{"s":"aaz"}`,
			[]string{"data/s must NOT be valid"}},
		{"patternProperties short", `{"patternProperties":{` + p + `:false}}`, `{"aaz":1}`,
			[]string{"data/aaz boolean schema is false"}},
		{"patternProperties short other key", `{"patternProperties":{` + p + `:false}}`, `{"b":1}`, nil},
		{"pattern short", `{"properties":{"s":{"pattern":` + n + `}}}`, `{"s":"aaz"}`,
			[]string{`data/s must match pattern "` + slowNoMatch + `"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Compile(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			got := messages(t, s.Validate(json.RawMessage(tc.args)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Validate(%s) against %s (-want +got):\n%s", tc.args, tc.schema, diff)
			}
		})
	}
}

// TestFailClosedPooledState checks that an undecided call does not leave
// its verdict in the pooled state for the next call.
func TestFailClosedPooledState(t *testing.T) {
	s, err := Compile(json.RawMessage(`{"properties":{"s":{"not":{"pattern":"` + slowPattern + `"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Validate(json.RawMessage(`{"s":"` + slowValue + `"}`)); err == nil {
			t.Fatalf("Validate(slow) = nil, want the undecided pattern refused")
		}
		if err := s.Validate(json.RawMessage(`{"s":"b"}`)); err != nil {
			t.Fatalf("Validate(short) = %v, want nil", err)
		}
	}
}
