package schema

// The compiled form of a schema: one schemaNode per (sub)schema, with limits
// and ajv's messages prepared at compile time so that validating only
// compares.

import (
	"math"
)

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

// alwaysValid is ajv's alwaysValidSchema: true, or an object with no rules.
func (n *schemaNode) alwaysValid() bool {
	if n.isBool {
		return n.boolValue
	}
	return n.trivial
}
