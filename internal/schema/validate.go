package schema

// This file is the validator: [Compile] turns a tool's input schema into a
// tree of nodes once, and [Schema.Validate] checks one call's arguments
// against it, worded and ordered as ajv v8 words and orders its errors
// (allErrors: true, errorsText with dataVar "data").
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
// are refused as invalid JSON.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
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
	doc, err := parseJSON(string(raw), nil)
	if err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	c := newCompiler(doc)
	root, err := c.compile(doc, "#")
	if err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	return &Schema{root: root}, nil
}

// Validate validates args, the raw JSON text of a call's arguments object;
// nil, empty or `null` means {}. It returns nil, a *[ValidationError], or
// (for text that is not JSON) an error wrapping [ErrInvalidArguments].
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
	if vs.validate(s.root, &data, nil) {
		return nil
	}
	return &ValidationError{Messages: slices.Clone(vs.errs)}
}

func isBlankOrNull(s string) bool {
	s = strings.TrimSpace(s)
	return s == "" || s == "null"
}

// ---------------------------------------------------------------------------
// JSON values

type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

// jsonValue is a parsed JSON value. Numbers are float64, as in JavaScript,
// so limits and equality behave as they do for ajv.
type jsonValue struct {
	kind    jsonKind
	boolean bool
	num     float64
	str     string
	elems   []jsonValue  // jsonArray
	members []jsonMember // jsonObject, in JavaScript property order
}

type jsonMember struct {
	key string
	val jsonValue
}

// get returns the member named key, or nil.
func (v *jsonValue) get(key string) *jsonValue {
	for i := range v.members {
		if v.members[i].key == key {
			return &v.members[i].val
		}
	}
	return nil
}

// arena hands out member and element slices for one parse; a pooled arena
// makes parsing a small object allocation-free.
type arena struct {
	members []jsonMember
	elems   []jsonValue
	mstack  []jsonMember
	estack  []jsonValue
}

func (a *arena) reset() {
	clear(a.members)
	clear(a.elems)
	a.members, a.elems = a.members[:0], a.elems[:0]
	a.mstack, a.estack = a.mstack[:0], a.estack[:0]
}

func (a *arena) takeMembers(from []jsonMember) []jsonMember {
	n := len(from)
	if cap(a.members)-len(a.members) < n {
		a.members = make([]jsonMember, 0, max(2*cap(a.members), n, 32))
	}
	l := len(a.members)
	a.members = append(a.members, from...)
	return a.members[l : l+n : l+n]
}

func (a *arena) takeElems(from []jsonValue) []jsonValue {
	n := len(from)
	if cap(a.elems)-len(a.elems) < n {
		a.elems = make([]jsonValue, 0, max(2*cap(a.elems), n, 32))
	}
	l := len(a.elems)
	a.elems = append(a.elems, from...)
	return a.elems[l : l+n : l+n]
}

const maxDepth = 512

type jsonParser struct {
	s     string
	pos   int
	depth int
	a     *arena
}

// parseJSON parses s strictly (one value, surrounding space allowed). With a
// nil arena the result owns its memory; otherwise it lives until a.reset.
func parseJSON(s string, a *arena) (jsonValue, error) {
	if a == nil {
		a = new(arena)
	}
	p := jsonParser{s: s, a: a}
	p.space()
	v, err := p.value()
	if err != nil {
		return jsonValue{}, err
	}
	p.space()
	if p.pos != len(p.s) {
		return jsonValue{}, p.errorf("unexpected %q after the value", p.s[p.pos])
	}
	return v, nil
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *jsonParser) space() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (jsonValue, error) {
	if p.pos >= len(p.s) {
		return jsonValue{}, p.errorf("unexpected end")
	}
	switch c := p.s[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.string()
		return jsonValue{kind: jsonString, str: s}, err
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case strings.HasPrefix(p.s[p.pos:], "true"):
		p.pos += 4
		return jsonValue{kind: jsonBool, boolean: true}, nil
	case strings.HasPrefix(p.s[p.pos:], "false"):
		p.pos += 5
		return jsonValue{kind: jsonBool}, nil
	case strings.HasPrefix(p.s[p.pos:], "null"):
		p.pos += 4
		return jsonValue{kind: jsonNull}, nil
	default:
		return jsonValue{}, p.errorf("unexpected %q", c)
	}
}

func (p *jsonParser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf("nested deeper than %d", maxDepth)
	}
	p.pos++
	p.space()
	return nil
}

func (p *jsonParser) object() (jsonValue, error) {
	if err := p.enter(); err != nil {
		return jsonValue{}, err
	}
	base := len(p.a.mstack)
	defer func() { p.a.mstack = p.a.mstack[:base] }()
	if p.pos < len(p.s) && p.s[p.pos] == '}' {
		p.pos++
		p.depth--
		return jsonValue{kind: jsonObject}, nil
	}
	for {
		if p.pos >= len(p.s) || p.s[p.pos] != '"' {
			return jsonValue{}, p.errorf("expected a property name")
		}
		key, err := p.string()
		if err != nil {
			return jsonValue{}, err
		}
		p.space()
		if p.pos >= len(p.s) || p.s[p.pos] != ':' {
			return jsonValue{}, p.errorf("expected ':'")
		}
		p.pos++
		p.space()
		val, err := p.value()
		if err != nil {
			return jsonValue{}, err
		}
		p.a.mstack = append(p.a.mstack, jsonMember{key: key, val: val})
		p.space()
		if p.pos < len(p.s) && p.s[p.pos] == ',' {
			p.pos++
			p.space()
			continue
		}
		if p.pos < len(p.s) && p.s[p.pos] == '}' {
			p.pos++
			break
		}
		return jsonValue{}, p.errorf("expected ',' or '}'")
	}
	p.depth--
	members := jsOrder(dedupe(p.a.mstack[base:]))
	return jsonValue{kind: jsonObject, members: p.a.takeMembers(members)}, nil
}

// dedupe keeps the last value of a repeated key at its first position, as
// JSON.parse does.
func dedupe(ms []jsonMember) []jsonMember {
	if len(ms) < 2 {
		return ms
	}
	if len(ms) <= 16 {
		for i := 1; i < len(ms); i++ {
			for j := 0; j < i; j++ {
				if ms[i].key == ms[j].key {
					return dedupeSlow(ms)
				}
			}
		}
		return ms
	}
	seen := make(map[string]struct{}, len(ms))
	for _, m := range ms {
		if _, dup := seen[m.key]; dup {
			return dedupeSlow(ms)
		}
		seen[m.key] = struct{}{}
	}
	return ms
}

func dedupeSlow(ms []jsonMember) []jsonMember {
	at := make(map[string]int, len(ms))
	out := ms[:0]
	for _, m := range ms {
		if i, ok := at[m.key]; ok {
			out[i].val = m.val
			continue
		}
		at[m.key] = len(out)
		out = append(out, m)
	}
	return out
}

