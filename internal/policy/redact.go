package policy

// Redacted is what a redact rule puts in place of each match.
const Redacted = "[redacted]"

// RedactText returns s with every match of the deciding redact rule's
// patterns replaced by [Redacted]; s itself when the decision is not a
// redaction or nothing matches.
func (d *Decision) RedactText(s string) string {
	for _, re := range d.patterns {
		s = re.ReplaceAllLiteralString(s, Redacted)
	}
	return s
}

// RedactValue returns v (decoded JSON: maps, slices, strings, numbers)
// with RedactText applied to every string in it, keys excepted. Maps and
// slices are copied, never changed in place: a cached result is shared.
func (d *Decision) RedactValue(v any) any {
	if len(d.patterns) == 0 {
		return v
	}
	switch v := v.(type) {
	case string:
		return d.RedactText(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = d.RedactValue(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = d.RedactValue(x)
		}
		return out
	default:
		return v
	}
}
