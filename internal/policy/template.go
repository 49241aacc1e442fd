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

// expand puts the call's values into msg.
func expand(msg string, vars *activation) string {
	out := placeholder.ReplaceAllStringFunc(msg, func(s string) string {
		name := placeholder.FindStringSubmatch(s)[1]
		parts := strings.Split(name, ".")
		v, ok := vars.ResolveName(parts[0])
		if !ok {
			return ""
		}
		for _, p := range parts[1:] {
			m, isMap := v.(map[string]any)
			if !isMap {
				return ""
			}
			if v, ok = m[p]; !ok {
				return ""
			}
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
	})
	if len(out) > maxExpanded {
		out = out[:maxExpanded] + "…"
	}
	return out
}
