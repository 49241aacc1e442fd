package policy

import (
	"strings"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
)

// A guard is one conjunct of a condition's top-level && chain that can be
// read without cel-go: a field of the call compared with string or bool
// constants (`args.kind == "refund"`, `caller.role != "owner"`,
// `tool.name in ["a", "b"]`, `result.text.contains("secret")`). When a
// guard is certainly false for a call, so is the condition — CEL's && is
// false when either side is false, even if the other is an error — and
// the rule is passed over without an evaluation. When a guard cannot be
// read surely (the field is absent, or of another type), cel-go decides,
// errors and all. Most rules do not match most calls, and most of them say
// which tool, argument or caller they are about in such a conjunct: with
// guards, a policy of many rules costs a call a few map lookups per rule
// rather than an evaluation each (benchmarks.md, "Policy").
type guard struct {
	root   string   // caller, tool, args or result
	path   []string // the fields below root
	op     string   // operators.Equals, NotEquals, In, or a string function
	consts []any    // string or bool constants: one, or In's list
}

// guardsOf returns the guards of a checked condition.
func guardsOf(e celast.Expr) []guard {
	if e.Kind() != celast.CallKind {
		return nil
	}
	call := e.AsCall()
	fn, args := call.FunctionName(), call.Args()
	switch {
	case fn == operators.LogicalAnd:
		var gs []guard
		for _, a := range args {
			gs = append(gs, guardsOf(a)...)
		}
		return gs
	case (fn == operators.Equals || fn == operators.NotEquals) && len(args) == 2:
		for _, side := range [][2]celast.Expr{{args[0], args[1]}, {args[1], args[0]}} {
			root, path, ok := fieldOf(side[0])
			c, isConst := constOf(side[1])
			if ok && isConst {
				return []guard{{root: root, path: path, op: fn, consts: []any{c}}}
			}
		}
	case fn == operators.In && len(args) == 2 && args[1].Kind() == celast.ListKind:
		root, path, ok := fieldOf(args[0])
		list := args[1].AsList()
		if !ok || len(list.OptionalIndices()) > 0 {
			return nil
		}
		var consts []any
		for _, el := range list.Elements() {
			c, isConst := constOf(el)
			if !isConst {
				return nil
			}
			consts = append(consts, c)
		}
		return []guard{{root: root, path: path, op: fn, consts: consts}}
	case (fn == overloads.Contains || fn == overloads.StartsWith || fn == overloads.EndsWith) &&
		call.IsMemberFunction() && len(args) == 1:
		root, path, ok := fieldOf(call.Target())
		c, isConst := constOf(args[0])
		if s, isString := c.(string); ok && isConst && isString {
			return []guard{{root: root, path: path, op: fn, consts: []any{s}}}
		}
	}
	return nil
}

// fieldOf reads a chain of field selections from one of the variables a
// rule reads (not `has()`, not `now`).
func fieldOf(e celast.Expr) (root string, path []string, ok bool) {
	for e.Kind() == celast.SelectKind {
		s := e.AsSelect()
		if s.IsTestOnly() {
			return "", nil, false
		}
		path = append([]string{s.FieldName()}, path...)
		e = s.Operand()
	}
	if e.Kind() != celast.IdentKind {
		return "", nil, false
	}
	switch root = e.AsIdent(); root {
	case "caller", "tool", "args", "result":
		return root, path, true
	}
	return "", nil, false
}

// constOf reads a string or bool literal.
func constOf(e celast.Expr) (any, bool) {
	if e.Kind() != celast.LiteralKind {
		return nil, false
	}
	switch v := e.AsLiteral().(type) {
	case types.String:
		return string(v), true
	case types.Bool:
		return bool(v), true
	}
	return nil, false
}

// refutes reports whether g is certainly false for the call vars reads:
// its field is there, of its constants' type, and the comparison fails.
func (g *guard) refutes(vars *activation) bool {
	v, ok := vars.field(g.root, g.path)
	if !ok {
		return false
	}
	switch g.op {
	case operators.Equals, operators.In:
		for _, c := range g.consts {
			eq, sure := sameAs(v, c)
			if !sure || eq {
				return false
			}
		}
		return true
	case operators.NotEquals:
		eq, sure := sameAs(v, g.consts[0])
		return sure && eq
	}
	s, isString := v.(string)
	if !isString {
		return false
	}
	c := g.consts[0].(string)
	switch g.op {
	case overloads.Contains:
		return !strings.Contains(s, c)
	case overloads.StartsWith:
		return !strings.HasPrefix(s, c)
	case overloads.EndsWith:
		return !strings.HasSuffix(s, c)
	}
	return false
}

// sameAs compares a call's value with a constant of the same kind; sure is
// false for values of another kind, which cel-go compares itself.
func sameAs(v, c any) (eq, sure bool) {
	switch c := c.(type) {
	case string:
		s, ok := v.(string)
		return ok && s == c, ok
	case bool:
		b, ok := v.(bool)
		return ok && b == c, ok
	}
	return false, false
}
