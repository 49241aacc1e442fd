package dashboard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/store"
)

// Consent states as the API names them.
var consentNames = map[access.Consent]string{
	access.Approved:       "",
	access.PendingNew:     "pending-new",
	access.PendingChange:  "pending-change",
	access.RejectedNew:    "rejected-new",
	access.RejectedChange: "rejected-change",
}

type (
	pill             = apitypes.Pill
	toolSettingsJSON = apitypes.ToolSettings
	toolRow          = apitypes.Tool
)

func accessName(a string) string {
	if a == store.AccessFollow {
		return "follow"
	}
	return a
}

func definitionHash(def []byte) string {
	h := sha256.Sum256(def)
	return hex.EncodeToString(h[:8])
}

// toolRows lists the registered tools of a project, then the tools with
// saved settings that no connected agent registers.
func (d *Dashboard) toolRows(ctx context.Context, p store.Project) ([]toolRow, error) {
	c, err := access.Load(ctx, d.st, p.ID)
	if err != nil {
		return nil, err
	}
	var rows []toolRow
	snap := d.reg.Snapshot(p.ID)
	for _, t := range snap.ToolList {
		rows = append(rows, registeredRow(t, c))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Tools)) {
		if snap.Tools[name] == nil {
			rows = append(rows, unregisteredRow(c.Tools[name]))
		}
	}
	return rows, nil
}

// registeredRow is the row of a registered tool, as the access rules of
// the project's controls c make it look to clients.
func registeredRow(t *agents.Tool, c *access.Controls) toolRow {
	var reg *agentproto.Registration
	if len(t.Replicas) > 0 {
		reg = t.Replicas[0].Reg
	}
	s, a, k := c.Tools[t.Name], c.Approvals[t.Name], c.AgentKeys[t.AgentKey]
	def := access.Definition(t.Def)
	row := toolRow{
		Name: t.Name, Registered: true, Agent: access.AgentName(k, reg), AgentKey: t.AgentKey, AgentKeyName: k.Name,
		RegisteredDescription: t.Def.Description, DeclaredReadOnly: access.DeclaredReadOnly(t.Def),
		ReadOnlyHintDeclared: t.Def.Annotations != nil && t.Def.Annotations.ReadOnlyHint != nil, EnabledByAgent: t.Enabled,
		Replicas: len(t.Replicas), Settings: settingsOf(s),
		DefinitionHash: definitionHash(def), ReplicasDiffer: t.Differs, IdempotencyKey: t.Def.IdempotencyKey,
	}
	shown := t.Def
	if c.Settings.ApproveToolChanges {
		st := access.State(def, a)
		row.Consent = consentNames[st]
		if a != nil && a.Definition != nil && st != access.Approved {
			if approved, err := access.ApprovedTool(t.Def, a.Definition); err == nil {
				shown = approved
				row.ApprovedDescription = approved.Description
			}
		}
	}
	row.Description = access.Description(shown.Description, s, k, reg)
	row.ReadOnly = access.ReadOnly(access.DeclaredReadOnly(shown), s)
	row.Pills = pills(row, s)
	return row
}

func unregisteredRow(s store.ToolSettings) toolRow {
	row := toolRow{Name: s.Tool, Settings: settingsOf(s), Description: s.Description}
	row.Pills = pills(row, s)
	return row
}

func settingsOf(s store.ToolSettings) toolSettingsJSON {
	return toolSettingsJSON{Description: s.Description, CacheSeconds: s.CacheSeconds, Access: accessName(s.Access), Disabled: s.Disabled}
}

// pills are the labels SPEC.md gives each state, in a fixed order.
func pills(row toolRow, s store.ToolSettings) []pill {
	var ps []pill
	add := func(cond bool, text, class string) {
		if cond {
			ps = append(ps, pill{Text: text, Class: class})
		}
	}
	add(!row.Registered, "Not registered", "muted")
	add(row.Pending(), "Pending", "warn")
	add(strings.HasPrefix(row.Consent, "rejected"), "Rejected", "muted")
	add(s.Description != "", "Edited", "info")
	add(s.CacheSeconds > 0, fmt.Sprintf("Cached %ds", s.CacheSeconds), "info")
	add(row.IdempotencyKey != "", fmt.Sprintf("Repeat-safe (%s)", row.IdempotencyKey), "info")
	add(s.Access == store.AccessRead, "Treated as read", "info")
	add(s.Access == store.AccessWrite, "Treated as write", "info")
	add(s.Disabled, "Disabled", "off")
	add(row.Registered && !row.EnabledByAgent, "Off in agent", "muted")
	if len(row.ReplicasDiffer) > 0 {
		ps = append(ps, differPill(row.ReplicasDiffer))
	}
	return ps
}

// differPill marks a tool whose replicas register different definitions.
func differPill(differs []string) pill {
	return pill{
		Text:  "Replicas differ: " + strings.Join(agents.DifferingFields(differs), ", "),
		Class: "warn",
		Title: strings.Join(differs, "; ") + ". Replicas of one agent key should run the same code; give each service its own agent key.",
	}
}

func (d *Dashboard) apiTools(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	rows, err := d.toolRows(r.Context(), p)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []toolRow{}
	}
	writeJSON(w, http.StatusOK, rows)
	return nil
}

// toolPatch changes the Edit dialog's fields that are present.
type toolPatch struct{ apitypes.ToolPatch }