// jsOrder puts array-index keys ("0", "17") first in ascending order, as
// JavaScript orders an object's own properties; the rest keep their order.
func jsOrder(ms []jsonMember) []jsonMember {
	hasIndex := false
	for _, m := range ms {
		if _, ok := arrayIndex(m.key); ok {
			hasIndex = true
			break
		}
	}
	if !hasIndex {
		return ms
	}
	slices.SortStableFunc(ms, func(a, b jsonMember) int {
		ai, aok := arrayIndex(a.key)
		bi, bok := arrayIndex(b.key)
		switch {
		case aok && bok:
			return compareUint(ai, bi)
		case aok:
			return -1
		case bok:
			return 1
		}
		return 0
	})
	return ms
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// arrayIndex reports whether key is a canonical array index (0 … 2³²-2).
func arrayIndex(key string) (uint64, bool) {
	if key == "" || len(key) > 10 || key[0] == '0' && len(key) > 1 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, n < 1<<32-1
}

func (p *jsonParser) array() (jsonValue, error) {
	if err := p.enter(); err != nil {
		return jsonValue{}, err
	}
	base := len(p.a.estack)
	defer func() { p.a.estack = p.a.estack[:base] }()
	if p.pos < len(p.s) && p.s[p.pos] == ']' {
		p.pos++
		p.depth--
		return jsonValue{kind: jsonArray}, nil
	}
	for {
		val, err := p.value()
		if err != nil {
			return jsonValue{}, err
		}
		p.a.estack = append(p.a.estack, val)
		p.space()
		if p.pos < len(p.s) && p.s[p.pos] == ',' {
			p.pos++
			p.space()
			continue
		}
		if p.pos < len(p.s) && p.s[p.pos] == ']' {
			p.pos++
			break
		}
		return jsonValue{}, p.errorf("expected ',' or ']'")
	}
	p.depth--
	return jsonValue{kind: jsonArray, elems: p.a.takeElems(p.a.estack[base:])}, nil
}

func (p *jsonParser) number() (jsonValue, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.s[p.pos] == '-' {
		p.pos++
	}
	if p.pos < len(p.s) && p.s[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return jsonValue{}, p.errorf("invalid number")
	}
	if p.pos < len(p.s) && p.s[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return jsonValue{}, p.errorf("invalid number")
		}
	}
	if p.pos < len(p.s) && (p.s[p.pos] == 'e' || p.s[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.s) && (p.s[p.pos] == '+' || p.s[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return jsonValue{}, p.errorf("invalid number")
		}
	}
	// Out-of-range numbers become ±Inf or 0, as JSON.parse makes them.
	f, _ := strconv.ParseFloat(p.s[start:p.pos], 64)
	return jsonValue{kind: jsonNumber, num: f}, nil
}

func (p *jsonParser) string() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	for p.pos < len(p.s) {
		switch c := p.s[p.pos]; {
		case c == '"':
			s := p.s[start:p.pos]
			p.pos++
			return s, nil
		case c == '\\':
			return p.escapedString(start)
		case c < 0x20:
			return "", p.errorf("control character in string")
		default:
			p.pos++
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *jsonParser) escapedString(start int) (string, error) {
	var b strings.Builder
	b.WriteString(p.s[start:p.pos])
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		switch {
		case c == '"':
			p.pos++
			return b.String(), nil
		case c < 0x20:
			return "", p.errorf("control character in string")
		case c != '\\':
			b.WriteByte(c)
			p.pos++
			continue
		}
		if p.pos+1 >= len(p.s) {
			break
		}
		e := p.s[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, err := p.unicodeEscape()
			if err != nil {
				return "", err
			}
			b.WriteRune(r)
		default:
			return "", p.errorf("invalid escape \\%c", e)
		}
	}
	return "", p.errorf("unterminated string")
}

// unicodeEscape reads the XXXX of \uXXXX (and a low surrogate after a high
// one); a lone surrogate becomes U+FFFD, one code point as ajv counts it.
func (p *jsonParser) unicodeEscape() (rune, error) {
	hex4 := func() (rune, bool) {
		if p.pos+4 > len(p.s) {
			return 0, false
		}
		n, err := strconv.ParseUint(p.s[p.pos:p.pos+4], 16, 32)
		if err != nil {
			return 0, false
		}
		p.pos += 4
		return rune(n), true
	}
	r, ok := hex4()
	if !ok {
		return 0, p.errorf("invalid \\u escape")
	}
	if r >= 0xD800 && r < 0xDC00 && strings.HasPrefix(p.s[p.pos:], `\u`) {
		save := p.pos
		p.pos += 2
		if lo, ok := hex4(); ok && lo >= 0xDC00 && lo < 0xE000 {
			return (r-0xD800)<<10 + (lo - 0xDC00) + 0x10000, nil
		}
		p.pos = save
	}
	if r >= 0xD800 && r < 0xE000 {
		return utf8.RuneError, nil
	}
	return r, nil
}

// equal is deep equality as ajv's fast-deep-equal sees parsed JSON.
func equal(a, b *jsonValue) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case jsonNull:
		return true
	case jsonBool:
		return a.boolean == b.boolean
	case jsonNumber:
		return a.num == b.num
	case jsonString:
		return a.str == b.str
	case jsonArray:
		if len(a.elems) != len(b.elems) {
			return false
		}
		for i := range a.elems {
			if !equal(&a.elems[i], &b.elems[i]) {
				return false
			}
		}
		return true
	default:
		if len(a.members) != len(b.members) {
			return false
		}
		for i := range a.members {
			bv := b.get(a.members[i].key)
			if bv == nil || !equal(&a.members[i].val, bv) {
				return false
			}
		}
		return true
	}
}

// canonical writes a key that is equal for equal values (used to find
// duplicates in long arrays without comparing every pair).
func canonical(b *strings.Builder, v *jsonValue) {
	switch v.kind {
	case jsonNull:
		b.WriteString("n")
	case jsonBool:
		b.WriteString(strconv.FormatBool(v.boolean))
	case jsonNumber:
		b.WriteString("#" + jsNumber(v.num))
	case jsonString:
		b.WriteString(strconv.Quote(v.str))
	case jsonArray:
		b.WriteByte('[')
		for i := range v.elems {
			canonical(b, &v.elems[i])
			b.WriteByte(',')
		}
		b.WriteByte(']')
	default:
		ms := slices.Clone(v.members)
		slices.SortFunc(ms, func(x, y jsonMember) int { return strings.Compare(x.key, y.key) })
		b.WriteByte('{')
		for i := range ms {
			b.WriteString(strconv.Quote(ms[i].key) + ":")
			canonical(b, &ms[i].val)
			b.WriteByte(',')
		}
		b.WriteByte('}')
	}
}

