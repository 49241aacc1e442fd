package schema

// Compiling the keywords that apply to any instance (type, $ref, const,
// enum, not, anyOf, oneOf, allOf, if/then/else) and the number and string
// keywords.

import (
	"strconv"
	"strings"
)

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
