// Package access holds the access and control rules: what a client key may
// see and call (enabled by its agent and the dashboard, approved when the
// project wants approval, a read for a read-only key, on the key's
// allow-list), and how a tool looks to it (the approved definition while a
// change waits, the dashboard's description, the community prefix, the
// read/write override, cache seconds). The MCP endpoint and the dashboard
// both use it, so that what the Tools table shows is what models get.
//
// tool.go has the rules about one tool, controls.go what the dashboard
// said about a project ([Controls], cached by [Cache]), policy.go what one
// key may see ([Policy]).
package access

import (
	"encoding/json"
	"fmt"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/canonjson"
	"github.com/spacefix/spacefix/internal/store"
)

// CommunityPrefix is put in front of the descriptions of tools from an
// agent key marked community:
// `[Custom agent "<displayName>" by <author>, community code] `.
// An empty author reads "an unknown author".
func CommunityPrefix(displayName, author string) string {
	if author == "" {
		author = "an unknown author"
	}
	return fmt.Sprintf("[Custom agent %q by %s, community code] ", displayName, author)
}

// AgentName is the name people read for an agent key: the display name the
// dashboard gave the key, else the one the agent registered, else the
// agent's name, else the key's label, else its id. reg may be nil.
func AgentName(k store.Key, reg *agentproto.Registration) string {
	names := []string{k.DisplayName}
	if reg != nil {
		names = append(names, reg.DisplayName, reg.Name)
	}
	for _, s := range append(names, k.Name) {
		if s != "" {
			return s
		}
	}
	return k.ID
}

// Author is who wrote an agent: what the dashboard says about the key, else
// what the agent registered. reg may be nil.
func Author(k store.Key, reg *agentproto.Registration) string {
	if k.Author == "" && reg != nil {
		return reg.Author
	}
	return k.Author
}

// Description is the description models see: the dashboard's override if
// there is one, else the registered description; prefixed with
// [CommunityPrefix] when the agent key is marked community. Only the key's
// flag counts: an agent cannot declare itself trusted. reg is the agent's
// registration, for its names; it may be nil.
func Description(registered string, s store.ToolSettings, agentKey store.Key, reg *agentproto.Registration) string {
	d := registered
	if s.Description != "" {
		d = s.Description
	}
	if agentKey.Community {
		d = CommunityPrefix(AgentName(agentKey, reg), Author(agentKey, reg)) + d
	}
	return d
}

// ReadOnly reports whether a tool counts as a read for read-only clients:
// the dashboard's override, else what the agent declares.
func ReadOnly(declared bool, s store.ToolSettings) bool {
	switch s.Access {
	case store.AccessRead:
		return true
	case store.AccessWrite:
		return false
	}
	return declared
}

// DeclaredReadOnly reports whether a registered tool declares readOnlyHint.
func DeclaredReadOnly(t agentproto.Tool) bool {
	return t.Annotations != nil && t.Annotations.ReadOnlyHint != nil && *t.Annotations.ReadOnlyHint
}

// definition is the part of a tool that consent covers.
type definition struct {
	Title        string                  `json:"title,omitempty"`
	Description  string                  `json:"description"`
	InputSchema  json.RawMessage         `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage         `json:"outputSchema,omitempty"`
	Annotations  *agentproto.Annotations `json:"annotations,omitempty"`
}

// Definition returns the canonical JSON of what consent covers in t (title,
// description, input and output schema, annotations), as stored in
// [store.Approval]. Two definitions are the same if their bytes are.
func Definition(t agentproto.Tool) []byte {
	b, err := json.Marshal(definition{t.Title, t.Description, t.InputSchema, t.OutputSchema, t.Annotations})
	if err != nil {
		// Registered schemas are valid JSON (checked at registration).
		panic("access: definition of " + t.Name + ": " + err.Error())
	}
	c, err := canonjson.Canonical(b)
	if err != nil {
		panic("access: definition of " + t.Name + ": " + err.Error())
	}
	return c
}

// ApprovedTool returns t with the fields consent covers replaced by those of
// an approved definition, so clients see what was approved.
func ApprovedTool(t agentproto.Tool, approved []byte) (agentproto.Tool, error) {
	var d definition
	if err := json.Unmarshal(approved, &d); err != nil {
		return agentproto.Tool{}, fmt.Errorf("approved definition of %s: %w", t.Name, err)
	}
	t.Title, t.Description, t.InputSchema, t.OutputSchema, t.Annotations = d.Title, d.Description, d.InputSchema, d.OutputSchema, d.Annotations
	return t, nil
}

// Consent is where a tool stands when the project approves tool changes.
type Consent int

const (
	// Approved: clients see the tool as registered.
	Approved Consent = iota
	// PendingNew: never approved; clients do not see the tool.
	PendingNew
	// PendingChange: changed since approved; clients see the approved
	// definition.
	PendingChange
	// RejectedNew: a new tool someone rejected; clients do not see it.
	RejectedNew
	// RejectedChange: a change someone rejected; clients see the approved
	// definition.
	RejectedChange
)

// Pending reports whether someone should approve or reject.
func (c Consent) Pending() bool { return c == PendingNew || c == PendingChange }

// Visible reports whether clients see the tool at all.
func (c Consent) Visible() bool { return c == Approved || c == PendingChange || c == RejectedChange }

// State returns the consent state of a tool whose current definition is
// def, given its approval record (nil if there is none).
func State(def []byte, a *store.Approval) Consent {
	var approved, rejected []byte
	if a != nil {
		approved, rejected = a.Definition, a.Rejected
	}
	switch {
	case approved != nil && string(approved) == string(def):
		return Approved
	case rejected != nil && string(rejected) == string(def) && approved == nil:
		return RejectedNew
	case rejected != nil && string(rejected) == string(def):
		return RejectedChange
	case approved == nil:
		return PendingNew
	default:
		return PendingChange
	}
}
