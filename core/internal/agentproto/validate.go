package agentproto

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spacefix/spacefix/core/internal/textfmt"
)

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

// CheckToolName returns why name cannot be a tool name, worded for the
// agent's developer, or nil when it can. kind is "tool" or "prompt".
func CheckToolName(kind, name string) error {
	if !ValidName(name) {
		return fmt.Errorf("Invalid %s name %q.", kind, name)
	}
	if strings.Contains(name, "__") {
		return fmt.Errorf("Invalid %s name %q: names containing \"__\" are reserved for bridged MCP servers.", kind, name)
	}
	return CheckReserved(kind, name)
}

// BridgeSeparator joins a bridged agent's name and its server's tool or
// prompt name: "github" + "create_issue" → "github__create_issue".
const BridgeSeparator = "__"

// CheckBridgedName returns the message for a tool or prompt name that a
// bridged agent named agent may not register, or "": the name must be
// agent + "__" + the server's name, the whole a valid name of at most 64
// characters, and the server's part must not contain "__" itself.
func CheckBridgedName(kind, agent, name string) error {
	server, ok := strings.CutPrefix(name, agent+BridgeSeparator)
	if !ok || agent == "" {
		return fmt.Errorf("Invalid %s name %q: a bridged agent's names start with its name and %q (%q).", kind, name, BridgeSeparator, agent+BridgeSeparator)
	}
	if server == "" || !ValidName(name) {
		return fmt.Errorf("Invalid %s name %q: use 1 to %d characters from A-Z a-z 0-9 _ - in all.", kind, name, MaxNameLen)
	}
	if strings.Contains(server, BridgeSeparator) {
		return fmt.Errorf("Invalid %s name %q: the server's part %q contains %q, which separates the bridge's name.", kind, name, server, BridgeSeparator)
	}
	return CheckReserved(kind, name)
}

// ReservedPrefix starts the names of the gateway's own tools; agents may
// not expose a name that starts with it.
const ReservedPrefix = "spacefix_"

// CheckReserved returns an error, worded for the agent's developer, when
// exposed is a name the gateway keeps for itself, or nil.
func CheckReserved(kind, exposed string) error {
	if strings.HasPrefix(strings.ToLower(exposed), ReservedPrefix) {
		return fmt.Errorf("Invalid %s name %q: names starting with %q are reserved for the gateway's own tools.", kind, exposed, ReservedPrefix)
	}
	return nil
}

// Thousands formats n with comma separators: 65536 → "65,536".
func Thousands(n int) string { return textfmt.Thousands(int64(n)) }

// CheckTaskSupport returns why tool's execution.taskSupport cannot be
// registered, worded for the agent's developer, or nil: it is absent,
// [TaskForbidden], [TaskOptional] or [TaskRequired].
func CheckTaskSupport(t *Tool) error {
	if t.Execution == nil {
		return nil
	}
	switch t.Execution.TaskSupport {
	case "", TaskForbidden, TaskOptional, TaskRequired:
		return nil
	}
	return fmt.Errorf("Task support of tool %q is %q; use %q, %q or %q.", t.Name, textfmt.Cut(t.Execution.TaskSupport, 40), TaskForbidden, TaskOptional, TaskRequired)
}

// CheckIdempotencyKey returns why tool's IdempotencyKey cannot be
// registered, worded for the agent's developer, or nil: it is absent, or
// it names a property of the input schema of type string that the schema
// lists in required.
func CheckIdempotencyKey(t *Tool) error {
	key := t.IdempotencyKey
	if key == "" {
		return nil
	}
	var s struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(t.InputSchema, &s) // a schema that is no object has no such argument
	p, ok := s.Properties[key]
	if !ok {
		return fmt.Errorf("Tool %q names %q as its idempotency key, but the input schema has no such argument; make it a required string argument.", t.Name, textfmt.Cut(key, 64))
	}
	var typ string
	if json.Unmarshal(p.Type, &typ) != nil || typ != "string" {
		return fmt.Errorf("Tool %q names %q as its idempotency key, but it is not a string; make it a required string argument.", t.Name, key)
	}
	if !slices.Contains(s.Required, key) {
		return fmt.Errorf("Tool %q names %q as its idempotency key, but it is not required; make it a required string argument.", t.Name, key)
	}
	return nil
}

// JSON-RPC error codes an agent's protocol error may carry as they are.
const (
	CodeInvalidParams = -32602
	CodeInternalError = -32603
)

// ClientErrorCode is the JSON-RPC error code a client gets for an agent's
// protocol error with code: -32602 (invalid params), -32603 (internal
// error) and any application code outside the range JSON-RPC reserves
// (-32768 to -32000) pass as they are; any other code of that range, whose
// meaning is the protocol's own (method not found, a missing capability…),
// and 0 become -32603, the message kept.
func ClientErrorCode(code int) int {
	switch {
	case code == CodeInvalidParams:
		return code
	case code == 0, code >= -32768 && code <= -32000:
		return CodeInternalError
	}
	return code
}
