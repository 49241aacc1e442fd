package schema

// Evaluating a compiled node against a value: the keyword groups in ajv's
// order, the keywords for any instance (untyped), and the number and string
// keywords. Array and object keywords are in eval_array.go and
// eval_object.go.

import (
	"unicode/utf8"
)

// stepsMsg is the one message of a call that ran out of steps.
const stepsMsg = "data could not be checked against the tool's input schema: it takes too many steps " +
	"(the schema branches into itself, or nests anyOf/oneOf over shared definitions); " +
	"the arguments are refused: ask the tool's author to simplify its input schema"

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
	if vs.refused != "" {
		return false // the call is refused already
	}
	if vs.steps++; vs.steps > vs.maxSteps {
		vs.refused = stepsMsg
		return false
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
	if n.pattern != nil {
		switch vs.match(n.pattern, v.str, false) {
		case noMatch:
			vs.report(n.patternMsg)
			ok = false
		case undecided:
			ok = false
		}
	}
	return ok
}
