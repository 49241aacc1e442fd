package agentfront

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/yosida95/uritemplate/v3"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/schema"
	"github.com/spacefix/spacefix/internal/store"
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
		MaxTools:     agentproto.DefaultMaxTools,
		MaxSchema:    agentproto.DefaultMaxSchema,
		MaxResources: agentproto.DefaultMaxResources,
		MaxRegister:  agentproto.DefaultMaxRegister,
	}
}

// LimitsOf returns the registration limits of a project's settings: the
// defaults where a setting is 0.
func LimitsOf(s store.ProjectSettings) Limits {
	lim := DefaultLimits()
	if s.MaxTools > 0 {
		lim.MaxTools = s.MaxTools
	}
	if s.MaxSchemaBytes > 0 {
		lim.MaxSchema = s.MaxSchemaBytes
	}
	if s.MaxResources > 0 {
		lim.MaxResources = s.MaxResources
	}
	if s.MaxRegistrationBytes > 0 {
		lim.MaxRegister = s.MaxRegistrationBytes
	}
	return lim
}

// RegistrationError is why a registration is refused. Its Error is the
// sentence the agent's developer reads (docs/agent-protocol.md, section
// 1.1); Kind and Name say what is at fault, for callers that branch.
type RegistrationError struct {
	Kind    string // "agent", "tool", "resource" or "prompt"
	Name    string // the tool's or prompt's name, the resource's URI; "" for the agent
	Message string // what the agent's developer reads
}

func (e *RegistrationError) Error() string { return e.Message }

// refuse returns a [RegistrationError] about the named kind.
func refuse(kind, name, format string, args ...any) *RegistrationError {
	return &RegistrationError{Kind: kind, Name: name, Message: fmt.Sprintf(format, args...)}
}

// refuseAs returns a [RegistrationError] with err's message.
func refuseAs(kind, name string, err error) *RegistrationError {
	return &RegistrationError{Kind: kind, Name: name, Message: err.Error()}
}

// compiled holds the input schemas of the registrations checked, so that
// replicas registering the same schema text share one compiled copy.
var compiled schema.Cache

// Check makes every check of a decoded registration: the naming rules and
// lim, the names its tools are exposed under, and their input schemas. It
// returns the compiled schemas by registered tool name, or the first problem
// as a *[RegistrationError]. The size of the whole registration is checked
// by whoever holds its bytes.
func Check(reg *agentproto.Registration, lim Limits) (map[string]*schema.Schema, error) {
	if err := validate(reg, lim); err != nil {
		return nil, err
	}
	schemas := make(map[string]*schema.Schema, len(reg.Tools))
	for i := range reg.Tools {
		if reg.Tools[i].IdempotencyKey != "" {
			reg.Tools[i].InputSchema = DescribeIdempotencyKey(reg.Tools[i].InputSchema, reg.Tools[i].IdempotencyKey)
		}
	}
	for _, t := range reg.Tools {
		exp := agents.ExposedName(reg, t.Name)
		if len(exp) > agentproto.MaxNameLen {
			return nil, refuse("tool", t.Name, "Tool name %q becomes %q with the namespace, longer than %d characters. Shorten the agent or tool name.", t.Name, exp, agentproto.MaxNameLen)
		}
		if err := agentproto.CheckReserved("tool", exp); err != nil {
			return nil, refuseAs("tool", t.Name, err)
		}
		s, err := compiled.Compile(t.InputSchema, schema.Options{Default2020: true})
		if err != nil {
			return nil, refuse("tool", t.Name, "Input schema of tool %q does not compile: %v", t.Name, err)
		}
		schemas[t.Name] = s
	}
	return schemas, nil
}

// validate checks a registration against the naming rules and lim, and
// returns the first problem as a *[RegistrationError], or nil when the
// registration is acceptable. The size of the whole registration is checked
// by whoever holds its bytes.
func validate(r *agentproto.Registration, lim Limits) error {
	if r.Protocol != agentproto.Version {
		return refuse("agent", "", "Unsupported agent protocol %d: this gateway speaks %d. Upgrade the SDK or the gateway.", r.Protocol, agentproto.Version)
	}
	if r.Name != "" && !agentproto.ValidName(r.Name) {
		return refuse("agent", "", "Invalid agent name %q: use 1 to 64 characters from A-Z a-z 0-9 _ -.", r.Name)
	}
	if r.Namespace && r.Name == "" {
		return refuse("agent", "", "An agent with a namespace needs a name: set Name in the SDK options.")
	}
	if err := checkBridge(r); err != nil {
		return err
	}
	if len(r.Instance) > agentproto.MaxNameLen {
		return refuse("agent", "", "Instance name %q is longer than %d characters.", r.Instance, agentproto.MaxNameLen)
	}
	if len(r.Tools) > lim.MaxTools {
		return refuse("agent", "", "Too many tools: %d registered, the limit is %s per agent.", len(r.Tools), agentproto.Thousands(lim.MaxTools))
	}
	if len(r.Resources) > lim.MaxResources {
		return refuse("agent", "", "Too many resources: %d registered, the limit is %s per agent.", len(r.Resources), agentproto.Thousands(lim.MaxResources))
	}
	if err := validateTools(r, lim); err != nil {
		return err
	}
	uris := make(map[string]bool, len(r.Resources))
	for _, res := range r.Resources {
		if res.Template {
			i := strings.Index(res.URI, "{")
			if _, err := uritemplate.New(res.URI); err != nil || i < 0 || !hasScheme(res.URI[:i]) {
				return refuse("resource", res.URI, "Invalid resource template %q: use an RFC 6570 URI template with at least one variable, such as orders://orders/{id}.", res.URI)
			}
		} else if u, err := url.Parse(res.URI); err != nil || u.Scheme == "" {
			return refuse("resource", res.URI, "Invalid resource URI %q: use an absolute URI such as orders://open.", res.URI)
		}
		if uris[res.URI] {
			return refuse("resource", res.URI, "Duplicate resource URI %q.", res.URI)
		}
		uris[res.URI] = true
		if res.Name == "" {
			return refuse("resource", res.URI, "Resource %q needs a display name.", res.URI)
		}
	}
	prompts := make(map[string]bool, len(r.Prompts))
	for _, p := range r.Prompts {
		if err := checkName(r, "prompt", p.Name); err != nil {
			return refuseAs("prompt", p.Name, err)
		}
		if prompts[p.Name] {
			return refuse("prompt", p.Name, "Duplicate prompt name %q.", p.Name)
		}
		prompts[p.Name] = true
	}
	return nil
}

