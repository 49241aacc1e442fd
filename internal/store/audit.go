package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// AuditEntry is one change that affects what models see or who gets in:
// who made it, when, from where, what, and the values before and after.
// Before and After never hold a secret.
type AuditEntry struct {
	ID        int64     // set by the store, increasing
	At        time.Time // set by the store
	ProjectID int64     // 0: an instance-wide change (users, instance tokens)
	// Actor is who acted: a person's email, "token tok_… (name)", or
	// "cli" for the command line on the store.
	Actor string
	// Addr is the client address the change came from; empty from the CLI.
	Addr string
	// Action names the kind of change, such as "tool.update"; see
	// docs/api.md for the list.
	Action string
	// Target is what changed: a tool's name, a key's id, a member's email.
	Target string
	// Before and After are JSON values (null when there was none).
	Before, After json.RawMessage
}

// AuditFilter selects audit entries, newest first.
type AuditFilter struct {
	ProjectID int64 // required; 0 selects the instance-wide entries
	// BeforeID, when set, returns only entries older than that id (the
	// next page).
	BeforeID int64
	Action   string // exact, or a prefix ending in "." ("tool.")
	Actor    string // exact
	Since    time.Time
	Limit    int // at most 500; 0 means 100
}

// MaxAuditPage bounds AuditFilter.Limit.
const MaxAuditPage = 500

// PageSize returns the filter's limit, bounded.
func (f AuditFilter) PageSize() int {
	switch {
	case f.Limit <= 0:
		return 100
	case f.Limit > MaxAuditPage:
		return MaxAuditPage
	}
	return f.Limit
}

// AuditSQL is the query the SQL stores run for a filter, with its
// arguments; param writes the n-th placeholder (1-based). The columns are
// id, at, project_id, actor, addr, action, target, before, after.
func AuditSQL(f AuditFilter, param func(n int) string) (string, []any) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.Replace(cond, "?", param(len(args)), 1))
	}
	add("project_id = ?", f.ProjectID)
	if f.BeforeID > 0 {
		add("id < ?", f.BeforeID)
	}
	switch {
	case strings.HasSuffix(f.Action, "."):
		add(fmt.Sprintf("substr(action, 1, %d) = ?", len(f.Action)), f.Action)
	case f.Action != "":
		add("action = ?", f.Action)
	}
	if f.Actor != "" {
		add("actor = ?", f.Actor)
	}
	if !f.Since.IsZero() {
		add("at >= ?", f.Since.UnixMilli())
	}
	return "SELECT id, at, project_id, actor, addr, action, target, before, after FROM audit WHERE " +
		strings.Join(where, " AND ") + fmt.Sprintf(" ORDER BY id DESC LIMIT %d", f.PageSize()), args
}

// AuditJSON is how the SQL stores keep Before and After: valid JSON, null
// when empty.
func AuditJSON(v json.RawMessage) string {
	if len(v) == 0 || !json.Valid(v) {
		return "null"
	}
	return string(v)
}

// NewAuditEntry makes an entry, with before and after as JSON (nil is
// null). They must hold no secret.
func NewAuditEntry(projectID int64, actor, addr, action, target string, before, after any) AuditEntry {
	return AuditEntry{
		ProjectID: projectID, Actor: actor, Addr: addr, Action: action, Target: target,
		Before: auditValue(before), After: auditValue(after),
	}
}

// auditValue is v as JSON, as people read it in the CLI's table and the
// dashboard: "&", "<" and ">" as themselves, not \u0026 and the like
// (json.Marshal's escaping for HTML pages, which the pages do themselves).
func auditValue(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage(strconv.Quote(fmt.Sprint(v)))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// KeyAudit is what the audit log keeps of a key: never its hash.
func KeyAudit(k Key) map[string]any {
	tools := k.Tools
	if tools == nil {
		tools = []string{}
	}
	return map[string]any{"id": k.ID, "kind": k.Kind, "name": k.Name, "readOnly": k.ReadOnly, "tools": tools, "revoked": k.Revoked()}
}

// ActorCLI is the actor of changes made with the command line on the
// store (spacefix keys, tokens, projects).
const ActorCLI = "cli"

// TokenAudit is what the audit log keeps of an API token: never its
// secret.
func TokenAudit(t APIToken) map[string]any {
	out := map[string]any{"id": t.ID, "name": t.Name}
	if t.Role != "" {
		out["role"] = t.Role
	}
	if t.Revoked() {
		out["revoked"] = true
	}
	return out
}

// IdPAudit is what the audit log records of a trusted identity provider
// entry; project is its provisioning project's name ("" for none).
func IdPAudit(p IdP, project string) map[string]any {
	out := map[string]any{"issuer": p.Issuer}
	if p.JWKSURI != "" {
		out["jwksUri"] = p.JWKSURI
	}
	if len(p.AllowedClients) > 0 {
		out["allowedClients"] = p.AllowedClients
	}
	if project != "" {
		out["provision"] = project + ":" + string(p.ProvisionRole)
	}
	return out
}
