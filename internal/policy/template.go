package policy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// A rule's message may name values of the call: {{args.amount}},
// {{caller.person.email}}, {{tool.name}}. A name that is absent (a key
// caller has no person's email) becomes the empty string; a value that
// is not a string is written as JSON. Nothing else in braces is read.
var placeholder = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)\s*\}\}`)

// maxExpanded bounds a message once values are put in, so that a huge
// argument cannot make a huge refusal.
const maxExpanded = 2000

// checkTemplate refuses a message whose placeholders name nothing a
// call has.
func checkTemplate(msg string) error {
	for _, m := range placeholder.FindAllStringSubmatch(msg, -1) {
		root, _, _ := strings.Cut(m[1], ".")
		switch root {
		case "caller", "tool", "args", "result":
		default:
			return fmt.Errorf("{{%s}} names nothing a call has; start with caller, tool, args or result", m[1])
		}
	}
	return nil
}

// expand puts the call's values into msg, cutting it at maxExpanded as
// it goes: a message that names a huge argument many times costs no more
// than its cap.
func expand(msg string, vars *activation) string {
	var b strings.Builder
	last := 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(msg, -1) {
		b.WriteString(msg[last:m[0]])
		last = m[1]
		if b.Len() > maxExpanded {
			break
		}
		v := value(msg[m[2]:m[3]], vars)
		b.WriteString(v[:min(len(v), maxExpanded+1-b.Len())])
	}
	if b.Len() <= maxExpanded {
		b.WriteString(msg[last:])
	}
	out := b.String()
	if len(out) > maxExpanded {
		out = strings.ToValidUTF8(out[:maxExpanded], "") + "…"
	}
	return out
}

// value is what placeholder name stands for in the call: a string as is,
// any other value as JSON, "" when absent.
func value(name string, vars *activation) string {
	parts := strings.Split(name, ".")
	v, ok := vars.field(parts[0], parts[1:])
	if !ok {
		return ""
	}
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return ""
	case error:
		return ""
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
}