// jsNumber formats f as JavaScript's String(f) does: 50, 0.5, 1e-7, 1e+21.
func jsNumber(f float64) string {
	switch {
	case f == 0:
		return "0"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	if a := math.Abs(f); a >= 1e21 || a < 1e-6 {
		mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
		return mant + "e" + exp[:1] + strings.TrimLeft(exp[1:], "0")
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// ---------------------------------------------------------------------------
// Compiled schema

// typeMask is a set of JSON Schema types.
type typeMask uint8

const (
	typeNull typeMask = 1 << iota
	typeBoolean
	typeObject
	typeArray
	typeNumber
	typeString
	typeInteger
)

var typeNames = map[string]typeMask{
	"null": typeNull, "boolean": typeBoolean, "object": typeObject, "array": typeArray,
	"number": typeNumber, "string": typeString, "integer": typeInteger,
}

// has reports whether v is of one of the types, with JavaScript's view of
// integers: 5.0 is an integer, 5.5 is not.
func (m typeMask) has(v *jsonValue) bool {
	switch v.kind {
	case jsonNull:
		return m&typeNull != 0
	case jsonBool:
		return m&typeBoolean != 0
	case jsonObject:
		return m&typeObject != 0
	case jsonArray:
		return m&typeArray != 0
	case jsonString:
		return m&typeString != 0
	}
	if math.IsInf(v.num, 0) { // ajv's strictNumbers
		return false
	}
	return m&typeNumber != 0 || m&typeInteger != 0 && v.num == math.Trunc(v.num)
}

// numCheck is one of maximum, minimum, exclusiveMaximum, exclusiveMinimum,
// multipleOf, with its message made at compile time.
type numCheck struct {
	op    byte // '<' '>' 'l' (<=) 'g' (>=) 'm' (multipleOf)
	limit float64
	msg   string
}

func (c *numCheck) ok(x float64) bool {
	switch c.op {
	case 'l':
		return x <= c.limit
	case 'g':
		return x >= c.limit
	case '<':
		return x < c.limit
	case '>':
		return x > c.limit
	}
	// ajv: res = x/m; invalid when res !== parseInt(res), and parseInt
	// reads String(res), so quotients of 1e21 and more count as invalid.
	res := x / c.limit
	return res == math.Trunc(res) && math.Abs(res) < 1e21
}

type namedNode struct {
	name string
	node *schemaNode
}

type patternNode struct {
	re   *pattern
	node *schemaNode
}

type propDeps struct {
	prop string
	deps []string
	msg  string
}

// schemaNode is one compiled (sub)schema. A nil pointer field means the
// keyword is absent or cannot fail.
type schemaNode struct {
	isBool, boolValue bool
	trivial           bool // an object schema with no keyword that can fail or evaluate
	needsEval         bool // has unevaluatedProperties/Items: track what is evaluated

	// type, as ajv: checked up front, or (deferType) in the keyword group
	// of its single type when that group has keywords.
	types     typeMask
	typeMsg   string
	upfront   bool
	deferType typeMask

	// untyped keywords, in ajv's rule order
	ref                  *schemaNode
	refInline            bool // ajv inlines the target: what it evaluated counts even if it fails
	hasConst             bool
	constVal             *jsonValue
	enum                 []jsonValue
	not                  *schemaNode
	anyOf, oneOf, allOf  []*schemaNode
	ifNode               *schemaNode
	thenNode, elseNode   *schemaNode
	hasThen, hasElse     bool
	hasNumber, hasString bool // the group has keywords (for deferred type errors)
	hasArray, hasObject  bool

	num []numCheck

	maxLength, minLength int
	maxLenMsg, minLenMsg string
	pattern              *pattern
	patternMsg           string

	maxItems, minItems int
	maxItemsMsg        string
	minItemsMsg        string
	tuple              []*schemaNode // draft-07 items array, or prefixItems
	hasTuple           bool
	extraItems         *schemaNode // additionalItems (draft-07) or items after prefixItems
	extraItemsFalse    bool
	extraItemsMsg      string
	extraFirst         bool        // draft-07 additionalItems runs before items
	items              *schemaNode // items as one schema, for every element
	contains           *schemaNode
	containsMin        int
	containsMax        int // -1: none
	containsMsg        string
	containsOn         bool
	uniqueItems        bool
	uniqueFast         bool // items has scalar types: ajv's hashing loop
	uniqueTypes        typeMask
	unevalItems        *schemaNode
	unevalItemsFalse   bool
	unevalItemsPresent bool
	maxProps, minProps int
	maxPropsMsg        string
	minPropsMsg        string
	required           []string
	propertyNames      *schemaNode
	addlProps          *schemaNode
	addlPropsFalse     bool
	addlPropsPresent   bool
	propDeps           []propDeps // dependencies (arrays), then dependentRequired
	schemaDeps         []namedNode
	properties         []namedNode // in JavaScript property order
	propertySet        map[string]struct{}
	patternProps       []patternNode
	depRequired        []propDeps
	depSchemas         []namedNode
	unevalProps        *schemaNode
	unevalPropsFalse   bool
	unevalPropsPresent bool
}

// ---------------------------------------------------------------------------
// Compiler

type compiler struct {
	draft2020 bool
	nodes     map[*jsonValue]*schemaNode
	bases     map[*jsonValue]string // base URI in effect at each schema object
	resources map[string]*jsonValue // absolute URI (and URI#anchor) → schema
	ptrs      map[*jsonValue]string // where each schema is, for messages
	rootBase  string
}

// defaultBase is the base URI of a schema without $id.
const defaultBase = "https://spacefix.invalid/schema.json"

func newCompiler(doc jsonValue) *compiler {
	c := &compiler{
		nodes:     map[*jsonValue]*schemaNode{},
		bases:     map[*jsonValue]string{},
		resources: map[string]*jsonValue{},
		ptrs:      map[*jsonValue]string{},
	}
	if doc.kind == jsonObject {
		if s := doc.get("$schema"); s != nil && s.kind == jsonString {
			c.draft2020 = strings.Contains(s.str, "2020-12") || strings.Contains(s.str, "2019-09")
		}
	}
	return c
}

// compile compiles the root document: it first records every schema's base
// URI and $id/$anchor so that $ref can be resolved anywhere.
func (c *compiler) compile(doc jsonValue, ptr string) (*schemaNode, error) {
	root := &doc
	if root.kind != jsonObject && root.kind != jsonBool {
		return nil, fmt.Errorf("%s: a schema must be an object or a boolean", ptr)
	}
	c.rootBase = defaultBase
	c.resources[defaultBase] = root
	if err := c.register(root, defaultBase, ptr); err != nil {
		return nil, err
	}
	return c.node(root, ptr)
}

// Keywords whose value is one schema, an array of schemas, or a map of them.
var (
	schemaKeywords = []string{
		"not", "if", "then", "else", "items", "additionalItems", "contains",
		"propertyNames", "additionalProperties", "unevaluatedItems", "unevaluatedProperties",
	}
	schemaArrayKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	schemaMapKeywords   = []string{
		"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies",
	}
)

func (c *compiler) register(v *jsonValue, base, ptr string) error {
	if v.kind != jsonObject {
		return nil
	}
	if _, done := c.bases[v]; done {
		return nil
	}
	if id := v.get("$id"); id != nil && id.kind == jsonString {
		abs, err := resolveURI(base, id.str)
		if err != nil {
			return fmt.Errorf("%s: $id %q: %v", ptr, id.str, err)
		}
		noFrag, frag, _ := strings.Cut(abs, "#")
		if frag != "" && !c.draft2020 && strings.HasPrefix(id.str, "#") {
			c.resources[abs] = v // draft-07 location-independent id: "#foo"
		} else {
			base = noFrag
			c.resources[noFrag] = v
		}
	}
	for _, kw := range []string{"$anchor", "$dynamicAnchor"} {
		if a := v.get(kw); a != nil && a.kind == jsonString {
			c.resources[base+"#"+a.str] = v
		}
	}
	c.bases[v] = base
	c.ptrs[v] = ptr
	for i := range v.members {
		m := &v.members[i]
		sub := ptr + "/" + escapePointer(m.key)
		switch {
		case m.val.kind == jsonArray && slices.Contains(schemaArrayKeywords, m.key):
			for j := range m.val.elems {
				if err := c.register(&m.val.elems[j], base, sub+"/"+strconv.Itoa(j)); err != nil {
					return err
				}
			}
		case slices.Contains(schemaKeywords, m.key):
			if err := c.register(&m.val, base, sub); err != nil {
				return err
			}
		case m.val.kind == jsonObject && slices.Contains(schemaMapKeywords, m.key):
			for j := range m.val.members {
				mm := &m.val.members[j]
				if err := c.register(&mm.val, base, sub+"/"+escapePointer(mm.key)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func resolveURI(base, ref string) (string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	return b.ResolveReference(r).String(), nil
}

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// resolveRef finds the schema that ref (as written at from) points to.
func (c *compiler) resolveRef(from *jsonValue, ref string) (*jsonValue, string, error) {
	base := c.bases[from]
	abs, err := resolveURI(base, ref)
	if err != nil {
		return nil, "", err
	}
	if v, ok := c.resources[abs]; ok {
		return v, c.ptrs[v], nil
	}
	noFrag, frag, _ := strings.Cut(abs, "#")
	res, ok := c.resources[noFrag]
	if !ok {
		return nil, "", fmt.Errorf("can't resolve reference %q", ref)
	}
	if frag == "" {
		return res, c.ptrs[res], nil
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, "", fmt.Errorf("can't resolve reference %q", ref)
	}
	ptr, _ := url.PathUnescape(frag)
	cur := res
	at := c.ptrs[res]
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var next *jsonValue
		switch cur.kind {
		case jsonObject:
			next = cur.get(tok)
		case jsonArray:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(cur.elems) {
				next = &cur.elems[i]
			}
		}
		if next == nil {
			return nil, "", fmt.Errorf("can't resolve reference %q", ref)
		}
		cur = next
		at += "/" + escapePointer(tok)
	}
	if _, known := c.bases[cur]; !known {
		c.bases[cur] = c.bases[res]
		c.ptrs[cur] = at
	}
	return cur, at, nil
}

// node compiles the schema v (memoised, so recursive $refs terminate).
func (c *compiler) node(v *jsonValue, ptr string) (*schemaNode, error) {
	if n, ok := c.nodes[v]; ok {
		return n, nil
	}
	n := &schemaNode{maxLength: -1, minLength: -1, maxItems: -1, minItems: -1, maxProps: -1, minProps: -1, containsMax: -1}
	c.nodes[v] = n
	switch v.kind {
	case jsonBool:
		n.isBool, n.boolValue = true, v.boolean
		return n, nil
	case jsonObject:
	default:
		return nil, fmt.Errorf("%s: a schema must be an object or a boolean", ptr)
	}
	if _, ok := c.bases[v]; !ok {
		c.bases[v] = c.rootBase
	}
	kc := keywordCompiler{c: c, v: v, n: n, ptr: ptr}
	for _, step := range []func() error{
		kc.typeKeyword, kc.refKeyword, kc.constEnum, kc.applicators, kc.numberKeywords,
		kc.stringKeywords, kc.arrayKeywords, kc.objectKeywords, kc.finish,
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// keywordCompiler compiles the keywords of one schema object.
type keywordCompiler struct {
	c   *compiler
	v   *jsonValue
	n   *schemaNode
	ptr string
}

func (k *keywordCompiler) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s", k.ptr, fmt.Sprintf(format, args...))
}

func (k *keywordCompiler) has(kw string) bool { return k.v.get(kw) != nil }

// sub compiles the schema under keyword kw (nil if absent).
func (k *keywordCompiler) sub(kw string) (*schemaNode, error) {
	s := k.v.get(kw)
	if s == nil {
		return nil, nil
	}
	if s.kind != jsonObject && s.kind != jsonBool {
		return nil, k.errorf("%s must be a schema (an object or a boolean)", kw)
	}
	return k.c.node(s, k.ptr+"/"+kw)
}

func (k *keywordCompiler) subArray(kw string, nonEmpty bool) ([]*schemaNode, error) {
	s := k.v.get(kw)
	if s == nil {
		return nil, nil
	}
	if s.kind != jsonArray || nonEmpty && len(s.elems) == 0 {
		return nil, k.errorf("%s must be a non-empty array of schemas", kw)
	}
	out := make([]*schemaNode, len(s.elems))
	for i := range s.elems {
		e := &s.elems[i]
		if e.kind != jsonObject && e.kind != jsonBool {
			return nil, k.errorf("%s/%d must be a schema (an object or a boolean)", kw, i)
		}
		n, err := k.c.node(e, fmt.Sprintf("%s/%s/%d", k.ptr, kw, i))
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

func (k *keywordCompiler) subMap(kw string) ([]namedNode, error) {
	s := k.v.get(kw)
	if s == nil {
		return nil, nil
	}
	if s.kind != jsonObject {
		return nil, k.errorf("%s must be an object", kw)
	}
	var out []namedNode
	for i := range s.members {
		m := &s.members[i]
		if m.key == "__proto__" { // ajv skips it
			continue
		}
		if m.val.kind != jsonObject && m.val.kind != jsonBool {
			return nil, k.errorf("%s/%s must be a schema (an object or a boolean)", kw, escapePointer(m.key))
		}
		n, err := k.c.node(&m.val, k.ptr+"/"+kw+"/"+escapePointer(m.key))
		if err != nil {
			return nil, err
		}
		out = append(out, namedNode{name: m.key, node: n})
	}
	return out, nil
}

func (k *keywordCompiler) number(kw string) (float64, bool, error) {
	s := k.v.get(kw)
	if s == nil {
		return 0, false, nil
	}
	if s.kind != jsonNumber {
		return 0, false, k.errorf("%s must be a number", kw)
	}
	return s.num, true, nil
}

// count reads a non-negative integer keyword (maxLength, minItems…); -1 if absent.
func (k *keywordCompiler) count(kw string) (int, error) {
	f, ok, err := k.number(kw)
	if err != nil || !ok {
		return -1, err
	}
	if f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		return -1, k.errorf("%s must be a non-negative integer", kw)
	}
	return int(f), nil
}

func (k *keywordCompiler) strings(kw string) ([]string, bool, error) {
	s := k.v.get(kw)
	if s == nil {
		return nil, false, nil
	}
	if s.kind != jsonArray {
		return nil, false, k.errorf("%s must be an array of strings", kw)
	}
	out := make([]string, len(s.elems))
	for i, e := range s.elems {
		if e.kind != jsonString {
			return nil, false, k.errorf("%s must be an array of strings", kw)
		}
		out[i] = e.str
	}
	return out, true, nil
}

func (k *keywordCompiler) typeKeyword() error {
	t := k.v.get("type")
	var names []string
	switch {
	case t == nil:
	case t.kind == jsonString:
		names = []string{t.str}
	case t.kind == jsonArray:
		for _, e := range t.elems {
			if e.kind != jsonString {
				return k.errorf("type must be a type name or an array of type names")
			}
			names = append(names, e.str)
		}
	default:
		return k.errorf("type must be a type name or an array of type names")
	}
	count := 0
	for _, name := range names {
		m, ok := typeNames[name]
		if !ok {
			return k.errorf("type %q is not a JSON Schema type", name)
		}
		if k.n.types&m == 0 {
			count++
		}
		k.n.types |= m
	}
	k.n.typeMsg = "must be " + strings.Join(names, ",")
	if nb := k.v.get("nullable"); nb != nil {
		if nb.kind != jsonBool {
			return k.errorf("nullable must be a boolean")
		}
		if nb.boolean && k.n.types&typeNull == 0 {
			if t == nil {
				return k.errorf(`"nullable" cannot be used without "type"`)
			}
			k.n.types |= typeNull
			count++
		}
	}
	if count == 0 {
		return nil
	}
	// ajv checks a single type in its keyword group when the schema has
	// keywords of that group; otherwise up front.
	k.n.upfront = true
	if count == 1 && k.hasGroup(k.n.types) {
		k.n.upfront, k.n.deferType = false, k.n.types
	}
	return nil
}

var groupKeywords = map[typeMask][]string{
	typeNumber: {"maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum", "multipleOf", "format"},
	typeString: {"maxLength", "minLength", "pattern", "format"},
	typeArray: {"maxItems", "minItems", "additionalItems", "prefixItems", "items", "contains",
		"uniqueItems", "maxContains", "minContains", "unevaluatedItems"},
	typeObject: {"maxProperties", "minProperties", "required", "propertyNames", "additionalProperties",
		"dependencies", "properties", "patternProperties", "dependentRequired", "dependentSchemas",
		"unevaluatedProperties"},
}

func (k *keywordCompiler) hasGroup(t typeMask) bool {
	for _, kw := range groupKeywords[t] {
		if kw == "additionalItems" && k.c.draft2020 || kw == "prefixItems" && !k.c.draft2020 {
			continue
		}
		if k.has(kw) {
			return true
		}
	}
	return false
}

func (k *keywordCompiler) refKeyword() error {
	kw := "$ref"
	r := k.v.get(kw)
	if k.c.draft2020 {
		// $dynamicRef and $recursiveRef are resolved statically, like $ref:
		// right unless an outer schema overrides the dynamic anchor.
		for _, dyn := range []string{"$dynamicRef", "$recursiveRef"} {
			if d := k.v.get(dyn); d != nil && r == nil {
				kw, r = dyn, d
			}
		}
	}
	if r == nil {
		return nil
	}
	if r.kind != jsonString {
		return k.errorf("%s must be a string", kw)
	}
	target, at, err := k.c.resolveRef(k.v, r.str)
	if err != nil {
		return k.errorf("%s: %v", kw, err)
	}
	if target.kind != jsonObject && target.kind != jsonBool {
		return k.errorf("%s %q does not point to a schema", kw, r.str)
	}
	k.n.refInline = target.kind == jsonBool || !hasRef(target)
	k.n.ref, err = k.c.node(target, at)
	return err
}

// hasRef is ajv's test for a schema it cannot inline: a reference keyword
// anywhere inside.
func hasRef(v *jsonValue) bool {
	switch v.kind {
	case jsonObject:
		for i := range v.members {
			switch v.members[i].key {
			case "$ref", "$recursiveRef", "$recursiveAnchor", "$dynamicRef", "$dynamicAnchor":
				return true
			}
			if hasRef(&v.members[i].val) {
				return true
			}
		}
	case jsonArray:
		for i := range v.elems {
			if hasRef(&v.elems[i]) {
				return true
			}
		}
	}
	return false
}

func (k *keywordCompiler) constEnum() error {
	if c := k.v.get("const"); c != nil {
		k.n.hasConst, k.n.constVal = true, c
	}
	if e := k.v.get("enum"); e != nil {
		if e.kind != jsonArray || len(e.elems) == 0 {
			return k.errorf("enum must be a non-empty array")
		}
		k.n.enum = e.elems
	}
	return nil
}

func (k *keywordCompiler) applicators() error {
	n := k.n
	var err error
	if n.not, err = k.sub("not"); err != nil {
		return err
	}
	if n.anyOf, err = k.subArray("anyOf", true); err != nil {
		return err
	}
	if n.oneOf, err = k.subArray("oneOf", true); err != nil {
		return err
	}
	if n.allOf, err = k.subArray("allOf", true); err != nil {
		return err
	}
	if n.ifNode, err = k.sub("if"); err != nil {
		return err
	}
	if n.thenNode, err = k.sub("then"); err != nil {
		return err
	}
	if n.elseNode, err = k.sub("else"); err != nil {
		return err
	}
	if n.ifNode != nil {
		n.hasThen = n.thenNode != nil && !n.thenNode.alwaysValid()
		n.hasElse = n.elseNode != nil && !n.elseNode.alwaysValid()
	}
	return nil
}

func (k *keywordCompiler) numberKeywords() error {
	for _, kw := range []struct {
		name string
		op   byte
		text string
	}{
		{"maximum", 'l', "<="}, {"minimum", 'g', ">="},
		{"exclusiveMaximum", '<', "<"}, {"exclusiveMinimum", '>', ">"},
	} {
		f, ok, err := k.number(kw.name)
		if err != nil {
			return err
		}
		if ok {
			k.n.num = append(k.n.num, numCheck{op: kw.op, limit: f, msg: "must be " + kw.text + " " + jsNumber(f)})
		}
	}
	f, ok, err := k.number("multipleOf")
	if err != nil {
		return err
	}
	if ok {
		if f <= 0 {
			return k.errorf("multipleOf must be greater than 0")
		}
		k.n.num = append(k.n.num, numCheck{op: 'm', limit: f, msg: "must be multiple of " + jsNumber(f)})
	}
	k.n.hasNumber = k.hasGroup(typeNumber)
	return nil
}

func (k *keywordCompiler) stringKeywords() error {
	n := k.n
	var err error
	if n.maxLength, err = k.count("maxLength"); err != nil {
		return err
	}
	if n.minLength, err = k.count("minLength"); err != nil {
		return err
	}
	n.maxLenMsg = "must NOT have more than " + strconv.Itoa(n.maxLength) + " characters"
	n.minLenMsg = "must NOT have fewer than " + strconv.Itoa(n.minLength) + " characters"
	if p := k.v.get("pattern"); p != nil {
		if p.kind != jsonString {
			return k.errorf("pattern must be a string")
		}
		if n.pattern, err = compilePattern(p.str); err != nil {
			return k.errorf("pattern %q: %v", p.str, err)
		}
		n.patternMsg = `must match pattern "` + p.str + `"`
	}
	n.hasString = k.hasGroup(typeString)
	return nil
}

func (k *keywordCompiler) arrayKeywords() error {
	n := k.n
	var err error
	if n.maxItems, err = k.count("maxItems"); err != nil {
		return err
	}
	if n.minItems, err = k.count("minItems"); err != nil {
		return err
	}
	n.maxItemsMsg = "must NOT have more than " + strconv.Itoa(n.maxItems) + " items"
	n.minItemsMsg = "must NOT have fewer than " + strconv.Itoa(n.minItems) + " items"
	if err := k.itemsKeywords(); err != nil {
		return err
	}
	if err := k.containsKeyword(); err != nil {
		return err
	}
	if u := k.v.get("uniqueItems"); u != nil {
		if u.kind != jsonBool {
			return k.errorf("uniqueItems must be a boolean")
		}
		n.uniqueItems = u.boolean
		k.uniqueTypes()
	}
	if n.unevalItems, err = k.sub("unevaluatedItems"); err != nil {
		return err
	}
	if n.unevalItems != nil {
		n.unevalItemsPresent = true
		n.unevalItemsFalse = n.unevalItems.isBool && !n.unevalItems.boolValue
		n.needsEval = true
	}
	n.hasArray = k.hasGroup(typeArray)
	return nil
}

// itemsKeywords compiles items/additionalItems (draft-07) or
// prefixItems/items (2020-12).
func (k *keywordCompiler) itemsKeywords() error {
	n := k.n
	var err error
	tupleKw, extraKw := "items", "additionalItems"
	if k.c.draft2020 {
		tupleKw, extraKw = "prefixItems", "items"
	}
	if it := k.v.get(tupleKw); it != nil && (it.kind == jsonArray || k.c.draft2020) {
		if n.tuple, err = k.subArray(tupleKw, false); err != nil {
			return err
		}
		n.hasTuple = true
		if n.extraItems, err = k.sub(extraKw); err != nil {
			return err
		}
		if n.extraItems != nil {
			n.extraFirst = !k.c.draft2020
			n.extraItemsFalse = n.extraItems.isBool && !n.extraItems.boolValue
			n.extraItemsMsg = "must NOT have more than " + strconv.Itoa(len(n.tuple)) + " items"
		}
		return nil
	}
	n.items, err = k.sub("items")
	return err
}

func (k *keywordCompiler) containsKeyword() error {
	n := k.n
	var err error
	if n.contains, err = k.sub("contains"); err != nil || n.contains == nil {
		return err
	}
	n.containsMin = 1
	if minC, err := k.count("minContains"); err != nil {
		return err
	} else if minC >= 0 {
		n.containsMin = minC
	}
	if n.containsMax, err = k.count("maxContains"); err != nil {
		return err
	}
	// ajv ignores contains when minContains is 0 and there is no maxContains.
	n.containsOn = !(n.containsMax < 0 && n.containsMin == 0)
	n.containsMsg = "must contain at least " + strconv.Itoa(n.containsMin) + " valid item(s)"
	if n.containsMax >= 0 {
		n.containsMsg = "must contain at least " + strconv.Itoa(n.containsMin) + " and no more than " +
			strconv.Itoa(n.containsMax) + " valid item(s)"
	}
	return nil
}

// uniqueTypes records the type of "items" that lets ajv use its hashing
// loop for uniqueItems, which changes the indices its message names.
func (k *keywordCompiler) uniqueTypes() {
	it := k.v.get("items")
	if it == nil || it.kind != jsonObject {
		return
	}
	sub := keywordCompiler{c: k.c, v: it, n: &schemaNode{}, ptr: k.ptr + "/items"}
	if sub.typeKeyword() != nil {
		return
	}
	m := sub.n.types
	if m == 0 || m&(typeObject|typeArray) != 0 {
		return
	}
	k.n.uniqueFast, k.n.uniqueTypes = true, m
}

func (k *keywordCompiler) objectKeywords() error {
	n := k.n
	var err error
	if n.maxProps, err = k.count("maxProperties"); err != nil {
		return err
	}
	if n.minProps, err = k.count("minProperties"); err != nil {
		return err
	}
	n.maxPropsMsg = "must NOT have more than " + strconv.Itoa(n.maxProps) + " properties"
	n.minPropsMsg = "must NOT have fewer than " + strconv.Itoa(n.minProps) + " properties"
	if n.required, _, err = k.strings("required"); err != nil {
		return err
	}
	if n.propertyNames, err = k.sub("propertyNames"); err != nil {
		return err
	}
	if n.addlProps, err = k.sub("additionalProperties"); err != nil {
		return err
	}
	if n.addlProps != nil {
		n.addlPropsPresent = true
		n.addlPropsFalse = n.addlProps.isBool && !n.addlProps.boolValue
	}
	if err := k.dependencies(); err != nil {
		return err
	}
	if n.properties, err = k.subMap("properties"); err != nil {
		return err
	}
	if len(n.properties) > 0 {
		n.propertySet = make(map[string]struct{}, len(n.properties))
	}
	for _, p := range n.properties {
		n.propertySet[p.name] = struct{}{}
	}
	if err := k.patternProperties(); err != nil {
		return err
	}
	if n.depRequired, err = k.propDeps("dependentRequired", true); err != nil {
		return err
	}
	if n.depSchemas, err = k.subMap("dependentSchemas"); err != nil {
		return err
	}
	if n.unevalProps, err = k.sub("unevaluatedProperties"); err != nil {
		return err
	}
	if n.unevalProps != nil {
		n.unevalPropsPresent = true
		n.unevalPropsFalse = n.unevalProps.isBool && !n.unevalProps.boolValue
		n.needsEval = true
	}
	n.hasObject = k.hasGroup(typeObject)
	return nil
}

// dependencies splits draft-07 "dependencies" into property and schema
// dependencies, as ajv does.
func (k *keywordCompiler) dependencies() error {
	d := k.v.get("dependencies")
	if d == nil {
		return nil
	}
	if d.kind != jsonObject {
		return k.errorf("dependencies must be an object")
	}
	var err error
	if k.n.propDeps, err = k.propDeps("dependencies", false); err != nil {
		return err
	}
	for i := range d.members {
		m := &d.members[i]
		if m.val.kind == jsonArray || m.key == "__proto__" {
			continue
		}
		if m.val.kind != jsonObject && m.val.kind != jsonBool {
			return k.errorf("dependencies/%s must be a schema or an array of strings", escapePointer(m.key))
		}
		n, err := k.c.node(&m.val, k.ptr+"/dependencies/"+escapePointer(m.key))
		if err != nil {
			return err
		}
		k.n.schemaDeps = append(k.n.schemaDeps, namedNode{name: m.key, node: n})
	}
	return nil
}

// propDeps reads the property-array entries of dependencies or
// dependentRequired, with ajv's message for each.
func (k *keywordCompiler) propDeps(kw string, all bool) ([]propDeps, error) {
	d := k.v.get(kw)
	if d == nil {
		return nil, nil
	}
	if d.kind != jsonObject {
		return nil, k.errorf("%s must be an object", kw)
	}
	var out []propDeps
	for i := range d.members {
		m := &d.members[i]
		if m.val.kind != jsonArray {
			if all {
				return nil, k.errorf("%s/%s must be an array of strings", kw, escapePointer(m.key))
			}
			continue
		}
		deps := make([]string, len(m.val.elems))
		for j, e := range m.val.elems {
			if e.kind != jsonString {
				return nil, k.errorf("%s/%s must be an array of strings", kw, escapePointer(m.key))
			}
			deps[j] = e.str
		}
		if len(deps) == 0 || m.key == "__proto__" {
			continue
		}
		word := "property"
		if len(deps) > 1 {
			word = "properties"
		}
		msg := "must have " + word + " " + strings.Join(deps, ", ") + " when property " + m.key + " is present"
		out = append(out, propDeps{prop: m.key, deps: deps, msg: msg})
	}
	return out, nil
}

func (k *keywordCompiler) patternProperties() error {
	named, err := k.subMap("patternProperties")
	if err != nil {
		return err
	}
	for _, nn := range named {
		re, err := compilePattern(nn.name)
		if err != nil {
			return k.errorf("patternProperties %q: %v", nn.name, err)
		}
		k.n.patternProps = append(k.n.patternProps, patternNode{re: re, node: nn.node})
	}
	return nil
}

// finish decides whether the node can skip validation entirely.
func (k *keywordCompiler) finish() error {
	n := k.n
	n.trivial = n.types == 0 && n.ref == nil && !n.hasConst && n.enum == nil && n.not == nil &&
		n.anyOf == nil && n.oneOf == nil && n.allOf == nil && n.ifNode == nil && len(n.num) == 0 &&
		n.maxLength < 0 && n.minLength < 0 && n.pattern == nil &&
		n.maxItems < 0 && n.minItems < 0 && !n.hasTuple && n.items == nil && n.contains == nil &&
		!n.uniqueItems && n.unevalItems == nil &&
		n.maxProps < 0 && n.minProps < 0 && len(n.required) == 0 && n.propertyNames == nil &&
		n.addlProps == nil && n.propDeps == nil && n.schemaDeps == nil && n.properties == nil &&
		n.patternProps == nil && n.depRequired == nil && n.depSchemas == nil && n.unevalProps == nil
	return nil
}

// alwaysValid is ajv's alwaysValidSchema: true, or an object with no rules.
func (n *schemaNode) alwaysValid() bool {
	if n.isBool {
		return n.boolValue
	}
	return n.trivial
}

// ---------------------------------------------------------------------------
// Patterns

// pattern is a compiled "pattern" or patternProperties key. ajv compiles
// them as JavaScript regular expressions with the "u" flag. Most translate to
// Go's linear-time RE2 syntax exactly; the rest (lookaround, backreferences)
// run on regexp2 in ECMAScript mode, with a time limit per match.
type pattern struct {
	re  *regexp.Regexp
	re2 *regexp2.Regexp
}

// patternTimeout bounds one backtracking match, and patternBudget all of
// them in one Validate call; a match that runs out of time counts as not
// matching (the argument is refused).
const (
	patternTimeout = 100 * time.Millisecond
	patternBudget  = 250 * time.Millisecond
)

func compilePattern(src string) (*pattern, error) {
	if tr, ok := translateRE2(src); ok {
		if re, err := regexp.Compile(tr); err == nil {
			return &pattern{re: re}, nil
		}
	}
	re, err := regexp2.Compile(src, regexp2.ECMAScript|regexp2.Unicode)
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = patternTimeout
	return &pattern{re2: re}, nil
}

// match reports whether s matches p anywhere, as RegExp.test does.
func (vs *vstate) match(p *pattern, s string) bool {
	if p.re != nil {
		return p.re.MatchString(s)
	}
	if vs.regexpSpent >= patternBudget {
		return false
	}
	start := time.Now()
	ok, err := p.re2.MatchString(s)
	vs.regexpSpent += time.Since(start)
	return ok && err == nil
}

// JavaScript's \s, as the inside of a character class in RE2 syntax.
const jsSpace = `\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}`

// translateRE2 rewrites a JavaScript pattern into RE2 syntax with the same
// meaning, or reports false when it cannot be sure it would.
func translateRE2(src string) (string, bool) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\\':
			if i+1 >= len(src) {
				return "", false
			}
			i++
			tr, n, ok := translateEscape(src[i:], inClass)
			if !ok {
				return "", false
			}
			b.WriteString(tr)
			i += n - 1
		case inClass && c == ']':
			inClass = false
			b.WriteByte(c)
		case inClass && c == '[':
			if i+1 < len(src) && (src[i+1] == ':' || src[i+1] == '.' || src[i+1] == '=') {
				return "", false
			}
			b.WriteString(`\[`)
		case inClass:
			b.WriteByte(c)
		case c == '[':
			rest := src[i+1:]
			if strings.HasPrefix(rest, "]") || strings.HasPrefix(rest, "^]") {
				return "", false // [] and [^] mean nothing and anything in JS
			}
			inClass = true
			b.WriteByte(c)
			if strings.HasPrefix(rest, "^") {
				b.WriteByte('^')
				i++
			}
		case c == '.':
			b.WriteString(`[^\n\r\x{2028}\x{2029}]`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), !inClass
}

// translateEscape translates the escape starting at s[0] (just after the
// backslash); n is how many bytes of s it used.
func translateEscape(s string, inClass bool) (tr string, n int, ok bool) {
	switch c := s[0]; c {
	case 'd', 'D', 'w', 'W', 'n', 'r', 't', 'f', 'v':
		return `\` + string(c), 1, true
	case 'b', 'B':
		if inClass {
			if c == 'b' {
				return `\x08`, 1, true
			}
			return "", 0, false
		}
		return `\` + string(c), 1, true
	case 's':
		if inClass {
			return jsSpace, 1, true
		}
		return "[" + jsSpace + "]", 1, true
	case 'S':
		if inClass {
			return "", 0, false
		}
		return "[^" + jsSpace + "]", 1, true
	case 'u':
		return translateUnicodeEscape(s)
	case 'x':
		if len(s) >= 3 && isHex(s[1:3]) {
			return `\x{` + s[1:3] + `}`, 3, true
		}
		return "", 0, false
	case '0':
		if len(s) > 1 && s[1] >= '0' && s[1] <= '9' {
			return "", 0, false
		}
		return `\x{0}`, 1, true
	case 'p', 'P':
		end := strings.IndexByte(s, '}')
		if len(s) < 2 || s[1] != '{' || end < 0 || strings.ContainsRune(s[:end], '=') {
			return "", 0, false
		}
		return `\` + s[:end+1], end + 1, true
	}
	if c := s[0]; c < utf8.RuneSelf && strings.IndexByte(`^$\.*+?()[]{}|/-`, c) >= 0 {
		return `\` + string(c), 1, true
	}
	return "", 0, false // \c, \k, backreferences, identity escapes: not sure
}

func translateUnicodeEscape(s string) (string, int, bool) {
	if len(s) >= 3 && s[1] == '{' {
		end := strings.IndexByte(s, '}')
		if end < 0 || !isHex(s[2:end]) {
			return "", 0, false
		}
		return `\x{` + s[2:end] + `}`, end + 1, true
	}
	if len(s) < 5 || !isHex(s[1:5]) {
		return "", 0, false
	}
	r, _ := strconv.ParseUint(s[1:5], 16, 32)
	if r >= 0xD800 && r < 0xE000 {
		return "", 0, false // surrogates: leave to regexp2
	}
	return `\x{` + s[1:5] + `}`, 5, true
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// Validation

// vstate is the state of one Validate call; pooled.
type vstate struct {
	arena arena
	errs  []string
	path  []pathSeg
	quiet int // > 0 inside not/if: only validity matters, no messages
	depth int

	regexpSpent time.Duration // in backtracking pattern matches
}

type pathSeg struct {
	key string
	idx int // -1 for a key
}

var statePool = sync.Pool{New: func() any { return new(vstate) }}

func (vs *vstate) release() {
	if cap(vs.arena.members) > maxPooled || cap(vs.arena.elems) > maxPooled {
		vs.arena = arena{} // do not keep a huge call's memory in the pool
	}
	vs.arena.reset()
	clear(vs.errs)
	clear(vs.path)
	vs.errs, vs.path, vs.quiet, vs.depth, vs.regexpSpent = vs.errs[:0], vs.path[:0], 0, 0, 0
	statePool.Put(vs)
}

// maxPooled is the most members or elements a pooled state keeps room for.
const maxPooled = 4096

// maxValidateDepth stops a schema that refers to itself without consuming
// the instance ({"$ref": "#"}), which would otherwise recurse forever.
const maxValidateDepth = 8192

// report records msg for the current instance location, as ajv's
// errorsText prints it: "data" + instancePath + " " + message.
func (vs *vstate) report(msg string) {
	if vs.quiet > 0 {
		return
	}
	var b strings.Builder
	b.WriteString("data")
	for _, s := range vs.path {
		b.WriteByte('/')
		if s.idx >= 0 {
			b.WriteString(strconv.Itoa(s.idx))
		} else {
			b.WriteString(escapePointer(s.key))
		}
	}
	b.WriteByte(' ')
	b.WriteString(msg)
	vs.errs = append(vs.errs, b.String())
}

// mark returns the error count, for resetting after a passing anyOf/oneOf.
func (vs *vstate) mark() int { return len(vs.errs) }

func (vs *vstate) resetTo(m int) {
	if vs.quiet == 0 {
		vs.errs = vs.errs[:m]
	}
}

// at validates v (a member or element of the current instance) against n
// with key or index pushed onto the instance path.
func (vs *vstate) at(n *schemaNode, v *jsonValue, key string, idx int, ev *evaluated) bool {
	vs.path = append(vs.path, pathSeg{key: key, idx: idx})
	ok := vs.validate(n, v, ev)
	vs.path = vs.path[:len(vs.path)-1]
	return ok
}

// evaluated records which members or elements of one instance value a
// schema evaluated, for unevaluatedProperties/Items.
type evaluated struct {
	allProps bool
	props    []bool // by member index
	allItems bool
	items    int
}

func (e *evaluated) markProp(v *jsonValue, i int) {
	if e == nil || e.allProps {
		return
	}
	if e.props == nil {
		e.props = make([]bool, len(v.members))
	}
	e.props[i] = true
}

func (e *evaluated) merge(o *evaluated) {
	if e == nil {
		return
	}
	e.allProps = e.allProps || o.allProps
	if !e.allProps && o.props != nil {
		if e.props == nil {
			e.props = make([]bool, len(o.props))
		}
		for i, p := range o.props {
			e.props[i] = e.props[i] || p
		}
	}
	e.allItems = e.allItems || o.allItems
	e.items = max(e.items, o.items)
}

func (e *evaluated) prop(i int) bool {
	return e.allProps || e.props != nil && e.props[i]
}

// child returns a fresh record for an in-place subschema, or nil when the
// caller is not tracking.
func child(ev *evaluated, buf *evaluated) *evaluated {
	if ev == nil {
		return nil
	}
	*buf = evaluated{}
	return buf
}

// validate applies n to v at the current path, in ajv's keyword order, and
// reports whether v is valid. ev, when not nil, receives what n evaluated.
func (vs *vstate) validate(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	if n.isBool {
		if !n.boolValue {
			vs.report("boolean schema is false")
		}
		return n.boolValue
	}
	if n.trivial {
		return true
	}
	if vs.depth >= maxValidateDepth {
		vs.report("must NOT be nested this deeply (schema recursion)")
		return false
	}
	var own evaluated
	if ev == nil && n.needsEval {
		ev = &own
	}
	vs.depth++
	ok := vs.groups(n, v, ev)
	vs.depth--
	return ok
}

// groups runs the keyword groups in ajv's order, stopping early when only
// validity matters.
func (vs *vstate) groups(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	ok := true
	if n.upfront && !n.types.has(v) {
		vs.report(n.typeMsg)
		ok = false
	}
	if ok = vs.untyped(n, v, ev) && ok; !ok && vs.quiet > 0 {
		return false
	}
	if ok = vs.numberGroup(n, v) && ok; !ok && vs.quiet > 0 {
		return false
	}
	if ok = vs.stringGroup(n, v) && ok; !ok && vs.quiet > 0 {
		return false
	}
	if ok = vs.arrayGroup(n, v, ev) && ok; !ok && vs.quiet > 0 {
		return false
	}
	return vs.objectGroup(n, v, ev) && ok
}

// untyped runs $ref, const, enum, not, anyOf, oneOf, allOf and if.
func (vs *vstate) untyped(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	ok := true
	var buf evaluated
	if n.ref != nil {
		sub := child(ev, &buf)
		valid := vs.validate(n.ref, v, sub)
		if valid || n.refInline {
			ev.mergeFrom(sub)
		}
		ok = valid && ok
	}
	if n.hasConst && !equal(v, n.constVal) {
		vs.report("must be equal to constant")
		ok = false
	}
	if n.enum != nil && !vs.inEnum(n, v) {
		vs.report("must be equal to one of the allowed values")
		ok = false
	}
	if n.not != nil {
		vs.quiet++
		matched := vs.validate(n.not, v, nil)
		vs.quiet--
		if matched {
			vs.report("must NOT be valid")
			ok = false
		}
	}
	if n.anyOf != nil {
		ok = vs.anyOf(n, v, ev) && ok
	}
	if n.oneOf != nil {
		ok = vs.oneOf(n, v, ev) && ok
	}
	for _, s := range n.allOf {
		if s.alwaysValid() {
			continue
		}
		sub := child(ev, &buf)
		ok = vs.validate(s, v, sub) && ok
		ev.mergeFrom(sub)
	}
	if n.ifNode != nil && (n.hasThen || n.hasElse) {
		ok = vs.ifThenElse(n, v, ev) && ok
	}
	return ok
}

func (e *evaluated) mergeFrom(o *evaluated) {
	if e != nil && o != nil {
		e.merge(o)
	}
}

func (vs *vstate) inEnum(n *schemaNode, v *jsonValue) bool {
	for i := range n.enum {
		if equal(v, &n.enum[i]) {
			return true
		}
	}
	return false
}

// anyOf keeps the errors of every branch tried when none passes, then adds
// its own, as ajv does.
func (vs *vstate) anyOf(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	m := vs.mark()
	passed := false
	var buf evaluated
	for _, s := range n.anyOf {
		sub := child(ev, &buf)
		if vs.validate(s, v, sub) {
			passed = true
			ev.mergeFrom(sub)
			if ev == nil {
				break
			}
		}
	}
	if passed {
		vs.resetTo(m)
		return true
	}
	vs.report("must match a schema in anyOf")
	return false
}

func (vs *vstate) oneOf(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	m := vs.mark()
	passing := 0
	var buf evaluated
	for _, s := range n.oneOf {
		sub := child(ev, &buf)
		if vs.validate(s, v, sub) {
			passing++
			ev.mergeFrom(sub)
			if passing > 1 { // ajv skips the branches after a second match
				break
			}
		}
	}
	if passing == 1 {
		vs.resetTo(m)
		return true
	}
	vs.report("must match exactly one schema in oneOf")
	return false
}

func (vs *vstate) ifThenElse(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	var buf evaluated
	sub := child(ev, &buf)
	vs.quiet++
	cond := vs.validate(n.ifNode, v, sub)
	vs.quiet--
	if cond {
		ev.mergeFrom(sub)
	}
	clause, name := n.thenNode, "then"
	if !cond {
		clause, name = n.elseNode, "else"
	}
	if clause == nil || clause.alwaysValid() {
		return true
	}
	sub = child(ev, &buf)
	if vs.validate(clause, v, sub) {
		ev.mergeFrom(sub)
		return true
	}
	vs.report(`must match "` + name + `" schema`)
	return false
}

func (vs *vstate) numberGroup(n *schemaNode, v *jsonValue) bool {
	if !n.hasNumber {
		return true
	}
	if v.kind != jsonNumber {
		return vs.deferredType(n, typeNumber)
	}
	ok := true
	for i := range n.num {
		c := &n.num[i]
		if !c.ok(v.num) {
			vs.report(c.msg)
			ok = false
		}
	}
	return ok
}

// deferredType reports the type error that ajv reports in the keyword group
// of the schema's single type.
func (vs *vstate) deferredType(n *schemaNode, group typeMask) bool {
	if n.deferType != group {
		return true
	}
	vs.report(n.typeMsg)
	return false
}

func (vs *vstate) stringGroup(n *schemaNode, v *jsonValue) bool {
	if !n.hasString {
		return true
	}
	if v.kind != jsonString {
		return vs.deferredType(n, typeString)
	}
	ok := true
	if n.maxLength >= 0 || n.minLength >= 0 {
		l := utf8.RuneCountInString(v.str) // code points, as ajv's ucs2length
		if n.maxLength >= 0 && l > n.maxLength {
			vs.report(n.maxLenMsg)
			ok = false
		}
		if n.minLength >= 0 && l < n.minLength {
			vs.report(n.minLenMsg)
			ok = false
		}
	}
	if n.pattern != nil && !vs.match(n.pattern, v.str) {
		vs.report(n.patternMsg)
		ok = false
	}
	return ok
}

func (vs *vstate) arrayGroup(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	if !n.hasArray {
		return true
	}
	if v.kind != jsonArray {
		return vs.deferredType(n, typeArray)
	}
	ok := true
	if n.maxItems >= 0 && len(v.elems) > n.maxItems {
		vs.report(n.maxItemsMsg)
		ok = false
	}
	if n.minItems >= 0 && len(v.elems) < n.minItems {
		vs.report(n.minItemsMsg)
		ok = false
	}
	ok = vs.arrayItems(n, v, ev) && ok
	if n.contains != nil && n.containsOn {
		ok = vs.containsKeyword(n, v, ev) && ok
	}
	if n.uniqueItems {
		ok = vs.unique(n, v) && ok
	}
	if n.unevalItemsPresent {
		ok = vs.unevaluatedItems(n, v, ev) && ok
	}
	return ok
}

func (vs *vstate) arrayItems(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	if !n.hasTuple {
		return vs.eachItem(n.items, v, 0, ev)
	}
	ok := true
	if n.extraFirst { // draft-07: additionalItems is a rule before items
		ok = vs.extraItems(n, v, ev)
	}
	for i, s := range n.tuple {
		if i < len(v.elems) && !s.alwaysValid() {
			ok = vs.at(s, &v.elems[i], "", i, nil) && ok
		}
	}
	if ev != nil {
		ev.items = max(ev.items, len(n.tuple))
	}
	if !n.extraFirst {
		ok = vs.extraItems(n, v, ev) && ok
	}
	return ok
}

// extraItems applies additionalItems (draft-07) or items after prefixItems.
func (vs *vstate) extraItems(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	if n.extraItems == nil {
		return true
	}
	if n.extraItemsFalse {
		if ev != nil {
			ev.allItems = true
		}
		if len(v.elems) > len(n.tuple) {
			vs.report(n.extraItemsMsg)
			return false
		}
		return true
	}
	return vs.eachItem(n.extraItems, v, len(n.tuple), ev)
}

// eachItem applies s to the elements from index from on.
func (vs *vstate) eachItem(s *schemaNode, v *jsonValue, from int, ev *evaluated) bool {
	if s == nil {
		return true
	}
	if ev != nil {
		ev.allItems = true
	}
	ok := true
	if !s.alwaysValid() {
		for i := from; i < len(v.elems); i++ {
			ok = vs.at(s, &v.elems[i], "", i, nil) && ok
		}
	}
	return ok
}

// containsKeyword follows ajv: with no maximum it stops at the minimum;
// failing items' errors stay when contains fails.
func (vs *vstate) containsKeyword(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	minC, maxC := n.containsMin, n.containsMax
	var valid bool
	switch {
	case maxC >= 0 && minC > maxC:
		valid = false
	case n.contains.alwaysValid():
		valid = len(v.elems) >= minC && (maxC < 0 || len(v.elems) <= maxC)
	default:
		if ev != nil {
			ev.allItems = true
		}
		m := vs.mark()
		valid = vs.countContains(n, v, minC, maxC)
		if valid {
			vs.resetTo(m)
		}
	}
	if !valid {
		vs.report(n.containsMsg)
	}
	return valid
}

func (vs *vstate) countContains(n *schemaNode, v *jsonValue, minC, maxC int) bool {
	valid := minC == 0
	count := 0
	for i := range v.elems {
		if !vs.at(n.contains, &v.elems[i], "", i, nil) {
			continue
		}
		count++
		if maxC < 0 {
			if count >= minC {
				return true
			}
			continue
		}
		if count > maxC {
			return false
		}
		if count >= minC {
			valid = true
		}
	}
	return valid
}

// unique reports the first duplicate pair ajv would find. ajv's hashing loop
// (when "items" has scalar types) names the pair as "## later and earlier";
// its pairwise loop as "## earlier and later".
func (vs *vstate) unique(n *schemaNode, v *jsonValue) bool {
	if len(v.elems) < 2 {
		return true
	}
	a, b, found := vs.findDuplicate(n, v.elems)
	if !found {
		return true
	}
	vs.report("must NOT have duplicate items (items ## " + strconv.Itoa(a) + " and " + strconv.Itoa(b) + " are identical)")
	return false
}

func (vs *vstate) findDuplicate(n *schemaNode, elems []jsonValue) (int, int, bool) {
	skip := func(i int) bool { return n.uniqueFast && !n.uniqueTypes.has(&elems[i]) }
	if len(elems) > 64 {
		return duplicateByKey(elems, skip, n.uniqueFast)
	}
	for i := len(elems) - 1; i > 0; i-- {
		if n.uniqueFast {
			if skip(i - 1) {
				continue
			}
			for j := i; j < len(elems); j++ { // the nearest equal item above i-1
				if !skip(j) && equal(&elems[i-1], &elems[j]) {
					return j, i - 1, true
				}
			}
			continue
		}
		for j := i - 1; j >= 0; j-- {
			if equal(&elems[i], &elems[j]) {
				return j, i, true
			}
		}
	}
	return 0, 0, false
}

// duplicateByKey is findDuplicate for long arrays, grouping equal items by a
// canonical key instead of comparing every pair.
func duplicateByKey(elems []jsonValue, skip func(int) bool, fast bool) (int, int, bool) {
	groups := map[string][]int{}
	var b strings.Builder
	for i := range elems {
		if skip(i) {
			continue
		}
		b.Reset()
		canonical(&b, &elems[i])
		groups[b.String()] = append(groups[b.String()], i)
	}
	best, a, c := -1, 0, 0
	for _, idx := range groups {
		k := len(idx)
		if k < 2 {
			continue
		}
		// pairwise loop: highest later index, paired with the one before it;
		// hashing loop: highest earlier index, paired with the one after it.
		key, x, y := idx[k-1], idx[k-2], idx[k-1]
		if fast {
			key, x, y = idx[k-2], idx[k-1], idx[k-2]
		}
		if key > best {
			best, a, c = key, x, y
		}
	}
	return a, c, best >= 0
}

func (vs *vstate) unevaluatedItems(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	if ev.allItems {
		return true
	}
	from := ev.items
	ev.allItems = true
	if len(v.elems) <= from {
		return true
	}
	if n.unevalItemsFalse {
		vs.report("must NOT have more than " + strconv.Itoa(from) + " items")
		return false
	}
	ok := true
	if !n.unevalItems.alwaysValid() {
		for i := from; i < len(v.elems); i++ {
			ok = vs.at(n.unevalItems, &v.elems[i], "", i, nil) && ok
		}
	}
	return ok
}

func (vs *vstate) objectGroup(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	if !n.hasObject {
		return true
	}
	if v.kind != jsonObject {
		return vs.deferredType(n, typeObject)
	}
	ok := true
	if n.maxProps >= 0 && len(v.members) > n.maxProps {
		vs.report(n.maxPropsMsg)
		ok = false
	}
	if n.minProps >= 0 && len(v.members) < n.minProps {
		vs.report(n.minPropsMsg)
		ok = false
	}
	for _, r := range n.required {
		if v.get(r) == nil {
			vs.report("must have required property '" + r + "'")
			ok = false
		}
	}
	if n.propertyNames != nil && !n.propertyNames.alwaysValid() {
		ok = vs.propertyNames(n, v) && ok
	}
	if n.addlPropsPresent {
		ok = vs.additionalProperties(n, v, ev) && ok
	}
	ok = vs.propDependencies(n.propDeps, v) && ok
	ok = vs.schemaDependencies(n.schemaDeps, v, ev) && ok
	ok = vs.properties(n, v, ev) && ok
	ok = vs.patternProperties(n, v, ev) && ok
	ok = vs.propDependencies(n.depRequired, v) && ok
	ok = vs.schemaDependencies(n.depSchemas, v, ev) && ok
	if n.unevalPropsPresent {
		ok = vs.unevaluatedProperties(n, v, ev) && ok
	}
	return ok
}

// propertyNames validates each key as a string at the object's path, then
// adds ajv's own message after the key's errors.
func (vs *vstate) propertyNames(n *schemaNode, v *jsonValue) bool {
	ok := true
	for i := range v.members {
		name := jsonValue{kind: jsonString, str: v.members[i].key}
		if !vs.validate(n.propertyNames, &name, nil) {
			vs.report("property name must be valid")
			ok = false
		}
	}
	return ok
}

func (vs *vstate) isAdditional(n *schemaNode, key string) bool {
	if _, ok := n.propertySet[key]; ok {
		return false
	}
	for _, pp := range n.patternProps {
		if vs.match(pp.re, key) {
			return false
		}
	}
	return true
}

// additionalProperties reports each extra key at the object's path.
func (vs *vstate) additionalProperties(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	if ev != nil {
		ev.allProps = true
	}
	if n.addlProps.alwaysValid() {
		return true
	}
	ok := true
	for i := range v.members {
		m := &v.members[i]
		if !vs.isAdditional(n, m.key) {
			continue
		}
		if n.addlPropsFalse {
			vs.report("must NOT have additional properties")
			ok = false
			continue
		}
		ok = vs.at(n.addlProps, &m.val, m.key, -1, nil) && ok
	}
	return ok
}

// propDependencies reports each missing dependency, each time with ajv's
// message naming all of them.
func (vs *vstate) propDependencies(deps []propDeps, v *jsonValue) bool {
	ok := true
	for _, d := range deps {
		if v.get(d.prop) == nil {
			continue
		}
		for _, dep := range d.deps {
			if v.get(dep) == nil {
				vs.report(d.msg)
				ok = false
			}
		}
	}
	return ok
}

func (vs *vstate) schemaDependencies(deps []namedNode, v *jsonValue, ev *evaluated) bool {
	ok := true
	var buf evaluated
	for _, d := range deps {
		if d.node.alwaysValid() || v.get(d.name) == nil {
			continue
		}
		sub := child(ev, &buf)
		if vs.validate(d.node, v, sub) {
			ev.mergeFrom(sub)
		} else {
			ok = false
		}
	}
	return ok
}

func (vs *vstate) properties(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	ok := true
	for _, p := range n.properties {
		i := memberIndex(v, p.name)
		if i < 0 {
			continue
		}
		ev.markProp(v, i)
		if !p.node.alwaysValid() {
			ok = vs.at(p.node, &v.members[i].val, p.name, -1, nil) && ok
		}
	}
	return ok
}

func memberIndex(v *jsonValue, key string) int {
	for i := range v.members {
		if v.members[i].key == key {
			return i
		}
	}
	return -1
}

func (vs *vstate) patternProperties(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	ok := true
	for _, pp := range n.patternProps {
		for i := range v.members {
			m := &v.members[i]
			if !vs.match(pp.re, m.key) {
				continue
			}
			ev.markProp(v, i)
			if !pp.node.alwaysValid() {
				ok = vs.at(pp.node, &m.val, m.key, -1, nil) && ok
			}
		}
	}
	return ok
}

func (vs *vstate) unevaluatedProperties(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	ok := true
	for i := range v.members {
		if ev.prop(i) {
			continue
		}
		m := &v.members[i]
		if n.unevalPropsFalse {
			vs.report("must NOT have unevaluated properties")
			ok = false
		} else if !n.unevalProps.alwaysValid() {
			ok = vs.at(n.unevalProps, &m.val, m.key, -1, nil) && ok
		}
	}
	ev.allProps = true
	return ok
}
