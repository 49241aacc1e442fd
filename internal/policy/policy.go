// Package policy is a project's rules for who may do what, with which
// arguments (docs/policy.md): an ordered list of rules, each a CEL
// expression over the caller, the tool, the validated arguments and (for
// results) the result, compiled once per policy version with cel-go and
// evaluated under a cost limit on every call.
//
// Rules are read in order; the first whose tools match and whose
// condition holds decides, and no match leaves the call as it would be
// without a policy. A rule in audit mode decides nothing: what it would
// have done is recorded beside the decision. A rule that cannot be
// evaluated (a missing argument, a type error, the cost limit) fails
// closed: the call is refused, never let through.
//
// The package knows nothing of MCP or HTTP: the call pipeline asks it for
// a [Decision] at three points (the caller's tools/list, a tools/call
// before it runs, the result before it goes back) and acts on it.
package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Where a rule applies.
const (
	OnList   = "list"   // the caller's tools/list, and so whether the tool exists for them
	OnCall   = "call"   // a tools/call, with its validated arguments, before it runs
	OnResult = "result" // the result of a call, before the caller gets it
)

// What a rule does when it decides.
const (
	Allow   = "allow"   // stops the search: today's behaviour
	Deny    = "deny"    // a tool error carrying the rule's message
	Hide    = "hide"    // absent from tools/list; a call to it is an unknown tool
	Confirm = "confirm" // the person is asked; only an explicit yes runs the call
	Redact  = "redact"  // the result's text and string fields lose the patterns' matches
)

// How a rule acts.
const (
	Enforce = "enforce" // the default
	Audit   = "audit"   // decides nothing; records what it would have done
)

// Limits on a policy document, so that a policy cannot cost a gateway
// more to hold or evaluate than a call is worth.
const (
	MaxRules        = 200
	MaxExprLen      = 4096
	MaxNameLen      = 100
	MaxMessageLen   = 1000
	MaxPatterns     = 20
	MaxPatternLen   = 500
	MaxToolPatterns = 100
)

// effectsOn is which effects a rule may have at each point.
var effectsOn = map[string][]string{
	OnList:   {Allow, Hide},
	OnCall:   {Allow, Deny, Confirm},
	OnResult: {Allow, Deny, Redact},
}

// Document is a project's policy as stored and as edited: the rules, in
// order, and the interceptor servers.
type Document struct {
	Rules        []Rule        `json:"rules"`
	Interceptors []Interceptor `json:"interceptors,omitempty"`
}

// Rule is one rule of a [Document].
type Rule struct {
	Name    string   `json:"name"`
	On      string   `json:"on"`
	Tools   []string `json:"tools,omitempty"` // globs (path.Match) over exposed tool names; empty: every tool
	When    string   `json:"when,omitempty"`  // a CEL expression yielding a bool; empty: always
	Effect  string   `json:"effect"`
	Message string   `json:"message,omitempty"` // deny and confirm; {{args.x}}, {{caller.person.email}}, …
	Redact  []string `json:"redact,omitempty"`  // redact: RE2 patterns
	Mode    string   `json:"mode,omitempty"`    // enforce (default) or audit
}

// Interceptor is an interceptor server (SEP-1763) the project's calls
// pass through: an MCP endpoint at URL, or a bridged agent of the project
// by name.
type Interceptor struct {
	Name     string            `json:"name,omitempty"`
	URL      string            `json:"url,omitempty"`
	Agent    string            `json:"agent,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Timeout  string            `json:"timeout,omitempty"` // a Go duration; default 500ms
	Mode     string            `json:"mode,omitempty"`    // enforce (default) or audit
	FailOpen bool              `json:"failOpen,omitempty"`
}

// RuleError is why a rule of a document was refused: its name (or its
// position when it has none), where in the rule, and what is wrong.
type RuleError struct {
	Index  int    // the rule's position in the list, from 0
	Name   string // the rule's name, when it has one
	Field  string // "when", "tools", "effect", …
	Line   int    // in When, from 1; 0 when not about the expression
	Column int    // in When, from 1
	Msg    string
}

func (e *RuleError) Error() string {
	who := fmt.Sprintf("rule %d", e.Index+1)
	if e.Name != "" {
		who = fmt.Sprintf("rule %q", e.Name)
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s: %s at line %d, column %d: %s", who, e.Field, e.Line, e.Column, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", who, e.Field, e.Msg)
}

// Parse reads a document from JSON, refusing unknown fields (a misspelt
// "efect" must not silently mean no effect).
func Parse(b []byte) (Document, error) {
	var d Document
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Document{}, fmt.Errorf("the policy is not valid JSON of the expected shape: %w", err)
	}
	if dec.More() {
		return Document{}, errors.New("the policy has more than one JSON value; send one object with \"rules\"")
	}
	return d, nil
}

// check validates everything in r but its expression, and returns the
// compiled patterns of a redact rule.
func (r *Rule) check(i int, seen map[string]bool) ([]*regexp.Regexp, error) {
	bad := func(field, format string, args ...any) error {
		return &RuleError{Index: i, Name: r.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case strings.TrimSpace(r.Name) == "":
		return nil, bad("name", "every rule needs a name, which the call log and refusals show")
	case utf8.RuneCountInString(r.Name) > MaxNameLen:
		return nil, bad("name", "longer than %d characters", MaxNameLen)
	case seen[r.Name]:
		return nil, bad("name", "another rule has this name; names must be unique")
	}
	seen[r.Name] = true
	effects, ok := effectsOn[r.On]
	if !ok {
		return nil, bad("on", "%q is not one of list, call, result", r.On)
	}
	if !contains(effects, r.Effect) {
		return nil, bad("effect", "%q cannot be used on %s; use one of %s", r.Effect, r.On, strings.Join(effects, ", "))
	}
	switch r.Mode {
	case "", Enforce, Audit:
	default:
		return nil, bad("mode", "%q is not enforce or audit", r.Mode)
	}
	if len(r.Tools) > MaxToolPatterns {
		return nil, bad("tools", "more than %d patterns", MaxToolPatterns)
	}
	for _, g := range r.Tools {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return nil, bad("tools", "%q is not a valid pattern (use names with * and ?)", g)
		}
	}
	if len(r.When) > MaxExprLen {
		return nil, bad("when", "longer than %d bytes", MaxExprLen)
	}
	if len(r.Message) > MaxMessageLen {
		return nil, bad("message", "longer than %d bytes", MaxMessageLen)
	}
	if err := checkTemplate(r.Message); err != nil {
		return nil, bad("message", "%v", err)
	}
	if r.Effect != Redact {
		if len(r.Redact) > 0 {
			return nil, bad("redact", "patterns are for effect redact only")
		}
		return nil, nil
	}
	if len(r.Redact) == 0 {
		return nil, bad("redact", "a redact rule needs at least one pattern")
	}
	if len(r.Redact) > MaxPatterns {
		return nil, bad("redact", "more than %d patterns", MaxPatterns)
	}
	res := make([]*regexp.Regexp, 0, len(r.Redact))
	for _, p := range r.Redact {
		if len(p) > MaxPatternLen {
			return nil, bad("redact", "a pattern is longer than %d bytes", MaxPatternLen)
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, bad("redact", "%q: %v", p, err)
		}
		if re.MatchString("") {
			return nil, bad("redact", "%q matches the empty string; it would redact between every character", p)
		}
		res = append(res, re)
	}
	return res, nil
}

// matches reports whether the rule's tool patterns take name.
func (r *Rule) matches(name string) bool {
	if len(r.Tools) == 0 {
		return true
	}
	for _, g := range r.Tools {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
