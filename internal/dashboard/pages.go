package dashboard

import (
	"cmp"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/quickstart"
	"github.com/spacefix/spacefix/internal/store"
)

// keyPlaceholder stands for a client key in set-up snippets; the overview's
// script replaces it with a key made on the spot.
const keyPlaceholder = "YOUR_CLIENT_KEY"

type projectCard struct {
	store.Project
	Tools, Replicas int
}

func (d *Dashboard) projectsPage(r *http.Request, v *view) (string, error) {
	cards := make([]projectCard, 0, len(v.Projects))
	for _, p := range v.Projects {
		cards = append(cards, projectCard{p, len(d.reg.Snapshot(p.ID).ToolList), len(d.reg.Replicas(p.ID))})
	}
	v.Title, v.Data = "Projects", cards
	return "projects", nil
}

type adminData struct {
	Users  []store.User
	Admins int // how many users are admins: the last one is not offered to step down
	Tokens []tokenJSON
	Audit  []auditRow // the newest instance-wide changes
	// IdentityKey is the id of the key identity assertions are signed
	// with; empty when the gateway signs none.
	IdentityKey string
	// IdPs are the trusted identity providers of enterprise sign-in, and
	// Projects the names their people may be provisioned into.
	IdPs     []idpJSON
	Projects []string
}

func (d *Dashboard) adminPage(r *http.Request, v *view) (string, error) {
	var data adminData
	var err error
	if data.Users, err = d.st.Users(r.Context()); err != nil {
		return "", err
	}
	for _, u := range data.Users {
		if u.Admin {
			data.Admins++
		}
	}
	ts, err := d.st.APITokens(r.Context())
	if err != nil {
		return "", err
	}
	names, err := d.projectNames(r)
	if err != nil {
		return "", err
	}
	for _, t := range ts {
		data.Tokens = append(data.Tokens, tokenOut(t, names[t.ProjectID]))
	}
	if err := d.idpsFor(r, &data, names); err != nil {
		return "", err
	}
	es, err := d.st.Audit(r.Context(), store.AuditFilter{ProjectID: 0, Limit: 20})
	if err != nil {
		return "", err
	}
	for _, e := range es {
		data.Audit = append(data.Audit, auditRow{auditJSON{e.ID, e.At, e.Actor, e.Addr, e.Action, e.Target, e.Before, e.After}, fieldChanges(e.Before, e.After)})
	}
	if d.identity != nil {
		data.IdentityKey = d.identity.KeyID()
	}
	v.Title, v.Data = "Users and tokens", data
	return "admin", nil
}

// snippet is one client's copy-ready set-up.
type snippet struct {
	Client, Where, Text string
}

func snippets(project, mcpURL string) []snippet {
	name := "spacefix"
	if project != "default" {
		name = "spacefix-" + project
	}
	auth := "Bearer " + keyPlaceholder
	return []snippet{
		{"Claude Code", "in a terminal", quickstart.ClaudeAdd(name, mcpURL, auth)},
		{"Codex", "~/.codex/config.toml", fmt.Sprintf("[mcp_servers.%s]\nurl = %q\nhttp_headers = { Authorization = %q }", name, mcpURL, auth)},
		{"Cursor", ".cursor/mcp.json", fmt.Sprintf("{\n  \"mcpServers\": {\n    %q: {\n      \"url\": %q,\n      \"headers\": { \"Authorization\": %q }\n    }\n  }\n}", name, mcpURL, auth)},
		{"VS Code", ".vscode/mcp.json", fmt.Sprintf("{\n  \"servers\": {\n    %q: {\n      \"type\": \"http\",\n      \"url\": %q,\n      \"headers\": { \"Authorization\": %q }\n    }\n  }\n}", name, mcpURL, auth)},
		{"Claude, ChatGPT and other OAuth clients", remoteWhere(mcpURL), mcpURL},
		{"MCP Inspector", "in a terminal (Node.js 20 or later)", quickstart.InspectorList(mcpURL, auth)},
		{"MCP Inspector, call a tool", "in a terminal, with the example agent running", quickstart.InspectorCall(mcpURL, auth)},
	}
}

