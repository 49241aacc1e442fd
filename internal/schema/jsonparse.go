package schema

// The strict JSON parser used for schemas and for call arguments. Objects
// come out as JSON.parse makes them (last value of a repeated key, array-index
// keys first), and a pooled arena makes parsing a small object
// allocation-free.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

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