// validateTools checks each tool's name, schema size and shape, and timeout.
func validateTools(r *agentproto.Registration, lim Limits) error {
	seen := make(map[string]bool, len(r.Tools))
	for _, t := range r.Tools {
		if err := checkName(r, "tool", t.Name); err != nil {
			return refuseAs("tool", t.Name, err)
		}
		if seen[t.Name] {
			return refuse("tool", t.Name, "Duplicate tool name %q: each tool of an agent needs its own name.", t.Name)
		}
		seen[t.Name] = true
		if len(t.InputSchema) > lim.MaxSchema {
			return refuse("tool", t.Name, "Input schema of tool %q is %s bytes; the limit is %s bytes.", t.Name, agentproto.Thousands(len(t.InputSchema)), agentproto.Thousands(lim.MaxSchema))
		}
		if !isObjectSchema(t.InputSchema) {
			return refuse("tool", t.Name, "Input schema of tool %q must be a JSON object with \"type\": \"object\".", t.Name)
		}
		if t.TimeoutMs < 0 || t.TimeoutMs > agentproto.MaxToolTimeoutMs {
			return refuse("tool", t.Name, "Timeout of tool %q is %dms; it must be between 0 and %dms.", t.Name, t.TimeoutMs, agentproto.MaxToolTimeoutMs)
		}
		if err := agentproto.CheckTaskSupport(&t); err != nil {
			return refuseAs("tool", t.Name, err)
		}
		if err := agentproto.CheckIdempotencyKey(&t); err != nil {
			return refuseAs("tool", t.Name, err)
		}
	}
	return nil
}

// checkBridge checks what a bridged agent's registration needs: a name
// that can prefix its tools, and no namespace on top.
func checkBridge(r *agentproto.Registration) error {
	switch {
	case r.Bridge == nil:
		return nil
	case r.Name == "" || strings.Contains(r.Name, agentproto.BridgeSeparator):
		return refuse("agent", "", "A bridged agent needs a name without %q (got %q): pass --name to spacefix bridge.", agentproto.BridgeSeparator, r.Name)
	case r.Namespace:
		return refuse("agent", "", "A bridged agent's names are already <name>__<tool>; it cannot have a namespace too.")
	}
	return nil
}

// checkName checks a tool or prompt name as registered: the general rules,
// or those of a bridged agent's names.
func checkName(r *agentproto.Registration, kind, name string) error {
	if r.Bridge != nil && !r.Bridge.Unprefixed {
		return agentproto.CheckBridgedName(kind, r.Name, name)
	}
	return agentproto.CheckToolName(kind, name)
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

// hasScheme reports whether s starts with a URI scheme and its colon.
func hasScheme(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != ""
}

// ReuseSentence is what the description of a tool's idempotency argument
// gains in tools/list, unless it already says to reuse the value.
const ReuseSentence = "Reuse the same value when you retry this call, so it takes effect only once."

// DescribeIdempotencyKey returns the input schema with ReuseSentence added
// to the description of argument key, unless that description already
// mentions reusing or retrying (any case); the schema as it was if it has
// no such argument. [Check] applies it to each registration once, so
// that every listing shows it at no cost.
func DescribeIdempotencyKey(in json.RawMessage, key string) json.RawMessage {
	var s map[string]json.RawMessage
	var props map[string]json.RawMessage
	var prop map[string]json.RawMessage
	if json.Unmarshal(in, &s) != nil || json.Unmarshal(s["properties"], &props) != nil || json.Unmarshal(props[key], &prop) != nil || prop == nil {
		return in
	}
	var desc string
	_ = json.Unmarshal(prop["description"], &desc) // absent or not a string: none
	if l := strings.ToLower(desc); strings.Contains(l, "reuse") || strings.Contains(l, "retry") {
		return in
	}
	desc = strings.TrimSpace(desc)
	switch {
	case desc == "":
		desc = ReuseSentence
	case strings.HasSuffix(desc, ".") || strings.HasSuffix(desc, "!") || strings.HasSuffix(desc, "?"):
		desc += " " + ReuseSentence
	default:
		desc += ". " + ReuseSentence
	}
	var err error
	if prop["description"], err = json.Marshal(desc); err != nil {
		return in
	}
	if props[key], err = json.Marshal(prop); err != nil {
		return in
	}
	if s["properties"], err = json.Marshal(props); err != nil {
		return in
	}
	out, err := json.Marshal(s)
	if err != nil {
		return in
	}
	return out
}
