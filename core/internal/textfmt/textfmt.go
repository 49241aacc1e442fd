// Package textfmt spells numbers and shortens strings the one way every
// message, log record and table of Spacefix does.
//
// The source is in the SDK module, core/internal/textfmt; the
// gateway's module has a generated copy at internal/textfmt: edit the source
// and run `go generate ./internal/sdkcopy` at the repository's root.
package textfmt

import "strconv"

// Cut keeps the first n characters (runes, not bytes) of s.
func Cut(s string, n int) string {
	if n <= 0 {
		return ""
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// Thousands writes n with comma separators: 1048576 → "1,048,576".
func Thousands(n int64) string {
	if n < 0 {
		return "-" + Thousands(-n)
	}
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
