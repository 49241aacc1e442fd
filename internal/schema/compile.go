package schema

// The compiler turns a parsed schema into schemaNodes: resolve.go first
// indexes every $id and $anchor, then each schema object is compiled one
// keyword group at a time (compile_keywords.go, compile_array.go,
// compile_object.go) with the helpers here.

import (
	"fmt"
	"math"
	"strings"
)

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

// newCompiler returns a compiler for doc: 2020-12 (or 2019-09) semantics
// when its "$schema" names that draft, draft-07 when it names another, and
// default2020 decides when it names none.
func newCompiler(doc jsonValue, default2020 bool) *compiler {
	c := &compiler{
		draft2020: default2020,
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
