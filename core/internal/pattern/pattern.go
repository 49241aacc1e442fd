// Package pattern translates the JavaScript regular expressions of JSON
// Schema ("pattern", patternProperties keys) into Go's RE2 syntax where the
// meaning is certain. The gateway's validator (internal/schema) matches what
// does not translate with a backtracking engine; the struct-tag schema
// generator (core/internal/schemagen, used by the core SDK) only needs this
// translation, so it lives apart from the validator and its regexp2
// dependency.
//
// The source is in the SDK module, core/internal/pattern; the
// gateway's module has a generated copy at internal/pattern: edit the source
// and run `go generate ./internal/sdkcopy` at the repository's root.
package pattern

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// JavaScript's \s, as the inside of a character class in RE2 syntax.
const jsSpace = `\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}`

// ToRE2 rewrites a JavaScript pattern into RE2 syntax with the same
// meaning, or reports false when it cannot be sure it would.
func ToRE2(src string) (string, bool) {
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
