package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The seed's tools, as the Node SDK registers them (Zod 4 emits 2020-12
// with additionalProperties false) and as a plain draft-07 style schema.
const (
	searchOrdersZod = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",` +
		`"properties":{"customer":{"type":"string","description":"Customer handle, for example \"ada\""},` +
		`"status":{"type":"string","enum":["open","shipped","cancelled"],"description":"Only orders in this status"},` +
		`"limit":{"default":10,"description":"How many orders to return (1 to 50)","type":"integer","minimum":1,"maximum":50}},` +
		`"required":["customer"],"additionalProperties":false}`
	searchOrdersPlain = `{"type":"object","properties":{"customer":{"type":"string"},` +
		`"status":{"type":"string","enum":["open","shipped","cancelled"]},` +
		`"limit":{"type":"integer","minimum":1,"maximum":50,"default":10}},"required":["customer"]}`
	getOrderSchema = `{"type":"object","properties":{"id":{"type":"string","description":"The order id"}},"required":["id"]}`
)

// validateCase is one argument check; want nil means valid. Every want was
// checked against ajv 8.17.1 (allErrors: true, strict: false; Ajv2020 for
// 2020-12 schemas, Ajv with the "next" and "unevaluated" vocabularies
// otherwise) and ajv.errorsText().
type validateCase struct {
	name   string
	schema string
	args   string
	want   []string
}

