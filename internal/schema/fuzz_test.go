package schema

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// fuzzDeadline is how long one fuzz input may take to compile and validate
// twice. The step budget and pattern time limits keep a call to tens of
// milliseconds; far more means a hang.
const fuzzDeadline = 20 * time.Second

// FuzzValidate compiles arbitrary schema text and validates arbitrary
// argument text against it: an agent writes the first, a client the second.
// Neither may panic or hang; Validate returns nil, a *ValidationError with
// messages, or ErrInvalidArguments; and the same call twice gives the same
// answer (the state is pooled).
func FuzzValidate(f *testing.F) {
	for _, c := range validateCases {
		f.Add(c.schema, c.args)
	}
	for _, c := range [][2]string{
		{`{"properties":{"s":{"not":{"pattern":"` + slowPattern + `"}}}}`, `{"s":"` + slowValue + `"}`},
		{`{"patternProperties":{"^(?=a)\\w+$":{"type":"integer"}},"additionalProperties":false}`, `{"ab":1,"c":2}`},
		{`{"type":"object","anyOf":[{"$ref":"#"},{"$ref":"#"}]}`, `{}`},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"n":{"$dynamicAnchor":"n","type":"object"}},` +
			`"properties":{"a":{"$ref":"#/$defs/n"}},"unevaluatedProperties":false}`, `{"a":{},"b":1}`},
		{`{"uniqueItems":true,"items":{"type":["string","number"]}}`, `[1,"1",1.0,2]`},
		{`{"propertyNames":{"maxLength":3,"pattern":"^\\p{L}+$"}}`, `{"abc":1,"\u00e9t\u00e9":2,"1":3}`},
		{`{"contains":{"const":{"a":[1,{"b":null}]}},"minContains":2}`, `[{"a":[1,{"b":null}]},{"a":[1,{"b":null}]}]`},
		{`{"multipleOf":0.01,"maximum":1e308}`, `1e400`},
		{`true`, `{"a":"\ud800"}`},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, schemaText, args string) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			fuzzValidateOnce(t, schemaText, args)
		}()
		select {
		case <-done:
		case <-time.After(fuzzDeadline):
			t.Fatalf("Compile+Validate did not return within %v\nschema: %q\nargs: %q", fuzzDeadline, schemaText, args)
		}
	})
}

func fuzzValidateOnce(t *testing.T, schemaText, args string) {
	s, err := Compile(json.RawMessage(schemaText))
	if err != nil {
		if !strings.HasPrefix(err.Error(), "compile schema: ") {
			t.Errorf("Compile(%q) = %q, want the prefix \"compile schema: \"", schemaText, err)
		}
		return
	}
	first := fuzzMessages(t, s, args)
	second := fuzzMessages(t, s, args)
	if refusedInTime(first) || refusedInTime(second) {
		return // a time limit decided: the two calls may differ
	}
	if !slices.Equal(first, second) {
		t.Errorf("Validate(%q) against %q differs between two calls:\n%q\n%q", args, schemaText, first, second)
	}
}

// fuzzMessages validates and checks the kind of the answer: nil, messages,
// or not JSON.
func fuzzMessages(t *testing.T, s *Schema, args string) []string {
	err := s.Validate(json.RawMessage(args))
	var ve *ValidationError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ve):
		if len(ve.Messages) == 0 || len(ve.Messages) > maxMessages {
			t.Errorf("Validate(%q) = %d messages, want 1 to %d", args, len(ve.Messages), maxMessages)
		}
		return ve.Messages
	case errors.Is(err, ErrInvalidArguments):
		return []string{err.Error()}
	}
	t.Errorf("Validate(%q) = %T %v, want nil, *ValidationError or ErrInvalidArguments", args, err, err)
	return nil
}

// refusedInTime reports whether msgs is the refusal of a pattern that ran
// out of time.
func refusedInTime(msgs []string) bool {
	return len(msgs) == 1 && strings.Contains(msgs[0], " in time for ")
}