type overviewData struct {
	Snippets                 []snippet
	Tools, Replicas, Pending int
	CallsToday               int64
	Settings                 settingsJSON
}

func (d *Dashboard) overviewPage(r *http.Request, v *view) (string, error) {
	rows, err := d.toolRows(r.Context(), *v.Project)
	if err != nil {
		return "", err
	}
	data := overviewData{Snippets: snippets(v.Project.Name, v.MCPURL), Replicas: len(d.reg.Replicas(v.Project.ID)), Settings: settingsOut(v.Project.Settings)}
	for _, row := range rows {
		if row.Registered {
			data.Tools++
		}
		if row.Pending() {
			data.Pending++
		}
	}
	today := time.Now().UTC()
	us, err := d.usage(r.Context(), v.Project.ID, today, today)
	if err != nil {
		return "", err
	}
	data.CallsToday = us.Total
	v.Title, v.Tab, v.Data = v.Project.Name, "overview", data
	return "overview", nil
}

// toolsPageSize is how many rows the Tools page shows at first, and how
// many more each "Show more" adds: a project may have a thousand tools.
const toolsPageSize = 100

type toolsData struct {
	Rows      []toolLine
	ConsentOn bool
	ByAgent   bool // sorted and grouped by agent, not by name
	Total     int
	PageSize  int
}

// toolLine is a row of the Tools table with what the page's filter and
// grouping need.
type toolLine struct {
	toolRow
	// Group names the row's agent: the display name and, since two agents
	// may share one, the key's label (or ID). GroupStart is set on the
	// first row of a group when the page is grouped by agent.
	Group      string `json:"-"`
	GroupStart bool   `json:"-"`
	Hidden     bool   `json:"-"` // beyond the first page
}

// remoteWhere says how a remote connector (Claude, ChatGPT) gets to the
// gateway: they connect from their own servers, which cannot reach a
// loopback address, so such a gateway needs --public-url first.
func remoteWhere(mcpURL string) string {
	const where = "as a remote connector: paste this URL, then sign in with your dashboard account"
	u, err := url.Parse(mcpURL)
	if err != nil {
		return where
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return where
	}
	return "as a remote connector, once the gateway runs with --public-url https://HOST (an https URL that reaches it): they connect from their own servers and cannot reach " + u.Host + "; paste https://HOST/mcp, then sign in with your dashboard account"
}

// toolEdit is what the Edit dialog starts from: only that, since a page
// may carry a thousand of them.
type toolEdit struct {
	Name                  string           `json:"name"`
	Registered            bool             `json:"registered"`
	RegisteredDescription string           `json:"registeredDescription"`
	Settings              toolSettingsJSON `json:"settings"`
	// Declared says what the agent declares, under Reads or writes.
	Declared string `json:"declared"`
}

// Edit is the row's data for the Edit dialog.
func (l toolLine) Edit() toolEdit {
	return toolEdit{l.Name, l.Registered, l.RegisteredDescription, l.Settings, declared(l.toolRow)}
}

// declared is the hint under the Edit dialog's Reads or writes: what the
// agent declares, told apart from what it leaves out.
func declared(t toolRow) string {
	switch {
	case !t.Registered:
		return "No connected agent registers this tool, so what it declares is unknown."
	case t.DeclaredReadOnly:
		return "The agent declares this tool a read (readOnlyHint: true)."
	case t.ReadOnlyHintDeclared:
		return "The agent declares this tool a write (readOnlyHint: false)."
	}
	return "The agent declares no readOnlyHint, so the tool counts as a write."
}

func (d *Dashboard) toolsPage(r *http.Request, v *view) (string, error) {
	rows, err := d.toolRows(r.Context(), *v.Project)
	if err != nil {
		return "", err
	}
	byAgent := r.URL.Query().Get("sort") == "agent"
	data := toolsData{ConsentOn: v.Project.Settings.ApproveToolChanges, ByAgent: byAgent, Total: len(rows), PageSize: toolsPageSize}
	data.Rows = toolLines(rows, byAgent)
	v.Title, v.Tab, v.Data = "Tools · "+v.Project.Name, "tools", data
	return "tools", nil
}

