package schema

// "pattern" and patternProperties keys: JavaScript regular expressions,
// translated to RE2 where the meaning is certain (package internal/pattern, the gateway's copy of core/internal/pattern) and otherwise matched by
// regexp2 under a time budget.

import (
	"regexp"
	"strconv"
	"time"

	"github.com/dlclark/regexp2"

	jspattern "github.com/spacefix/spacefix/internal/pattern"
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
	if tr, ok := jspattern.ToRE2(src); ok {
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
