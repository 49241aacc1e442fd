package schema

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// ajvGolden is one case of testdata/ajv/golden.json: what ajv 8.17.1 said
// about instance under schema (see testdata/ajv/generate.mjs, run on
// demand: the cases are in testdata/ajv/cases.json).
type ajvGolden struct {
	Name     string          `json:"name"`
	Schema   json.RawMessage `json:"schema"`
	Instance json.RawMessage `json:"instance"`
	Valid    bool            `json:"valid"`
	Errors   string          `json:"errors"`
}

// ajvDeviations are the golden cases where the validator knowingly answers
// otherwise than ajv, each with the documented reason (validate.go).
var ajvDeviations = map[string]string{}

func loadAjvGolden(tb testing.TB) []ajvGolden {
	tb.Helper()
	b, err := os.ReadFile("testdata/ajv/golden.json")
	if err != nil {
		tb.Fatal(err)
	}
	var cases []ajvGolden
	if err := json.Unmarshal(b, &cases); err != nil {
		tb.Fatal(err)
	}
	return cases
}

// ajvAnswer is what the validator says, in golden.json's terms: valid, or
// the errors joined as ajv's errorsText joins them.
func ajvAnswer(schemaText, instance json.RawMessage) (valid bool, text string, err error) {
	s, err := Compile(schemaText)
	if err != nil {
		return false, "", err
	}
	err = s.Validate(instance)
	var ve *ValidationError
	switch {
	case err == nil:
		return true, "", nil
	case errors.As(err, &ve):
		return false, ve.Error(), nil
	}
	return false, "", err
}

// TestAjvGoldenMatches is the differential check the validator's messages
// rest on: every case ajv 8.17.1 answered gets the same verdict and, when
// invalid, the same error text, in the same order.
func TestAjvGoldenMatches(t *testing.T) {
	cases := loadAjvGolden(t)
	if len(cases) < 150 {
		t.Fatalf("golden.json has %d cases, want at least 150", len(cases))
	}
	for _, c := range cases {
		if string(c.Instance) == "null" {
			// Validate reads null arguments as {} (MCP: no arguments), so
			// a null instance is not a question it answers as ajv does.
			continue
		}
		valid, text, err := ajvAnswer(c.Schema, c.Instance)
		if err != nil {
			t.Errorf("%s: %v\nschema: %s", c.Name, err, c.Schema)
			continue
		}
		match := valid == c.Valid && text == c.Errors
		if why, ok := ajvDeviations[c.Name]; ok {
			if match {
				t.Errorf("%s: listed as a deviation (%s) but now matches ajv; remove it from ajvDeviations", c.Name, why)
			}
			continue
		}
		if !match {
			t.Errorf("%s: schema %s instance %s\n got: valid=%v %q\najv: valid=%v %q", c.Name, c.Schema, c.Instance, valid, text, c.Valid, c.Errors)
		}
	}
}

// FuzzAjvGolden starts from the golden cases (schema text, argument text)
// and mutates both; FuzzValidate's properties must hold for every input,
// and on the unmutated seeds the answer must be ajv's.
func FuzzAjvGolden(f *testing.F) {
	want := map[[2]string]ajvGolden{}
	for _, c := range loadAjvGolden(f) {
		f.Add(string(c.Schema), string(c.Instance))
		if _, dev := ajvDeviations[c.Name]; !dev && string(c.Instance) != "null" {
			want[[2]string{string(c.Schema), string(c.Instance)}] = c
		}
	}
	f.Fuzz(func(t *testing.T, schemaText, args string) {
		fuzzValidateOnce(t, schemaText, args)
		c, ok := want[[2]string{schemaText, args}]
		if !ok {
			return
		}
		valid, text, err := ajvAnswer(c.Schema, c.Instance)
		if err != nil || valid != c.Valid || text != c.Errors {
			t.Errorf("%s: got valid=%v %q (%v), ajv: valid=%v %q", c.Name, valid, text, err, c.Valid, c.Errors)
		}
	})
}

// TestDefault2020 checks the MCP default dialect: every golden case whose
// schema names 2020-12, with "$schema" removed and compiled with
// Options.Default2020, gets ajv 8.17.1's 2020-12 answer. Without the option
// a schema that uses prefixItems is read as draft-07 and answers otherwise.
func TestDefault2020(t *testing.T) {
	const draft = "https://json-schema.org/draft/2020-12/schema"
	n := 0
	for _, c := range loadAjvGolden(t) {
		var root map[string]json.RawMessage
		if json.Unmarshal(c.Schema, &root) != nil || string(root["$schema"]) != `"`+draft+`"` {
			continue
		}
		delete(root, "$schema")
		bare, _ := json.Marshal(root)
		s, err := CompileWith(bare, Options{Default2020: true})
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		text := ""
		if err := s.Validate(c.Instance); err != nil {
			text = err.Error()
		}
		if (text == "") != c.Valid || text != c.Errors {
			t.Errorf("%s: instance %s\n got: %q\najv: valid=%v %q", c.Name, c.Instance, text, c.Valid, c.Errors)
		}
		n++
	}
	if n < 30 {
		t.Fatalf("only %d golden cases name 2020-12; want at least 30", n)
	}

	tuple := json.RawMessage(`{"prefixItems":[{"type":"string"}],"items":false}`)
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Default2020: true}, "data must NOT have more than 1 items"},
		{Options{}, ""}, // draft-07: prefixItems is unknown, items:false forbids every item
	} {
		s, err := CompileWith(tuple, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if err := s.Validate(json.RawMessage(`["a",1]`)); err != nil {
			got = err.Error()
		}
		if tc.opts.Default2020 && got != tc.want || !tc.opts.Default2020 && got == tc.want {
			t.Errorf("Default2020=%v: got %q", tc.opts.Default2020, got)
		}
	}
}
