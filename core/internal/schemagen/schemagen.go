// Package schemagen derives a tool's JSON Schema from a Go type and its
// struct tags, for the core SDK:
//
//	raw, err := schemagen.For(reflect.TypeFor[In](), schemagen.ForOptions{Strict: true})
//
// It is apart from the gateway's validator (internal/schema) so that the SDK
// does not import the validator or its backtracking regexp engine; see
// TestSchemaSplitCoreDeps.
package schemagen

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spacefix/spacefix/core/internal/pattern"
)

// ForOptions tunes [For].
type ForOptions struct {
	// Strict adds "additionalProperties": false to every object that comes
	// from a struct, so arguments the struct does not declare are refused.
	// Zero leaves undeclared properties allowed (JSON Schema's default).
	Strict bool
	// Output describes values as encoding/json writes them rather than as
	// it reads them: a pointer, slice or map, which may be nil, also allows
	// null. Use it for a tool's outputSchema, which clients check
	// structuredContent against. Zero describes input (no null).
	Output bool
}

// ErrNotStruct is returned by [For] when the top-level type is not a struct
// or a pointer to one: a tool's arguments and structured results are JSON
// objects.
var ErrNotStruct = errors.New("schema: the type must be a struct (or a pointer to one)")

// For derives a JSON Schema (draft 2020-12, without "$schema") from the Go
// type t, which must be a struct or a pointer to one. The result describes
// what encoding/json reads into t (or, with [ForOptions.Output], what it
// writes): the same property names, with embedded structs flattened.
//
// A field without "omitempty" or "omitzero" in its json tag is required.
// These struct tags refine a field's schema:
//
//	desc       description
//	enum       allowed values, comma-separated, typed by the field: enum:"a,b,c", enum:"1,2,3"
//	default    advertised default, typed by the field; JSON for arrays, maps and structs
//	min, max   minimum and maximum of a number
//	minLength, maxLength, pattern, format   of a string
//	minItems, maxItems                      of a slice or an array
//
// On a slice or array field, enum, min, max, minLength, maxLength, pattern
// and format apply to its items. A tag on a field of the wrong kind, or a
// value that does not parse, is an error naming the field and the tag.
//
// Other mappings: time.Time is a string of format date-time; []byte is a
// base64 string; json.RawMessage, interfaces and types with their own
// MarshalJSON/UnmarshalJSON have no type constraint; other
// encoding.TextMarshaler types are strings; a map becomes an object whose
// additionalProperties is the value's schema (its key must be a string
// kind). Channels, functions and complex numbers are errors.
//
// A recursive type is described once under "$defs" and referenced with
// "$ref"; the top-level type refers to itself as "#". The output is
// deterministic: properties follow the struct's field order.
func For(t reflect.Type, opts ForOptions) (json.RawMessage, error) {
	if t == nil {
		return nil, fmt.Errorf("%w, not nil", ErrNotStruct)
	}
	root := t
	for root.Kind() == reflect.Pointer {
		root = root.Elem()
	}
	if root.Kind() != reflect.Struct || reflOpaque(root) != nil {
		return nil, fmt.Errorf("%w, not %s", ErrNotStruct, t)
	}
	r := &reflector{
		opts:     opts,
		root:     root,
		building: map[reflect.Type]bool{},
		defNames: map[reflect.Type]string{},
		usedName: map[string]bool{},
	}
	n, err := r.structSchema(root, root.Name())
	if err != nil {
		return nil, err
	}
	if r.defs != nil {
		n.Defs = r.defs
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("schema: encode schema of %s: %w", t, err)
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// reflNode is one schema. Field order is the order of keys in the output.
type reflNode struct {
	Ref                  string          `json:"$ref,omitempty"`
	AnyOf                []*reflNode     `json:"anyOf,omitempty"`
	Type                 any             `json:"type,omitempty"` // string, or []string with "null"
	Format               string          `json:"format,omitempty"`
	ContentEncoding      string          `json:"contentEncoding,omitempty"`
	Description          string          `json:"description,omitempty"`
	Enum                 []any           `json:"enum,omitempty"`
	Minimum              json.Number     `json:"minimum,omitempty"`
	Maximum              json.Number     `json:"maximum,omitempty"`
	MinLength            *int            `json:"minLength,omitempty"`
	MaxLength            *int            `json:"maxLength,omitempty"`
	Pattern              string          `json:"pattern,omitempty"`
	MinItems             *int            `json:"minItems,omitempty"`
	MaxItems             *int            `json:"maxItems,omitempty"`
	Items                *reflNode       `json:"items,omitempty"`
	Properties           *reflProps      `json:"properties,omitempty"`
	Required             []string        `json:"required,omitempty"`
	AdditionalProperties any             `json:"additionalProperties,omitempty"` // *reflNode or false
	Default              json.RawMessage `json:"default,omitempty"`
	Defs                 *reflProps      `json:"$defs,omitempty"`
}

// reflProps is a JSON object whose keys keep their insertion order.
type reflProps struct {
	names []string
	nodes []*reflNode
}

func (p *reflProps) add(name string, n *reflNode) {
	p.names = append(p.names, name)
	p.nodes = append(p.nodes, n)
}

func (p *reflProps) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, name := range p.names {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := json.Marshal(name)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(p.nodes[i]); err != nil {
			return nil, err
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// reflector builds one schema; it remembers the structs under construction
// so that a recursive type becomes a $ref instead of an endless descent.
type reflector struct {
	opts     ForOptions
	root     reflect.Type
	building map[reflect.Type]bool   // structs on the current path
	defNames map[reflect.Type]string // structs that live in $defs
	usedName map[string]bool
	defs     *reflProps
	pending  map[reflect.Type]bool // recursive structs met while building them
}

var (
	reflTimeType          = reflect.TypeFor[time.Time]()
	reflRawMessageType    = reflect.TypeFor[json.RawMessage]()
	reflMarshalerType     = reflect.TypeFor[json.Marshaler]()
	reflUnmarshalerType   = reflect.TypeFor[json.Unmarshaler]()
	reflTextMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	reflTextUnmarshType   = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// reflOpaque returns the schema of a type whose JSON form encoding/json does
// not derive from its structure, or nil for an ordinary type.
func reflOpaque(t reflect.Type) *reflNode {
	switch {
	case t == reflTimeType:
		return &reflNode{Type: "string", Format: "date-time"}
	case t == reflRawMessageType:
		return &reflNode{}
	case reflImplements(t, reflMarshalerType, reflUnmarshalerType):
		return &reflNode{} // its own JSON: we cannot know its shape
	case reflImplements(t, reflTextMarshalerType, reflTextUnmarshType):
		return &reflNode{Type: "string"}
	}
	return nil
}

func reflImplements(t reflect.Type, ifaces ...reflect.Type) bool {
	if t.Kind() == reflect.Interface {
		return false
	}
	pt := reflect.PointerTo(t)
	for _, i := range ifaces {
		if t.Implements(i) || pt.Implements(i) {
			return true
		}
	}
	return false
}

// typeSchema returns the schema of t itself (a pointer describes its
// element; whether nil is allowed is the caller's business).
func (r *reflector) typeSchema(t reflect.Type, path string) (*reflNode, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n := reflOpaque(t); n != nil {
		return n, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return &reflNode{Type: "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &reflNode{Type: "integer"}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return &reflNode{Type: "integer", Minimum: "0"}, nil
	case reflect.Float32, reflect.Float64:
		return &reflNode{Type: "number"}, nil
	case reflect.String:
		return &reflNode{Type: "string"}, nil
	case reflect.Interface:
		return &reflNode{}, nil
	case reflect.Slice:
		if reflIsBytes(t) {
			return &reflNode{Type: "string", ContentEncoding: "base64"}, nil
		}
		items, err := r.valueSchema(t.Elem(), path+"[]")
		if err != nil {
			return nil, err
		}
		return &reflNode{Type: "array", Items: items}, nil
	case reflect.Array:
		items, err := r.valueSchema(t.Elem(), path+"[]")
		if err != nil {
			return nil, err
		}
		return &reflNode{Type: "array", Items: items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("schema: field %s: map key type %s is not a string; JSON object keys are strings", path, t.Key())
		}
		vals, err := r.valueSchema(t.Elem(), path+"[]")
		if err != nil {
			return nil, err
		}
		return &reflNode{Type: "object", AdditionalProperties: vals}, nil
	case reflect.Struct:
		return r.structSchema(t, path)
	}
	return nil, fmt.Errorf("schema: field %s: type %s has no JSON form", path, t)
}

// valueSchema is typeSchema for an element of a slice, array or map, which
// may be null in output when it can be nil.
func (r *reflector) valueSchema(t reflect.Type, path string) (*reflNode, error) {
	n, err := r.typeSchema(t, path)
	if err != nil {
		return nil, err
	}
	if r.opts.Output && reflNilable(t) {
		n = reflNullable(n)
	}
	return n, nil
}

// reflIsBytes reports whether encoding/json writes t as a base64 string.
func reflIsBytes(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 &&
		!reflImplements(t.Elem(), reflMarshalerType, reflTextMarshalerType)
}

func reflNilable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map:
		return true
	}
	return false
}

// reflNullable returns n widened to allow null.
func reflNullable(n *reflNode) *reflNode {
	switch typ := n.Type.(type) {
	case string:
		n.Type = []string{typ, "null"}
		if n.Enum != nil {
			n.Enum = append(n.Enum, nil)
		}
		return n
	case nil:
		if n.Ref == "" {
			return n // no type constraint: null is already allowed
		}
		ref := &reflNode{AnyOf: []*reflNode{{Ref: n.Ref}, {Type: "null"}}, Description: n.Description}
		return ref
	}
	return n // already widened
}

// structSchema describes a struct as an object, or refers to it when it is
// being built further up the path (recursion).
func (r *reflector) structSchema(t reflect.Type, path string) (*reflNode, error) {
	if name, ok := r.defNames[t]; ok {
		return &reflNode{Ref: "#/$defs/" + name}, nil
	}
	if r.building[t] {
		if t == r.root {
			return &reflNode{Ref: "#"}, nil
		}
		name := r.defName(t)
		if r.pending == nil {
			r.pending = map[reflect.Type]bool{}
		}
		r.pending[t] = true
		return &reflNode{Ref: "#/$defs/" + name}, nil
	}
	r.building[t] = true
	defer delete(r.building, t)

	n := &reflNode{Type: "object", Properties: &reflProps{}}
	for _, f := range reflFields(t) {
		prefix, fpath := t.Name(), f.goName
		if prefix == "" {
			prefix = path // an anonymous struct: name it by where it sits
		}
		if prefix != "" {
			fpath = prefix + "." + f.goName
		}
		fn, err := r.fieldSchema(f, fpath)
		if err != nil {
			return nil, err
		}
		n.Properties.add(f.name, fn)
		if !f.omit {
			n.Required = append(n.Required, f.name)
		}
	}
	if r.opts.Strict {
		n.AdditionalProperties = false
	}
	if r.pending[t] {
		delete(r.pending, t)
		if r.defs == nil {
			r.defs = &reflProps{}
		}
		r.defs.add(r.defNames[t], n)
		return &reflNode{Ref: "#/$defs/" + r.defNames[t]}, nil
	}
	return n, nil
}

var reflDefNameBad = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// defName gives t a unique name under $defs.
func (r *reflector) defName(t reflect.Type) string {
	if name, ok := r.defNames[t]; ok {
		return name
	}
	base := reflDefNameBad.ReplaceAllString(t.Name(), "_")
	if base == "" {
		base = "def"
	}
	name := base
	for i := 2; r.usedName[name]; i++ {
		name = base + strconv.Itoa(i)
	}
	r.usedName[name] = true
	r.defNames[t] = name
	return name
}

// fieldSchema is the schema of one struct field with its tags applied.
func (r *reflector) fieldSchema(f reflField, path string) (*reflNode, error) {
	n, err := r.typeSchema(f.typ, path)
	if err != nil {
		return nil, err
	}
	base := f.typ
	for base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	if f.asString && n.Type != nil {
		switch base.Kind() {
		case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
			reflect.Float32, reflect.Float64:
			n = &reflNode{Type: "string"} // ",string": the value travels quoted
		}
	}
	if n.Ref != "" || n.Type == "object" && n.Properties != nil {
		// A struct: only desc and default apply.
		for _, tag := range reflValueTags {
			if _, ok := f.tag.Lookup(tag); ok {
				return nil, fmt.Errorf("schema: field %s: tag %s does not apply to a struct", path, tag)
			}
		}
	}
	if err := reflApplyTags(n, f.tag, path); err != nil {
		return nil, err
	}
	if r.opts.Output && reflNilable(f.typ) {
		n = reflNullable(n)
	}
	return n, nil
}

// reflValueTags are the tags that constrain a value (on an array: its items).
var reflValueTags = []string{"enum", "min", "max", "minLength", "maxLength", "pattern", "format", "minItems", "maxItems"}

// reflApplyTags applies a field's schema tags to n.
func reflApplyTags(n *reflNode, tag reflect.StructTag, path string) error {
	if d, ok := tag.Lookup("desc"); ok {
		n.Description = d
	}
	if def, ok := tag.Lookup("default"); ok {
		v, err := reflDefault(n, def)
		if err != nil {
			return fmt.Errorf("schema: field %s: tag default=%q: %v", path, def, err)
		}
		n.Default = v
	}
	for _, name := range []string{"minItems", "maxItems"} {
		s, ok := tag.Lookup(name)
		if !ok {
			continue
		}
		if n.Type != "array" {
			return fmt.Errorf("schema: field %s: tag %s applies to slices and arrays, not %s", path, name, reflTypeName(n))
		}
		v, err := reflCount(s)
		if err != nil {
			return fmt.Errorf("schema: field %s: tag %s=%q: %v", path, name, s, err)
		}
		if name == "minItems" {
			n.MinItems = &v
		} else {
			n.MaxItems = &v
		}
	}
	if n.MinItems != nil && n.MaxItems != nil && *n.MinItems > *n.MaxItems {
		return fmt.Errorf("schema: field %s: tag minItems=%d is above maxItems=%d", path, *n.MinItems, *n.MaxItems)
	}
	target := n
	if n.Type == "array" && n.Items != nil {
		target = n.Items // enum, bounds and formats describe the items
	}
	return reflApplyValueTags(target, tag, path)
}

func reflApplyValueTags(n *reflNode, tag reflect.StructTag, path string) error {
	if s, ok := tag.Lookup("enum"); ok {
		if n.Type != "string" && n.Type != "integer" && n.Type != "number" && n.Type != "boolean" {
			return fmt.Errorf("schema: field %s: tag enum applies to strings, numbers and booleans, not %s", path, reflTypeName(n))
		}
		for _, item := range strings.Split(s, ",") {
			v, err := reflScalar(n, item)
			if err != nil {
				return fmt.Errorf("schema: field %s: tag enum=%q: %q: %v", path, s, item, err)
			}
			n.Enum = append(n.Enum, v)
		}
	}
	for _, name := range []string{"min", "max"} {
		s, ok := tag.Lookup(name)
		if !ok {
			continue
		}
		if n.Type != "integer" && n.Type != "number" {
			return fmt.Errorf("schema: field %s: tag %s applies to numbers, not %s", path, name, reflTypeName(n))
		}
		v, err := reflNumber(n, s)
		if err != nil {
			return fmt.Errorf("schema: field %s: tag %s=%q: %v", path, name, s, err)
		}
		if name == "min" {
			n.Minimum = v
		} else {
			n.Maximum = v
		}
	}
	if n.Minimum != "" && n.Maximum != "" {
		lo, _ := n.Minimum.Float64()
		hi, _ := n.Maximum.Float64()
		if lo > hi {
			return fmt.Errorf("schema: field %s: tag min=%s is above max=%s", path, n.Minimum, n.Maximum)
		}
	}
	for _, name := range []string{"minLength", "maxLength", "pattern", "format"} {
		s, ok := tag.Lookup(name)
		if !ok {
			continue
		}
		if n.Type != "string" {
			return fmt.Errorf("schema: field %s: tag %s applies to strings, not %s", path, name, reflTypeName(n))
		}
		switch name {
		case "pattern":
			if err := checkPattern(s); err != nil {
				return fmt.Errorf("schema: field %s: tag pattern=%q: %v", path, s, err)
			}
			n.Pattern = s
		case "format":
			n.Format = s
		default:
			v, err := reflCount(s)
			if err != nil {
				return fmt.Errorf("schema: field %s: tag %s=%q: %v", path, name, s, err)
			}
			if name == "minLength" {
				n.MinLength = &v
			} else {
				n.MaxLength = &v
			}
		}
	}
	if n.MinLength != nil && n.MaxLength != nil && *n.MinLength > *n.MaxLength {
		return fmt.Errorf("schema: field %s: tag minLength=%d is above maxLength=%d", path, *n.MinLength, *n.MaxLength)
	}
	return nil
}

func reflTypeName(n *reflNode) string {
	switch t := n.Type.(type) {
	case string:
		return "type " + t
	case nil:
		return "a value of any type"
	}
	return fmt.Sprint(n.Type)
}

// reflCount parses a non-negative count (minLength, maxItems, …).
func reflCount(s string) (int, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 0 {
		return 0, errors.New("not a whole number of 0 or more")
	}
	return v, nil
}

// reflNumber parses a number tag for n: an integer for integer fields.
func reflNumber(n *reflNode, s string) (json.Number, error) {
	s = strings.TrimSpace(s)
	if n.Type == "integer" {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			return json.Number(strconv.FormatInt(v, 10)), nil
		}
		if v, err := strconv.ParseUint(s, 10, 64); err == nil {
			return json.Number(strconv.FormatUint(v, 10)), nil
		}
		return "", errors.New("not an integer")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return "", errors.New("not a number")
	}
	return json.Number(strconv.FormatFloat(v, 'g', -1, 64)), nil
}

// reflScalar parses one enum or default value typed by n's JSON type.
func reflScalar(n *reflNode, s string) (any, error) {
	switch n.Type {
	case "string":
		return s, nil
	case "boolean":
		v, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, errors.New("not true or false")
		}
		return v, nil
	case "integer", "number":
		v, err := reflNumber(n, s)
		if err != nil {
			return nil, err
		}
		if n.Minimum == "0" && strings.HasPrefix(string(v), "-") && n.Type == "integer" {
			return nil, errors.New("not 0 or more")
		}
		return v, nil
	}
	return nil, fmt.Errorf("%s has no scalar values", reflTypeName(n))
}

// reflDefault parses a default tag: a scalar typed by the field, or JSON.
func reflDefault(n *reflNode, s string) (json.RawMessage, error) {
	var v any
	switch n.Type {
	case "string", "boolean", "integer", "number":
		var err error
		if v, err = reflScalar(n, s); err != nil {
			return nil, err
		}
	default:
		if !json.Valid([]byte(s)) {
			return nil, fmt.Errorf("not JSON, which a default of %s must be", reflTypeName(n))
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(s)); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// reflField is one JSON property of a struct, after embedding.
type reflField struct {
	name     string // JSON name
	goName   string
	tagged   bool // name came from the json tag
	index    []int
	typ      reflect.Type
	tag      reflect.StructTag
	omit     bool // omitempty or omitzero: not required
	asString bool // the ",string" option
}

// reflFields lists the JSON properties of struct t in field order, resolving
// embedded structs as encoding/json does: the shallowest field wins, a
// tagged one beats an untagged one at the same depth, and a tie drops the
// name.
func reflFields(t reflect.Type) []reflField {
	type level struct {
		typ   reflect.Type
		index []int
	}
	var fields []reflField
	current, next := []level{}, []level{{typ: t}}
	var count map[reflect.Type]int
	nextCount := map[reflect.Type]int{t: 1}
	visited := map[reflect.Type]bool{}
	for len(next) > 0 {
		current, next = next, current[:0]
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, l := range current {
			if visited[l.typ] {
				continue
			}
			visited[l.typ] = true
			for i := 0; i < l.typ.NumField(); i++ {
				sf := l.typ.Field(i)
				if sf.Anonymous {
					ft := sf.Type
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !reflValidTagName(name) {
					name = ""
				}
				index := append(slices.Clone(l.index), i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					f := reflField{
						name:   name,
						goName: sf.Name,
						tagged: name != "",
						index:  index,
						typ:    sf.Type,
						tag:    sf.Tag,
					}
					if f.name == "" {
						f.name = sf.Name
					}
					for _, o := range strings.Split(opts, ",") {
						switch o {
						case "omitempty", "omitzero":
							f.omit = true
						case "string":
							f.asString = true
						}
					}
					fields = append(fields, f)
					if count[l.typ] > 1 {
						// The struct is embedded twice at this depth: a
						// duplicate makes the tie below drop the name.
						fields = append(fields, f)
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, level{typ: ft, index: index})
				}
			}
		}
	}

	slices.SortStableFunc(fields, func(a, b reflField) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := len(a.index) - len(b.index); c != 0 {
			return c
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return 1
		}
		return slices.Compare(a.index, b.index)
	})
	out := fields[:0]
	for i := 0; i < len(fields); {
		j := i + 1
		for j < len(fields) && fields[j].name == fields[i].name {
			j++
		}
		group := fields[i:j]
		if len(group) == 1 || len(group[0].index) != len(group[1].index) || group[0].tagged != group[1].tagged {
			out = append(out, group[0])
		}
		i = j
	}
	slices.SortFunc(out, func(a, b reflField) int { return slices.Compare(a.index, b.index) })
	return out
}

// reflValidTagName mirrors encoding/json's rule for a usable json tag name.
func reflValidTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c > 127):
			return false
		}
	}
	return true
}

// checkPattern refuses a pattern tag the gateway could not read as the
// JavaScript regular expression JSON Schema says it is, or that would need
// the gateway's time-limited backtracking matcher (lookaround,
// backreferences): a tag is written once, so it may as well be linear.
func checkPattern(s string) error {
	tr, ok := pattern.ToRE2(s)
	if !ok {
		return errors.New("use JavaScript regular expression syntax without lookaround, backreferences or \\c escapes")
	}
	_, err := regexp.Compile(tr)
	return err
}
