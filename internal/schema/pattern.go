package schema

// "pattern" and patternProperties keys: JavaScript regular expressions,
// translated to RE2 where the meaning is certain and otherwise matched by
// regexp2 under a time budget.

import (
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// pattern is a compiled "pattern" or patternProperties key. ajv compiles
// them as JavaScript regular expressions with the "u" flag. Most translate to
// Go's linear-time RE2 syntax exactly; the rest (lookaround, backreferences)
// run on regexp2 in ECMAScript mode, with a time limit per match.
type pattern struct {
	src string // as the schema wrote it, for messages
	re  *regexp.Regexp
	re2 *regexp2.Regexp
}

// patternTimeout bounds one backtracking match, and patternBudget all of
// them in one Validate call. A match that runs out of time is undecided, and
// an undecided match refuses the arguments wherever it happens (see
// [vstate.match]).
const (
	patternTimeout = 100 * time.Millisecond
	patternBudget  = 250 * time.Millisecond
)

func compilePattern(src string) (*pattern, error) {
	if tr, ok := translateRE2(src); ok {
		if re, err := regexp.Compile(tr); err == nil {
			return &pattern{src: src, re: re}, nil
		}
	}
	re, err := regexp2.Compile(src, regexp2.ECMAScript|regexp2.Unicode)
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = patternTimeout
	return &pattern{src: src, re2: re}, nil
}

// matchResult is what matching one string against one pattern decided.
type matchResult uint8

const (
	noMatch matchResult = iota
	matched
	undecided // a backtracking match ran out of time
)

// match reports whether s matches p anywhere, as RegExp.test does, or that
// it could not tell in time. It is the only place the validator runs a
// pattern ("pattern", patternProperties, and through them propertyNames,
// not, if, contains, anyOf, dependentSchemas...). An undecided match is
// remembered in vs and fails the whole Validate call with one message
// naming the pattern, whatever the keyword that asked: were it read as "no
// match", a slow pattern under "not" or in patternProperties would let
// through exactly the arguments the schema forbids. key is true when s is a
// property name (patternProperties, additionalProperties) rather than the
// string at the current path.
func (vs *vstate) match(p *pattern, s string, key bool) matchResult {
	if p.re != nil {
		if p.re.MatchString(s) {
			return matched
		}
		return noMatch
	}
	if vs.refused != "" {
		return undecided // the call is refused already; spend no more time
	}
	if vs.regexpSpent >= patternBudget {
		vs.undecide(p, s, key)
		return undecided
	}
	start := time.Now()
	ok, err := p.re2.MatchString(s)
	vs.regexpSpent += time.Since(start)
	switch {
	case err != nil: // regexp2's only match error is its timeout
		vs.undecide(p, s, key)
		return undecided
	case ok:
		return matched
	}
	return noMatch
}

// undecide records the first undecided match as the call's only message.
func (vs *vstate) undecide(p *pattern, s string, key bool) {
	what := "this value"
	if key {
		what = "property name " + strconv.Quote(abbreviate(s, 40))
	}
	vs.refused = vs.where() + " could not be checked against pattern " + strconv.Quote(p.src) +
		" in time for " + what + "; the arguments are refused: send a shorter or simpler value"
}

// abbreviate cuts s to at most n runes, marking the cut with "…".
func abbreviate(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i] + "…"
		}
		n--
	}
	return s
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