var validateCases = []validateCase{
	// The product guide's examples.
	{"contract limit", searchOrdersPlain, `{"customer":"ada","limit":99}`, []string{"data/limit must be <= 50"}},
	{"contract status", searchOrdersPlain, `{"customer":"ada","status":"lost"}`, []string{"data/status must be equal to one of the allowed values"}},
	{"contract required", getOrderSchema, `{}`, []string{"data must have required property 'id'"}},
	{"zod limit", searchOrdersZod, `{"customer":"ada","limit":99}`, []string{"data/limit must be <= 50"}},
	{"zod status", searchOrdersZod, `{"customer":"ada","status":"lost"}`, []string{"data/status must be equal to one of the allowed values"}},
	{"zod additional", searchOrdersZod, `{"customer":"ada","sort":"asc"}`, []string{"data must NOT have additional properties"}},
	{"zod valid", searchOrdersZod, `{"customer":"ada","status":"open","limit":10}`, nil},
	{"several joined", searchOrdersZod, `{"status":"lost","limit":0,"x":1}`, []string{
		"data must have required property 'customer'", "data must NOT have additional properties",
		"data/status must be equal to one of the allowed values", "data/limit must be >= 1"}},

	// Arguments that are absent.
	{"nil args", getOrderSchema, ``, []string{"data must have required property 'id'"}},
	{"null args", getOrderSchema, `null`, []string{"data must have required property 'id'"}},
	{"blank args", searchOrdersPlain, "  \n", []string{"data must have required property 'customer'"}},
	{"empty object no required", `{"type":"object","properties":{"a":{"type":"string"}}}`, ``, nil},

	// type
	{"type string", `{"type":"string"}`, `5`, []string{"data must be string"}},
	{"type number", `{"type":"number"}`, `"5"`, []string{"data must be number"}},
	{"type integer 5.0", `{"type":"integer"}`, `5.0`, nil},
	{"type integer 5.5", `{"type":"integer"}`, `5.5`, []string{"data must be integer"}},
	{"type integer 1e3", `{"type":"integer"}`, `1e3`, nil},
	{"type boolean", `{"type":"boolean"}`, `"true"`, []string{"data must be boolean"}},
	{"type null", `{"type":"null"}`, `0`, []string{"data must be null"}},
	{"type array", `{"type":"array"}`, `{}`, []string{"data must be array"}},
	{"type object", `{"type":"object"}`, `[]`, []string{"data must be object"}},
	{"type several", `{"type":["string","null"]}`, `5`, []string{"data must be string,null"}},
	{"type several ok", `{"properties":{"a":{"type":["string","null"]}}}`, `{"a":null}`, nil},
	{"null args are {}", `{"type":["string","null"]}`, `null`, []string{"data must be string,null"}},
	{"type one in array", `{"type":["integer"]}`, `"x"`, []string{"data must be integer"}},
	{"nullable", `{"properties":{"a":{"type":"string","nullable":true}}}`, `{"a":null}`, nil},
	{"nullable wrong", `{"type":"string","nullable":true}`, `1`, []string{"data must be string"}},
	{"type checked before enum", `{"type":"string","enum":["a"]}`, `5`, []string{
		"data must be string", "data must be equal to one of the allowed values"}},
	{"type checked in its group", `{"type":"string","maxLength":3,"enum":["a"]}`, `5`, []string{
		"data must be equal to one of the allowed values", "data must be string"}},
	{"type object after allOf", `{"type":"object","required":["a"],"allOf":[{"const":1}]}`, `2`, []string{
		"data must be equal to constant", "data must be object"}},
	{"integer type up front", `{"type":"integer","maximum":3,"const":1}`, `4.5`, []string{
		"data must be integer", "data must be equal to constant", "data must be <= 3"}},

	// required, enum, const
	{"required two", `{"required":["a","b"]}`, `{"b":1}`, []string{"data must have required property 'a'"}},
	{"required all missing", `{"type":"object","required":["a","b"]}`, `{}`, []string{
		"data must have required property 'a'", "data must have required property 'b'"}},
	{"required not object", `{"required":["a"]}`, `"x"`, nil},
	{"enum deep", `{"enum":[[1,2],{"a":1},null]}`, `{"a":1.0}`, nil},
	{"enum deep wrong", `{"enum":[[1,2],{"a":1},null]}`, `[2,1]`, []string{"data must be equal to one of the allowed values"}},
	{"const", `{"const":"x"}`, `"y"`, []string{"data must be equal to constant"}},
	{"const object", `{"const":{"a":[1,{"b":null}]}}`, `{"a":[1,{"b":null}]}`, nil},
	{"const number", `{"const":5}`, `5.0`, nil},

	// numbers
	{"maximum", `{"maximum":50}`, `51`, []string{"data must be <= 50"}},
	{"maximum fraction", `{"maximum":0.5}`, `0.75`, []string{"data must be <= 0.5"}},
	{"maximum written 50.0", `{"maximum":50.0}`, `51`, []string{"data must be <= 50"}},
	{"maximum huge", `{"maximum":1e21}`, `1e22`, []string{"data must be <= 1e+21"}},
	{"minimum tiny", `{"minimum":1e-7}`, `0`, []string{"data must be >= 1e-7"}},
	{"minimum", `{"minimum":1}`, `0`, []string{"data must be >= 1"}},
	{"exclusiveMaximum", `{"exclusiveMaximum":50}`, `50`, []string{"data must be < 50"}},
	{"exclusiveMinimum", `{"exclusiveMinimum":1}`, `1`, []string{"data must be > 1"}},
	{"multipleOf", `{"multipleOf":2}`, `3`, []string{"data must be multiple of 2"}},
	{"multipleOf fraction", `{"multipleOf":0.5}`, `1.5`, nil},
	{"multipleOf float quirk", `{"multipleOf":0.1}`, `0.3`, []string{"data must be multiple of 0.1"}},
	{"number keywords all", `{"maximum":1,"minimum":5,"exclusiveMaximum":1,"exclusiveMinimum":5,"multipleOf":4}`, `3`, []string{
		"data must be <= 1", "data must be >= 5", "data must be < 1", "data must be > 5", "data must be multiple of 4"}},
	{"number keyword ignores strings", `{"maximum":1}`, `"abc"`, nil},

	// strings
	{"maxLength", `{"maxLength":10}`, `"abcdefghijk"`, []string{"data must NOT have more than 10 characters"}},
	{"minLength", `{"minLength":1}`, `""`, []string{"data must NOT have fewer than 1 characters"}},
	{"length counts code points", `{"maxLength":2}`, `"😀😀"`, nil},
	{"length counts code points over", `{"maxLength":2}`, `"😀\ud83d\ude00😀"`, []string{"data must NOT have more than 2 characters"}},
	{"pattern", `{"pattern":"^a+$"}`, `"b"`, []string{`data must match pattern "^a+$"`}},
	{"pattern unanchored", `{"pattern":"a+"}`, `"bab"`, nil},
	{"pattern js space", `{"pattern":"^\\s$"}`, `"\u00a0"`, nil},
	{"pattern js dot", `{"pattern":"^.$"}`, `"\r"`, []string{`data must match pattern "^.$"`}},
	{"pattern unicode escape", `{"pattern":"^\\u00e9$"}`, `"é"`, nil},
	{"pattern lookahead", `{"pattern":"^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"}`,
		`"a..b@example.com"`, []string{`data must match pattern "^(?!\.)(?!.*\.\.)([A-Za-z0-9_'+\-\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\-]*\.)+[A-Za-z]{2,}$"`}},
	{"pattern lookahead ok", `{"pattern":"^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"}`,
		`"ada@example.com"`, nil},
	{"pattern backreference", `{"pattern":"^(a)\\1$"}`, `"ab"`, []string{`data must match pattern "^(a)\1$"`}},
	{"format not enforced", `{"type":"string","format":"email"}`, `"not an email"`, nil},
	{"unknown format", `{"type":"string","format":"made-up"}`, `"x"`, nil},
	{"default not applied", `{"type":"object","properties":{"n":{"type":"integer","default":"ten"}}}`, `{}`, nil},

	// arrays
	{"maxItems", `{"maxItems":3}`, `[1,2,3,4]`, []string{"data must NOT have more than 3 items"}},
	{"minItems", `{"minItems":1}`, `[]`, []string{"data must NOT have fewer than 1 items"}},
	{"uniqueItems", `{"uniqueItems":true}`, `[1,2,1]`, []string{"data must NOT have duplicate items (items ## 0 and 2 are identical)"}},
	{"uniqueItems typed", `{"type":"array","items":{"type":"number"},"uniqueItems":true}`, `[1,2,1]`, []string{
		"data must NOT have duplicate items (items ## 2 and 0 are identical)"}},
	{"uniqueItems two", `{"uniqueItems":true}`, `[1,1]`, []string{"data must NOT have duplicate items (items ## 0 and 1 are identical)"}},
	{"uniqueItems typed two", `{"items":{"type":"integer"},"uniqueItems":true}`, `[1,1]`, []string{
		"data must NOT have duplicate items (items ## 1 and 0 are identical)"}},
	{"uniqueItems objects", `{"uniqueItems":true}`, `[{"a":1,"b":2},{"b":2,"a":1}]`, []string{
		"data must NOT have duplicate items (items ## 0 and 1 are identical)"}},
	{"uniqueItems distinct types", `{"uniqueItems":true}`, `[1,"1",true,"true",null]`, nil},
	{"uniqueItems several dups", `{"uniqueItems":true}`, `[1,2,3,2,1,3,9]`, []string{
		"data must NOT have duplicate items (items ## 2 and 5 are identical)"}},
	{"uniqueItems typed several dups", `{"items":{"type":["number","string"]},"uniqueItems":true}`, `[1,2,3,2,1,3,9,"3"]`, []string{
		"data must NOT have duplicate items (items ## 5 and 2 are identical)"}},
	{"items nested path", `{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}}}}}}`,
		`{"items":[{"name":7}]}`, []string{"data/items/0/name must be string"}},
	{"items each", `{"items":{"type":"string"}}`, `["a",1,"b",2]`, []string{"data/1 must be string", "data/3 must be string"}},
	{"tuple draft-07", `{"items":[{"type":"number"},{"type":"string"}],"additionalItems":false}`, `["a",1,3]`, []string{
		"data must NOT have more than 2 items", "data/0 must be number", "data/1 must be string"}},
	{"tuple draft-07 extra schema", `{"items":[{"type":"number"}],"additionalItems":{"type":"string"}}`, `[1,"a",2]`, []string{
		"data/2 must be string"}},
	{"prefixItems 2020", `{"$schema":"https://json-schema.org/draft/2020-12/schema","prefixItems":[{"type":"number"}],"items":false}`,
		`[1,2]`, []string{"data must NOT have more than 1 items"}},
	{"prefixItems ignored in draft-07", `{"prefixItems":[{"type":"number"}],"items":{"type":"string"}}`, `["a"]`, nil},
	{"contains", `{"contains":{"type":"string"}}`, `[1,2]`, []string{
		"data/0 must be string", "data/1 must be string", "data must contain at least 1 valid item(s)"}},
	{"contains ok", `{"contains":{"type":"string"}}`, `[1,"a"]`, nil},
	{"minContains", `{"contains":{"type":"string"},"minContains":2}`, `["a",1]`, []string{
		"data/1 must be string", "data must contain at least 2 valid item(s)"}},
	{"maxContains", `{"contains":{"type":"string"},"maxContains":1}`, `["a","b",1]`, []string{
		"data must contain at least 1 and no more than 1 valid item(s)"}},

	// objects
	{"maxProperties", `{"maxProperties":2}`, `{"a":1,"b":2,"c":3}`, []string{"data must NOT have more than 2 properties"}},
	{"minProperties", `{"minProperties":1}`, `{}`, []string{"data must NOT have fewer than 1 properties"}},
	{"additionalProperties each", `{"properties":{"a":{}},"additionalProperties":false}`, `{"a":1,"b":2,"c":3}`, []string{
		"data must NOT have additional properties", "data must NOT have additional properties"}},
	{"additionalProperties schema", `{"properties":{"a":{}},"additionalProperties":{"type":"string"}}`, `{"a":1,"b":2}`, []string{
		"data/b must be string"}},
	{"additionalProperties key order", `{"additionalProperties":{"type":"string"}}`, `{"b":1,"10":2,"a":3,"2":4}`, []string{
		"data/2 must be string", "data/10 must be string", "data/b must be string", "data/a must be string"}},
	{"additionalProperties patternProperties", `{"patternProperties":{"^x-":{"type":"string"}},"additionalProperties":false}`,
		`{"x-a":1,"y":2}`, []string{"data must NOT have additional properties", "data/x-a must be string"}},
	{"path escaping", `{"properties":{"a/b":{"type":"string"},"c~d":{"type":"string"}}}`, `{"a/b":1,"c~d":2}`, []string{
		"data/a~1b must be string", "data/c~0d must be string"}},
	{"properties schema order", `{"properties":{"z":{"type":"string"},"a":{"type":"string"}}}`, `{"a":1,"z":2}`, []string{
		"data/z must be string", "data/a must be string"}},
	{"propertyNames", `{"propertyNames":{"maxLength":3}}`, `{"abcd":1,"ab":2}`, []string{
		"data must NOT have more than 3 characters", "data property name must be valid"}},
	{"dependentRequired", `{"dependentRequired":{"a":["b"]}}`, `{"a":1}`, []string{"data must have property b when property a is present"}},
	{"dependentRequired two", `{"dependentRequired":{"a":["b","c"]}}`, `{"a":1}`, []string{
		"data must have properties b, c when property a is present", "data must have properties b, c when property a is present"}},
	{"dependencies draft-07", `{"dependencies":{"a":["b"],"c":{"required":["d"]}}}`, `{"a":1,"c":2}`, []string{
		"data must have property b when property a is present", "data must have required property 'd'"}},
	{"dependentSchemas", `{"$schema":"https://json-schema.org/draft/2020-12/schema","dependentSchemas":{"a":{"required":["b"]}}}`,
		`{"a":1}`, []string{"data must have required property 'b'"}},
	{"false schema property", `{"properties":{"x":false}}`, `{"x":1}`, []string{"data/x boolean schema is false"}},
	{"false schema root", `false`, `{}`, []string{"data boolean schema is false"}},
	{"true schema root", `true`, `{"a":1}`, nil},
	{"duplicate keys last wins", `{"properties":{"a":{"type":"string"}}}`, `{"a":1,"a":"x"}`, nil},

	// composition
	{"allOf", `{"allOf":[{"minimum":1},{"maximum":3}]}`, `5`, []string{"data must be <= 3"}},
	{"anyOf", `{"anyOf":[{"type":"string"},{"type":"number"}]}`, `true`, []string{
		"data must be string", "data must be number", "data must match a schema in anyOf"}},
	{"anyOf ok", `{"anyOf":[{"type":"string"},{"type":"number"}]}`, `1`, nil},
	{"oneOf none", `{"oneOf":[{"type":"number"},{"type":"integer"}]}`, `"x"`, []string{
		"data must be number", "data must be integer", "data must match exactly one schema in oneOf"}},
	{"oneOf two", `{"oneOf":[{"type":"number"},{"type":"integer"}]}`, `1`, []string{"data must match exactly one schema in oneOf"}},
	{"oneOf one", `{"oneOf":[{"type":"number"},{"type":"integer"}]}`, `1.5`, nil},
	{"not", `{"not":{"type":"string"}}`, `"x"`, []string{"data must NOT be valid"}},
	{"not ok", `{"not":{"type":"string"}}`, `1`, nil},
	{"if then", `{"if":{"properties":{"kind":{"const":"a"}}},"then":{"required":["x"]},"else":{"required":["y"]}}`,
		`{"kind":"a"}`, []string{"data must have required property 'x'", `data must match "then" schema`}},
	{"if else", `{"if":{"properties":{"kind":{"const":"a"}}},"then":{"required":["x"]},"else":{"required":["y"]}}`,
		`{"kind":"b"}`, []string{"data must have required property 'y'", `data must match "else" schema`}},
	{"if without then", `{"if":{"type":"string"},"else":{"const":1}}`, `"x"`, nil},
	{"keyword order", `{"allOf":[{"required":["a"]}],"anyOf":[{"required":["b"]}],"not":{"required":["c"]},"const":{"c":1}}`, `{"c":1}`, []string{
		"data must NOT be valid", "data must have required property 'b'", "data must match a schema in anyOf",
		"data must have required property 'a'"}},

	// $ref
	{"ref $defs", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"pos":{"type":"integer","minimum":0}},` +
		`"type":"object","properties":{"a":{"$ref":"#/$defs/pos"}}}`, `{"a":-1}`, []string{"data/a must be >= 0"}},
	{"ref definitions", `{"definitions":{"name":{"type":"string","minLength":1}},"properties":{"a":{"$ref":"#/definitions/name"}}}`,
		`{"a":""}`, []string{"data/a must NOT have fewer than 1 characters"}},
	{"ref with siblings", `{"definitions":{"n":{"minimum":0}},"properties":{"a":{"$ref":"#/definitions/n","maximum":5}}}`,
		`{"a":9}`, []string{"data/a must be <= 5"}},
	{"ref recursive", `{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}}}`,
		`{"name":"a","children":[{"name":"b","children":[{"name":3}]}]}`, []string{"data/children/0/children/0/name must be string"}},
	{"ref by $id", `{"$id":"https://example.com/root.json","$defs":{"a":{"$id":"a.json","type":"string"}},"properties":{"x":{"$ref":"a.json"}}}`,
		`{"x":1}`, []string{"data/x must be string"}},
	{"ref by $anchor", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"a":{"$anchor":"str","type":"string"}},"properties":{"x":{"$ref":"#str"}}}`,
		`{"x":1}`, []string{"data/x must be string"}},
	{"ref escaped pointer", `{"$defs":{"a/b":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a~1b"}}}`,
		`{"x":1}`, []string{"data/x must be string"}},

	// unevaluated*
	{"unevaluatedProperties", `{"$schema":"https://json-schema.org/draft/2020-12/schema","allOf":[{"properties":{"a":{}}}],` +
		`"properties":{"b":{}},"unevaluatedProperties":false}`, `{"a":1,"b":2,"c":3}`, []string{"data must NOT have unevaluated properties"}},
	{"unevaluatedProperties anyOf", `{"$schema":"https://json-schema.org/draft/2020-12/schema","anyOf":[{"properties":{"a":{"type":"string"}}},` +
		`{"properties":{"b":{}}}],"unevaluatedProperties":false}`, `{"a":1,"b":2}`, []string{"data must NOT have unevaluated properties"}},
	{"unevaluatedProperties ref", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"base":{"properties":{"a":{}}}},` +
		`"$ref":"#/$defs/base","unevaluatedProperties":{"type":"string"}}`, `{"a":1,"b":2}`, []string{"data/b must be string"}},
	{"uniqueItems long", `{"uniqueItems":true}`, `[` + seq(100) + `,7,50]`, []string{
		"data must NOT have duplicate items (items ## 50 and 101 are identical)"}},
	{"uniqueItems long typed", `{"items":{"type":"integer"},"uniqueItems":true}`, `[` + seq(100) + `,7,50]`, []string{
		"data must NOT have duplicate items (items ## 101 and 50 are identical)"}},
	{"nested composition path", `{"properties":{"a":{"type":"array","items":{"anyOf":[{"type":"string"},{"properties":{"b":{"const":1}}}]}}}}`,
		`{"a":["x",{"b":2}]}`, []string{"data/a/1 must be string", "data/a/1/b must be equal to constant", "data/a/1 must match a schema in anyOf"}},
	{"if inside properties", `{"properties":{"p":{"if":{"type":"string"},"then":{"minLength":2},"else":{"minimum":5}}}}`,
		`{"p":3}`, []string{"data/p must be >= 5", `data/p must match "else" schema`}},
	{"unevaluatedProperties if", `{"$schema":"https://json-schema.org/draft/2020-12/schema","if":{"properties":{"a":{"const":1}}},` +
		`"then":{"properties":{"b":{}}},"unevaluatedProperties":false}`, `{"a":2,"b":1,"c":1}`, []string{
		"data must NOT have unevaluated properties", "data must NOT have unevaluated properties",
		"data must NOT have unevaluated properties"}},
	{"unevaluatedProperties nested", `{"$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"o":{"properties":{"x":{}},` +
		`"unevaluatedProperties":false}},"unevaluatedProperties":false}`, `{"o":{"x":1,"y":2},"z":1}`, []string{
		"data/o must NOT have unevaluated properties", "data must NOT have unevaluated properties"}},
	{"unevaluatedItems contains", `{"$schema":"https://json-schema.org/draft/2020-12/schema","contains":{"type":"string"},"unevaluatedItems":false}`,
		`[1,"a"]`, nil},
	{"unevaluatedItems", `{"$schema":"https://json-schema.org/draft/2020-12/schema","prefixItems":[{}],"unevaluatedItems":false}`,
		`[1,2]`, []string{"data must NOT have more than 1 items"}},
}