// toolLines orders rows by name (as listed) or by agent, tools no agent
// registers last, and marks what is beyond the first page.
func toolLines(rows []toolRow, byAgent bool) []toolLine {
	out := make([]toolLine, 0, len(rows))
	for _, row := range rows {
		group := "Not registered"
		if row.Registered {
			group = row.Agent + " · key " + cmp.Or(row.AgentKeyName, row.AgentKey)
		}
		out = append(out, toolLine{toolRow: row, Group: group})
	}
	if byAgent {
		slices.SortStableFunc(out, func(a, b toolLine) int {
			if a.Registered != b.Registered { // registered first
				if a.Registered {
					return -1
				}
				return 1
			}
			return cmp.Or(cmp.Compare(strings.ToLower(a.Agent), strings.ToLower(b.Agent)), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Name, b.Name))
		})
	}
	for i := range out {
		out[i].GroupStart = byAgent && (i == 0 || out[i-1].Group != out[i].Group)
		out[i].Hidden = i >= toolsPageSize
	}
	return out
}

func (d *Dashboard) agentsPage(r *http.Request, v *view) (string, error) {
	data, err := d.agentsOf(r.Context(), v.Project.ID)
	if err != nil {
		return "", err
	}
	v.Title, v.Tab, v.Data = "Agents · "+v.Project.Name, "agents", data
	return "agents", nil
}

func (d *Dashboard) keysPage(r *http.Request, v *view) (string, error) {
	ks, err := d.st.Keys(r.Context(), v.Project.ID)
	if err != nil {
		return "", err
	}
	var clients []keyJSON
	for _, k := range ks {
		if k.Kind == store.KindClient {
			clients = append(clients, keyOut(k))
		}
	}
	slices.Reverse(clients) // newest first
	apps, err := d.connectedApps(r, v.Project.ID)
	if err != nil {
		return "", err
	}
	v.Title, v.Tab, v.Data = "Keys · "+v.Project.Name, "keys", keysData{Keys: clients, Apps: apps, OAuth: d.oauth != nil}
	return "keys", nil
}

type keysData struct {
	Keys  []keyJSON
	Apps  []appJSON // connected OAuth apps
	OAuth bool      // OAuth sign-in is on
}

type logsData struct {
	Calls                []callJSON
	Tool, Outcome, Key   string
	ToolNames            []string
	Keys                 []keyChoice
	Outcomes             []string
	StreamURL, LatestKey string
}

func (d *Dashboard) logsPage(r *http.Request, v *view) (string, error) {
	f, err := callFilter(r, v.Project.ID)
	if err != nil {
		return "", err
	}
	cs, err := d.st.Calls(r.Context(), f)
	if err != nil {
		return "", err
	}
	data := logsData{Tool: f.Name, Outcome: f.Outcome, Key: f.KeyID, Calls: make([]callJSON, 0, len(cs)),
		Outcomes: []string{store.OutcomeOK, store.OutcomeError, store.OutcomeTimeout, store.OutcomeCancelled, store.OutcomeDisconnected}}
	names, err := d.keyNames(r.Context(), v.Project.ID)
	if err != nil {
		return "", err
	}
	d.nameDisconnectedApps(r.Context(), names, cs)
	for _, c := range cs {
		data.Calls = append(data.Calls, callOut(c, names))
	}
	if data.ToolNames, data.Keys, err = d.filterChoices(r, v.Project.ID); err != nil {
		return "", err
	}
	data.StreamURL = fmt.Sprintf("/api/projects/%s/calls/stream?%s", v.Project.Name, r.URL.Query().Encode())
	v.Title, v.Tab, v.Data = "Logs · "+v.Project.Name, "logs", data
	return "logs", nil
}

// keyChoice is a client key in the Logs filter: its label, by its ID.
type keyChoice struct{ ID, Label string }

