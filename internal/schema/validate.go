package schema

// This file is the validator's public API: [Compile] turns a tool's input
// schema into a tree of nodes once, and [Schema.Validate] checks one call's
// arguments against it, worded and ordered as ajv v8 words and orders its
// errors (allErrors: true, errorsText with dataVar "data").
//
// Why not github.com/santhosh-tekuri/jsonschema/v6 (DESIGN.md's pick): ajv's
// output is more than its message table. It keeps the errors of failed
// anyOf/oneOf/contains/propertyNames branches before the keyword's own error,
// checks a lone "type" before or after the untyped keywords depending on the
// other keywords present, reports additionalProperties once per extra key at
// the object's path, and runs keywords in its own rule order, not the schema's.
// Mapping santhosh's error tree onto that was as much code as validating, and
// santhosh costs ~5µs and 52 allocations for a small valid object; this
// validator costs a fraction of that (see BenchmarkValidate).
//
// Order of messages, as ajv: the "type" error (when checked up front), then
// $ref, const, enum, not, anyOf, oneOf, allOf, if; then number keywords
// (maximum, minimum, exclusiveMaximum, exclusiveMinimum, multipleOf), string
// keywords (maxLength, minLength, pattern), array keywords (maxItems,
// minItems, additionalItems or prefixItems, items, contains, uniqueItems,
// unevaluatedItems) and object keywords (maxProperties, minProperties,
// required, propertyNames, additionalProperties, dependencies, properties,
// patternProperties, dependentRequired, dependentSchemas,
// unevaluatedProperties). Object maps (properties, an instance's keys) are
// walked in JavaScript property order: array-index keys ascending first, then
// the others in document order. The result is deterministic for a given
// schema and argument text.
//
// Known differences from ajv: where unevaluatedProperties/Items meets
// if/then/else, ajv's generated code can forget what "if" or an earlier
// keyword evaluated; we follow the specification there, so the number of
// "must NOT have unevaluated properties" messages (rarely, validity) can
// differ. Compile is more lenient than ajv's meta-schema check (duplicate
// enum or required entries are accepted). Arguments deeper than 512 levels
// are refused as invalid JSON. A pattern ajv would eventually decide but we
// cannot in time refuses the arguments, and so does a schema that takes
// more steps than a budget (200,000 plus 16 per byte of arguments) where
// ajv would overflow its stack or spin (see [Schema.Validate]). At most
// 1,000 messages are kept.
//
// The rest of the validator, one concept per file:
//
//	json.go, jsonparse.go     JSON values as JavaScript sees them; the parser
//	node.go                   schemaNode, the compiled form of a (sub)schema
//	compile.go, resolve.go    the compiler; $id/$anchor registration and $ref
//	compile_keywords.go       type, $ref, const/enum, applicators, number, string
//	compile_array.go          array keywords
//	compile_object.go         object keywords
//	pattern.go                JavaScript patterns: RE2 translation, regexp2
//	state.go, unevaluated.go  one Validate call's state; what it evaluated
//	eval.go                   evaluating a node: keyword groups, untyped keywords
//	eval_array.go             array keywords
//	eval_object.go            object keywords

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Schema is a compiled tool input schema. It is immutable after [Compile]
// and safe for concurrent use by many goroutines.
type Schema struct {
	root *schemaNode
}

// ValidationError lists why arguments do not match a schema, each message
// worded as ajv words it ("data/limit must be <= 50"), in ajv's order.
type ValidationError struct {
	Messages []string
}

// Error joins the messages with ", " as ajv's errorsText does.
func (e *ValidationError) Error() string { return strings.Join(e.Messages, ", ") }

// ErrInvalidArguments is returned (wrapped) by [Schema.Validate] when the
// arguments are not JSON text at all; a gateway normally never sees this
// because the JSON-RPC layer has already parsed the request.
var ErrInvalidArguments = errors.New("schema: arguments are not valid JSON")

// Compile compiles a tool input schema once (at registration). It accepts
// JSON Schema 2020-12 (and 2019-09) when "$schema" names it, and draft-07
// otherwise (draft-07 style schemas, or none); in both, dependentRequired,
// dependentSchemas, min/maxContains and unevaluated* are enforced, as ajv
// does with its "next" and "unevaluated" options. Unknown keywords and
// unknown formats are ignored; "format" is never enforced and "default" never
// applied. An invalid schema gives an error naming the location and the
// problem, e.g. `compile schema: #/properties/limit: maximum must be a number`.
func Compile(raw json.RawMessage) (*Schema, error) {
	return CompileWith(raw, Options{})
}

// Options change how [CompileWith] reads a schema. The zero value reads it
// as [Compile] does.
type Options struct {
	// Default2020 reads a schema whose root has no "$schema" as JSON Schema
	// 2020-12, the dialect MCP tool schemas have by default (specification
	// 2025-11-25, "JSON Schema usage"). False reads it as draft-07, as ajv
	// does. A "$schema" that names a draft always wins.
	Default2020 bool
}

// CompileWith is [Compile] with options.
func CompileWith(raw json.RawMessage, opts Options) (*Schema, error) {
	doc, err := parseJSON(string(raw), nil)
	if err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	c := newCompiler(doc, opts.Default2020)
	root, err := c.compile(doc, "#")
	if err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	return &Schema{root: root}, nil
}

// Validate validates args, the raw JSON text of a call's arguments object;
// nil, empty or `null` means {}. It returns nil, a *[ValidationError], or
// (for text that is not JSON) an error wrapping [ErrInvalidArguments].
//
// It fails closed: when a pattern that needs the backtracking engine cannot
// be decided within its time limit, wherever it sits in the schema (under
// not, in patternProperties, propertyNames, if, contains...), the result is
// a *[ValidationError] with that one message, naming the pattern. So does
// a schema whose evaluation runs out of steps (one that branches back into
// itself grows exponentially), with a message saying so.
func (s *Schema) Validate(args json.RawMessage) error {
	vs := statePool.Get().(*vstate)
	defer vs.release()

	text := string(args)
	if isBlankOrNull(text) {
		text = "{}"
	}
	data, err := parseJSON(text, &vs.arena)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArguments, err)
	}
	vs.maxSteps = baseSteps + stepsPerByte*len(text)
	valid := vs.validate(s.root, &data, nil)
	if vs.refused != "" {
		return &ValidationError{Messages: []string{vs.refused}}
	}
	if valid {
		return nil
	}
	return &ValidationError{Messages: slices.Clone(vs.errs)}
}

func isBlankOrNull(s string) bool {
	s = strings.TrimSpace(s)
	return s == "" || s == "null"
}