func (p toolPatch) apply(s store.ToolSettings) (store.ToolSettings, error) {
	if p.Description != nil {
		desc := strings.TrimSpace(*p.Description)
		if n := utf8.RuneCountInString(desc); n > store.MaxDescriptionRunes {
			return s, fieldError("description", "at most %d characters; this one has %d", store.MaxDescriptionRunes, n)
		}
		s.Description = desc
	}
	if v := p.CacheSeconds; v != nil {
		if *v < 0 || *v > store.MaxCacheSeconds {
			return s, fieldError("cacheSeconds", "a whole number from 0 (off) to %d, not %d", store.MaxCacheSeconds, *v)
		}
		s.CacheSeconds = *v
	}
	if v := p.Access; v != nil {
		switch *v {
		case "follow", "":
			s.Access = store.AccessFollow
		case store.AccessRead, store.AccessWrite:
			s.Access = *v
		default:
			return s, fieldError("access", "want follow, read or write, not %q", *v)
		}
	}
	if p.Disabled != nil {
		s.Disabled = *p.Disabled
	}
	return s, nil
}

func (d *Dashboard) apiPatchTool(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	name := r.PathValue("tool")
	if !agentproto.ValidName(name) {
		return errorf(http.StatusBadRequest, "%q is not a tool name: 1 to 64 characters from A-Z a-z 0-9 _ -.", name)
	}
	var patch toolPatch
	if err := readJSON(r, &patch); err != nil {
		return err
	}
	cur, err := d.toolSettings(r.Context(), p.ID, name)
	if err != nil {
		return err
	}
	next, err := patch.apply(cur)
	if err != nil {
		return err
	}
	if _, err := d.st.SaveToolSettings(r.Context(), next); err != nil {
		return err
	}
	d.notify(p.ID)
	d.log.Info("tool settings saved", "project", p.Name, "tool", name, "by", principalFrom(r.Context()).name())
	d.audit(r, p.ID, "tool.update", name, toolAuditOf(cur), toolAuditOf(next))
	return d.writeToolRow(w, r, p, name)
}

// toolSettings returns a tool's saved settings, or the defaults.
func (d *Dashboard) toolSettings(ctx context.Context, projectID int64, name string) (store.ToolSettings, error) {
	all, err := d.st.ToolSettings(ctx, projectID)
	if err != nil {
		return store.ToolSettings{}, err
	}
	for _, s := range all {
		if s.Tool == name {
			return s, nil
		}
	}
	return store.ToolSettings{ProjectID: projectID, Tool: name}, nil
}

// writeToolRow answers with a tool's row as it is now; a tool with neither
// an agent nor settings any more answers {"name":…,"registered":false}.
func (d *Dashboard) writeToolRow(w http.ResponseWriter, r *http.Request, p store.Project, name string) error {
	rows, err := d.toolRows(r.Context(), p)
	if err != nil {
		return err
	}
	for _, row := range rows {
		if row.Name == name {
			writeJSON(w, http.StatusOK, row)
			return nil
		}
	}
	writeJSON(w, http.StatusOK, toolRow{Name: name, Pills: []pill{}})
	return nil
}

func (d *Dashboard) apiApprove(w http.ResponseWriter, r *http.Request) error {
	return d.decide(w, r, true)
}

func (d *Dashboard) apiReject(w http.ResponseWriter, r *http.Request) error {
	return d.decide(w, r, false)
}

// decide approves or rejects a tool's current definition. With a
// definitionHash in the body, it refuses if the tool changed since the
// person looked at it.
func (d *Dashboard) decide(w http.ResponseWriter, r *http.Request, approve bool) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	name := r.PathValue("tool")
	var in struct {
		DefinitionHash string `json:"definitionHash"`
	}
	if err := readJSON(r, &in); err != nil {
		return err
	}
	t := d.reg.Snapshot(p.ID).Tools[name]
	if t == nil {
		return errorf(http.StatusNotFound, "No connected agent registers a tool %q in project %q, so there is nothing to approve.", name, p.Name)
	}
	def := access.Definition(t.Def)
	if in.DefinitionHash != "" && in.DefinitionHash != definitionHash(def) {
		return errorf(http.StatusConflict, "Tool %q changed again since you looked at it. Reload and review it before deciding.", name)
	}
	decide, verb := d.st.RejectTool, "rejected"
	if approve {
		decide, verb = d.st.ApproveTool, "approved"
	}
	if _, err := decide(r.Context(), p.ID, name, def); err != nil {
		return err
	}
	d.notify(p.ID)
	d.log.Info("tool definition "+verb, "project", p.Name, "tool", name, "by", principalFrom(r.Context()).name())
	action := "tool.reject"
	if approve {
		action = "tool.approve"
	}
	d.audit(r, p.ID, action, name, nil, map[string]string{"definitionHash": definitionHash(def)})
	return d.writeToolRow(w, r, p, name)
}

// toolAudit is what the audit log keeps of a tool's controls.
type toolAudit struct {
	Description  string `json:"description"`
	CacheSeconds int    `json:"cacheSeconds"`
	Access       string `json:"access"`
	Disabled     bool   `json:"disabled"`
}

func toolAuditOf(ts store.ToolSettings) toolAudit {
	return toolAudit{ts.Description, ts.CacheSeconds, accessName(ts.Access), ts.Disabled}
}