// filterChoices are the tool names and client keys the Logs filters offer.
func (d *Dashboard) filterChoices(r *http.Request, projectID int64) (tools []string, keys []keyChoice, err error) {
	seen := map[string]bool{}
	snap := d.reg.Snapshot(projectID)
	for _, t := range snap.ToolList {
		tools, seen[t.Name] = append(tools, t.Name), true
	}
	for _, res := range snap.ResourceList {
		tools, seen[res.Def.URI] = append(tools, res.Def.URI), true
	}
	for _, p := range snap.PromptList {
		tools, seen[p.Name] = append(tools, p.Name), true
	}
	us, err := d.usage(r.Context(), projectID, time.Now().AddDate(0, 0, -30), time.Now())
	if err != nil {
		return nil, nil, err
	}
	for _, u := range us.Tools {
		if !seen[u.Name] {
			tools, seen[u.Name] = append(tools, u.Name), true
		}
	}
	slices.Sort(tools)
	ks, err := d.st.Keys(r.Context(), projectID)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range ks {
		if k.Kind == store.KindClient {
			keys = append(keys, keyChoice{ID: k.ID, Label: cmp.Or(k.Name, k.ID)})
		}
	}
	return tools, keys, nil
}

type usageData struct {
	usageJSON
	Chart template.HTML
}

func (d *Dashboard) usagePage(r *http.Request, v *view) (string, error) {
	from, to, err := usageRange(r)
	if err != nil {
		return "", err
	}
	u, err := d.usage(r.Context(), v.Project.ID, from, to)
	if err != nil {
		return "", err
	}
	v.Title, v.Tab, v.Data = "Usage · "+v.Project.Name, "usage", usageData{u, usageChart(u.Days)}
	return "usage", nil
}

type settingsData struct {
	settingsJSON
	DefaultTools, DefaultSchema, DefaultResources, DefaultRegister int
	DefaultArguments                                               int
}

func (d *Dashboard) settingsPage(r *http.Request, v *view) (string, error) {
	v.Title, v.Tab = "Settings · "+v.Project.Name, "settings"
	v.Data = settingsData{settingsOut(v.Project.Settings), defaultLimits.MaxTools, defaultLimits.MaxSchema, defaultLimits.MaxResources, defaultLimits.MaxRegister, store.DefaultMaxArgumentBytes}
	return "settings", nil
}

type membersData struct {
	Members []store.Member
	Invites []inviteJSON // open invites to the project; owners only
	Owners  []string     // their emails, for the read-only line
	Roles   []store.Role
	Tokens  []tokenJSON // the project's API tokens; owners only
}

func (d *Dashboard) membersPage(r *http.Request, v *view) (string, error) {
	ms, err := d.st.Members(r.Context(), v.Project.ID)
	if err != nil {
		return "", err
	}
	data := membersData{Members: ms, Roles: store.Roles}
	for _, m := range ms {
		if m.Role == store.RoleOwner {
			data.Owners = append(data.Owners, m.Email)
		}
	}
	if v.Can("owner") {
		if data.Invites, err = d.invites(r, v.Project.ID); err != nil {
			return "", err
		}
		ts, err := d.projectTokens(r, v.Project.ID)
		if err != nil {
			return "", err
		}
		for _, t := range slices.Backward(ts) {
			data.Tokens = append(data.Tokens, tokenOut(t, v.Project.Name))
		}
	}
	v.Title, v.Tab, v.Data = "Members · "+v.Project.Name, "members", data
	return "members", nil
}

type auditData struct {
	Rows          []auditRow
	NextBefore    int64
	Action, Actor string
	Actions       []string // the filter's choices
	Retention     string
}

func (d *Dashboard) auditPage(r *http.Request, v *view) (string, error) {
	page, err := d.readAudit(r, v.Project.ID)
	if err != nil {
		return "", err
	}
	v.Title, v.Tab = "Audit log · "+v.Project.Name, "audit"
	rows := make([]auditRow, 0, len(page.Entries))
	for _, e := range page.Entries {
		rows = append(rows, auditRow{e, fieldChanges(e.Before, e.After)})
	}
	v.Data = auditData{
		Rows: rows, NextBefore: page.NextBefore, Action: r.URL.Query().Get("action"), Actor: r.URL.Query().Get("actor"),
		Actions: AuditActions, Retention: d.auditRetention(),
	}
	return "audit", nil
}
