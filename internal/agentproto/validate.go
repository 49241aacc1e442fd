package agentproto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/spacefix/spacefix/internal/textfmt"
)

// Limits are the per-agent registration limits a project enforces.
type Limits struct {
	MaxTools     int // tools per agent
	MaxSchema    int // bytes of one tool's input schema
	MaxResources int // resources per agent
	MaxRegister  int // bytes of one whole registration
}

// DefaultLimits returns the limits of SPEC.md.
func DefaultLimits() Limits {
	return Limits{
		MaxTools:     DefaultMaxTools,
		MaxSchema:    DefaultMaxSchema,
		MaxResources: DefaultMaxResources,
		MaxRegister:  DefaultMaxRegister,
	}
}

// ValidName reports whether name is a valid tool or prompt name:
// 1 to 64 characters from A-Z a-z 0-9 _ -.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > MaxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// CheckToolName returns the message a caller reads when name cannot be a tool
// name, or "" when it can. kind is "tool" or "prompt".
func CheckToolName(kind, name string) string {
	if !ValidName(name) {
		return fmt.Sprintf("Invalid %s name %q.", kind, name)
	}
	if strings.Contains(name, "__") {
		return fmt.Sprintf("Invalid %s name %q: names containing \"__\" are reserved for bridged MCP servers.", kind, name)
	}
	return CheckReserved(kind, name)
}

// ReservedPrefix starts the names of the gateway's own tools; agents may
// not expose a name that starts with it.
const ReservedPrefix = "spacefix_"

// CheckReserved returns the message for an exposed name the gateway keeps
// for itself, or "".
func CheckReserved(kind, exposed string) string {
	if strings.HasPrefix(strings.ToLower(exposed), ReservedPrefix) {
		return fmt.Sprintf("Invalid %s name %q: names starting with %q are reserved for the gateway's own tools.", kind, exposed, ReservedPrefix)
	}
	return ""
}

// Validate checks a registration against the naming rules and lim, and
// returns the first problem as the message the agent's developer reads, or
// "" when the registration is acceptable. The size of the whole registration
// is checked by whoever holds its bytes.
func (r *Registration) Validate(lim Limits) string {
	if r.Protocol != Version {
		return fmt.Sprintf("Unsupported agent protocol %d: this gateway speaks %d. Upgrade the SDK or the gateway.", r.Protocol, Version)
	}
	if r.Name != "" && !ValidName(r.Name) {
		return fmt.Sprintf("Invalid agent name %q: use 1 to 64 characters from A-Z a-z 0-9 _ -.", r.Name)
	}
	if r.Namespace && r.Name == "" {
		return "An agent with a namespace needs a name: set Name in the SDK options."
	}
	if len(r.Instance) > MaxNameLen {
		return fmt.Sprintf("Instance name %q is longer than %d characters.", r.Instance, MaxNameLen)
	}
	if len(r.Tools) > lim.MaxTools {
		return fmt.Sprintf("Too many tools: %d registered, the limit is %s per agent.", len(r.Tools), Thousands(lim.MaxTools))
	}
	if len(r.Resources) > lim.MaxResources {
		return fmt.Sprintf("Too many resources: %d registered, the limit is %s per agent.", len(r.Resources), Thousands(lim.MaxResources))
	}
	seen := make(map[string]bool, len(r.Tools))
	for _, t := range r.Tools {
		if msg := CheckToolName("tool", t.Name); msg != "" {
			return msg
		}
		if seen[t.Name] {
			return fmt.Sprintf("Duplicate tool name %q: each tool of an agent needs its own name.", t.Name)
		}
		seen[t.Name] = true
		if len(t.InputSchema) > lim.MaxSchema {
			return fmt.Sprintf("Input schema of tool %q is %s bytes; the limit is %s bytes.", t.Name, Thousands(len(t.InputSchema)), Thousands(lim.MaxSchema))
		}
		if !isObjectSchema(t.InputSchema) {
			return fmt.Sprintf("Input schema of tool %q must be a JSON object with \"type\": \"object\".", t.Name)
		}
		if t.TimeoutMs < 0 || t.TimeoutMs > MaxToolTimeoutMs {
			return fmt.Sprintf("Timeout of tool %q is %dms; it must be between 0 and %dms.", t.Name, t.TimeoutMs, MaxToolTimeoutMs)
		}
	}
	uris := make(map[string]bool, len(r.Resources))
	for _, res := range r.Resources {
		if u, err := url.Parse(res.URI); err != nil || u.Scheme == "" {
			return fmt.Sprintf("Invalid resource URI %q: use an absolute URI such as orders://open.", res.URI)
		}
		if uris[res.URI] {
			return fmt.Sprintf("Duplicate resource URI %q.", res.URI)
		}
		uris[res.URI] = true
		if res.Name == "" {
			return fmt.Sprintf("Resource %q needs a display name.", res.URI)
		}
	}
	prompts := make(map[string]bool, len(r.Prompts))
	for _, p := range r.Prompts {
		if msg := CheckToolName("prompt", p.Name); msg != "" {
			return msg
		}
		if prompts[p.Name] {
			return fmt.Sprintf("Duplicate prompt name %q.", p.Name)
		}
		prompts[p.Name] = true
	}
	return ""
}

// isObjectSchema reports whether raw is a JSON object whose "type" is
// "object".
func isObjectSchema(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	var s struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return false
	}
	return s.Type == "object"
}

// Thousands formats n with comma separators: 65536 → "65,536".
func Thousands(n int) string { return textfmt.Thousands(int64(n)) }