// seq returns "0,1,…,n-1".
func seq(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprint(i)
	}
	return strings.Join(parts, ",")
}

func TestValidate(t *testing.T) {
	for _, tc := range validateCases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Compile(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			var args json.RawMessage
			if tc.args != "" {
				args = json.RawMessage(tc.args)
			}
			if diff := cmp.Diff(tc.want, messages(t, s.Validate(args))); diff != "" {
				t.Errorf("Validate(%s) messages (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

// messages returns the messages of a *ValidationError, or nil for nil.
func messages(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate returned %T (%v), want *ValidationError", err, err)
	}
	if len(ve.Messages) == 0 {
		t.Fatalf("Validate returned a ValidationError without messages")
	}
	return ve.Messages
}

func TestValidateErrorText(t *testing.T) {
	s, err := Compile(json.RawMessage(searchOrdersZod))
	if err != nil {
		t.Fatal(err)
	}
	got := s.Validate(json.RawMessage(`{"customer":"ada","status":"lost","limit":51}`))
	want := "data/status must be equal to one of the allowed values, data/limit must be <= 50"
	if got == nil || got.Error() != want {
		t.Errorf("Error() = %v, want %q", got, want)
	}
	// What the gateway sends: the prefix is the gateway's, the rest is ours.
	text := fmt.Sprintf("Input validation error: Invalid arguments for tool %s: %v", "search_orders", got)
	if !strings.HasSuffix(text, ": data/status must be equal to one of the allowed values, data/limit must be <= 50") {
		t.Errorf("gateway text = %q", text)
	}
}

func TestValidateDraftsDiffer(t *testing.T) {
	// "items" as an array is a tuple in draft-07 and an invalid schema in
	// 2020-12, where prefixItems does that job.
	tuple := `"items":[{"type":"string"}]`
	if _, err := Compile(json.RawMessage(`{` + tuple + `}`)); err != nil {
		t.Errorf("draft-07 tuple: %v", err)
	}
	if _, err := Compile(json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#",` + tuple + `}`)); err != nil {
		t.Errorf("explicit draft-07 tuple: %v", err)
	}
	if _, err := Compile(json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema",` + tuple + `}`)); err == nil {
		t.Errorf("2020-12 items array: compiled, want an error")
	}
}

func TestValidateInvalidArguments(t *testing.T) {
	s, err := Compile(json.RawMessage(getOrderSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{`{`, `{"id":}`, `{"id":"x"} 1`, `{'id':1}`, `[1,]`} {
		err := s.Validate(json.RawMessage(args))
		if !errors.Is(err, ErrInvalidArguments) {
			t.Errorf("Validate(%s) = %v, want ErrInvalidArguments", args, err)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		schema string
		want   string // a part of the error text
	}{
		{``, "invalid JSON"},
		{`{"type":`, "invalid JSON"},
		{`42`, "#: a schema must be an object or a boolean"},
		{`{"type":"strin"}`, `#: type "strin" is not a JSON Schema type`},
		{`{"properties":{"limit":{"maximum":"50"}}}`, "#/properties/limit: maximum must be a number"},
		{`{"minLength":-1}`, "minLength must be a non-negative integer"},
		{`{"maxItems":1.5}`, "maxItems must be a non-negative integer"},
		{`{"multipleOf":0}`, "multipleOf must be greater than 0"},
		{`{"exclusiveMaximum":true}`, "exclusiveMaximum must be a number"},
		{`{"pattern":"("}`, `pattern "("`},
		{`{"patternProperties":{"(":{}}}`, `patternProperties "("`},
		{`{"enum":[]}`, "enum must be a non-empty array"},
		{`{"required":"id"}`, "required must be an array of strings"},
		{`{"properties":{"a":5}}`, "#: properties/a must be a schema"},
		{`{"allOf":[]}`, "allOf must be a non-empty array of schemas"},
		{`{"not":"x"}`, "not must be a schema"},
		{`{"$ref":"#/$defs/missing"}`, `can't resolve reference "#/$defs/missing"`},
		{`{"$ref":"https://example.com/remote.json"}`, "can't resolve reference"},
		{`{"nullable":true}`, `"nullable" cannot be used without "type"`},
		{`{"dependentRequired":{"a":"b"}}`, "dependentRequired/a must be an array of strings"},
	} {
		_, err := Compile(json.RawMessage(tc.schema))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%s) = %v, want an error containing %q", tc.schema, err, tc.want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "compile schema: ") {
			t.Errorf("Compile(%s) = %q, want the prefix %q", tc.schema, err, "compile schema: ")
		}
	}
}

func TestValidateConcurrent(t *testing.T) {
	s, err := Compile(json.RawMessage(searchOrdersZod))
	if err != nil {
		t.Fatal(err)
	}
	inputs := []struct {
		args string
		want []string
	}{
		{`{"customer":"ada","status":"open","limit":10}`, nil},
		{`{"customer":"ada","limit":99}`, []string{"data/limit must be <= 50"}},
		{`{"status":"lost"}`, []string{"data must have required property 'customer'", "data/status must be equal to one of the allowed values"}},
		{`{"customer":"ada","extra":[1,2,{"a":"b"}]}`, []string{"data must NOT have additional properties"}},
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				in := inputs[(g+i)%len(inputs)]
				if diff := cmp.Diff(in.want, messages(t, s.Validate(json.RawMessage(in.args)))); diff != "" {
					t.Errorf("Validate(%s) (-want +got):\n%s", in.args, diff)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestValidatePatternBudget(t *testing.T) {
	// A lookahead sends the pattern to the backtracking engine; this one is
	// catastrophic on long runs of "a". The time limits bound the call.
	s, err := Compile(json.RawMessage(`{"type":"array","items":{"type":"string","pattern":"^(?!(a+)+b)"}}`))
	if err != nil {
		t.Fatal(err)
	}
	long := `"` + strings.Repeat("a", 40) + `"`
	args := "[" + strings.TrimSuffix(strings.Repeat(long+",", 20), ",") + "]"
	start := time.Now()
	err = s.Validate(json.RawMessage(args))
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Validate took %v", elapsed)
	}
	if err == nil {
		t.Errorf("Validate = nil, want pattern errors (matches that time out count as failures)")
	}
}

func ExampleSchema_Validate() {
	s, err := Compile(json.RawMessage(`{"type":"object","properties":{"limit":{"type":"integer","maximum":50}},"required":["id"]}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Validate(json.RawMessage(`{"limit":99}`)))
	// Output: data must have required property 'id', data/limit must be <= 50
}

// BenchmarkValidate measures the per-call cost on the seed's search_orders
// schema (as Zod 4 emits it).
func BenchmarkValidate(b *testing.B) {
	s, err := Compile(json.RawMessage(searchOrdersZod))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name, args string
		valid      bool
	}{
		{"valid", `{"customer":"ada","status":"open","limit":10}`, true},
		{"invalid", `{"customer":"ada","status":"lost","limit":99}`, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			args := json.RawMessage(bc.args)
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Validate(args); (err == nil) != bc.valid {
					b.Fatalf("Validate = %v", err)
				}
			}
		})
	}
}
