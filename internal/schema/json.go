package schema

// JSON values as the validator sees them, with JavaScript's numbers,
// equality and number formatting, so that limits, const, enum and messages
// behave as they do for ajv.

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

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
