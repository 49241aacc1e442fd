package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/store"
)

type toolRow struct {
	Name                  string
	Registered            bool
	Description           string
	RegisteredDescription string
	DeclaredReadOnly      bool
	ReadOnlyHintDeclared  bool
	ReadOnly              bool
	Consent               string
	DefinitionHash        string
	Settings              struct {
		Description  string
		CacheSeconds int
		Access       string
		Disabled     bool
	}
	Pills []struct{ Text string }
}

func (r toolRow) pills() []string {
	var out []string
	for _, p := range r.Pills {
		out = append(out, p.Text)
	}
	return out
}

func (c *client) tools() map[string]toolRow {
	c.t.Helper()
	var rows []toolRow
	c.mustCall(http.StatusOK, "GET", "/api/projects/shop/tools", nil, &rows)
	out := make(map[string]toolRow)
	for _, r := range rows {
		out[r.Name] = r
	}
	return out
}

func TestEditTool(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	e.connect("r-1", "", tool("get_order", "Look up one order.", true), tool("create_order", "Create an order.", false))
	e.notified.take()

	var row toolRow
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/tools/get_order",
		map[string]any{"description": "  Look up one order by id.  ", "cacheSeconds": 30, "access": "write", "disabled": true}, &row)
	want := []string{"Edited", "Cached 30s", "Treated as write", "Disabled"}
	if diff := cmp.Diff(want, row.pills()); diff != "" {
		t.Errorf("pills after edit (-want +got):\n%s", diff)
	}
	if row.Description != "Look up one order by id." || row.ReadOnly || !row.DeclaredReadOnly {
		t.Errorf("row = %+v; want the trimmed override, counted as a write though the agent declares a read", row)
	}
	if got := e.notified.take(); !slices.Equal(got, []int64{e.project.ID}) {
		t.Errorf("SettingsChanged calls = %v, want one for project %d", got, e.project.ID)
	}

	// A PATCH changes only the fields it names.
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/tools/get_order", map[string]any{"disabled": false}, &row)
	if diff := cmp.Diff([]string{"Edited", "Cached 30s", "Treated as write"}, row.pills()); diff != "" {
		t.Errorf("pills after re-enabling (-want +got):\n%s", diff)
	}
	// Back to defaults removes the saved settings.
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/tools/get_order",
		map[string]any{"description": "", "cacheSeconds": 0, "access": "follow"}, &row)
	if len(row.Pills) != 0 || row.Description != "Look up one order." {
		t.Errorf("row after reset = %+v; want no pills and the registered description", row)
	}
	if saved, _ := e.st.ToolSettings(t.Context(), e.project.ID); len(saved) != 0 {
		t.Errorf("settings after reset = %+v, want none saved", saved)
	}
}

func TestEditToolRefusesBadValues(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	for _, tt := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"cacheSeconds": 3601}, "cacheSeconds: a whole number from 0 (off) to 3600, not 3601"},
		{map[string]any{"cacheSeconds": -1}, "cacheSeconds"},
		{map[string]any{"access": "readonly"}, `access: want follow, read or write, not "readonly"`},
		{map[string]any{"description": strings.Repeat("é", 1001)}, "description: at most 1000 characters; this one has 1001"},
		{map[string]any{"disabld": true}, `unknown field "disabld"`},
	} {
		res := c.call("PATCH", "/api/projects/shop/tools/get_order", tt.body, nil)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(res.apiError(), tt.want) {
			t.Errorf("PATCH %v: %d %q, want 400 with %q", tt.body, res.StatusCode, res.apiError(), tt.want)
		}
	}
	if res := c.call("PATCH", "/api/projects/shop/tools/bad%20name", map[string]any{"disabled": true}, nil); res.StatusCode != http.StatusBadRequest {
		t.Errorf("PATCH of an invalid tool name: %d, want 400", res.StatusCode)
	}
	if res := c.call("PATCH", "/api/projects/nope/tools/x", map[string]any{"disabled": true}, nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("PATCH in an unknown project: %d, want 404", res.StatusCode)
	}
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/tools/get_order", map[string]any{"description": strings.Repeat("é", 1000)}, nil)
	if e.notified.take() == nil {
		t.Error("no SettingsChanged after a save")
	}
}

func TestNotRegisteredRows(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	rep := e.connect("r-1", "", tool("get_order", "Look up.", true))
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/tools/get_order", map[string]any{"cacheSeconds": 30}, nil)
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/tools/old_tool", map[string]any{"disabled": true}, nil)
	rows := c.tools()
	if r := rows["old_tool"]; r.Registered || !slices.Contains(r.pills(), "Not registered") || !slices.Contains(r.pills(), "Disabled") {
		t.Errorf("old_tool = %+v; want Not registered and Disabled", r)
	}
	e.reg.Remove(rep) // within the grace period: still listed, still editable
	res := c.get("/p/shop/tools")
	for _, want := range []string{"old_tool", "Not registered", "Cached 30s", `class="dim"`} {
		if !strings.Contains(res.text(), want) {
			t.Errorf("Tools page lacks %q", want)
		}
	}
}

func TestCommunityPrefix(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	e.connect("r-1", "", tool("run_tests", "Runs the test suite.", false))
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/agent-keys/"+e.agentKey.ID,
		map[string]any{"displayName": "Test radar", "author": "Ada", "community": true}, nil)
	if got := e.notified.take(); len(got) == 0 {
		t.Error("no SettingsChanged after marking a key community")
	}
	want := `[Custom agent "Test radar" by Ada, community code] Runs the test suite.`
	if got := c.tools()["run_tests"].Description; got != want {
		t.Errorf("description = %q, want %q", got, want)
	}
	if k, _ := e.st.Key(t.Context(), e.agentKey.ID); !k.Community || k.DisplayName != "Test radar" {
		t.Errorf("stored key = %+v", k)
	}
}

func TestApproveToolChanges(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	first := e.connect("r-1", "", tool("get_order", "Look up one order.", true))
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/settings", map[string]any{"approveToolChanges": true}, nil)
	if r := c.tools()["get_order"]; r.Consent != "" || len(r.Pills) != 0 {
		t.Fatalf("after switching consent on, get_order = %+v; want the registered definition approved", r)
	}

	// A new replica registers a changed description and a new tool.
	e.reg.Remove(first)
	e.connect("r-2", "", tool("get_order", "Look up one order by its id.", true), tool("drop_orders", "Delete every order.", false))
	rows := c.tools()
	changed, added := rows["get_order"], rows["drop_orders"]
	if changed.Consent != "pending-change" || changed.Description != "Look up one order." || !slices.Contains(changed.pills(), "Pending") {
		t.Errorf("changed tool = %+v; want pending, models still reading the approved description", changed)
	}
	if added.Consent != "pending-new" {
		t.Errorf("new tool consent = %q, want pending-new", added.Consent)
	}

	stale := map[string]string{"definitionHash": "0000000000000000"}
	if res := c.call("POST", "/api/projects/shop/tools/get_order/approve", stale, nil); res.StatusCode != http.StatusConflict {
		t.Errorf("approve with a stale hash: %d, want 409", res.StatusCode)
	}
	e.notified.take()
	var row toolRow
	c.mustCall(http.StatusOK, "POST", "/api/projects/shop/tools/get_order/approve", map[string]string{"definitionHash": changed.DefinitionHash}, &row)
	if row.Consent != "" || row.Description != "Look up one order by its id." {
		t.Errorf("after approve = %+v; want approved, the new description shown", row)
	}
	c.mustCall(http.StatusOK, "POST", "/api/projects/shop/tools/drop_orders/reject", nil, &row)
	if row.Consent != "rejected-new" || slices.Contains(row.pills(), "Pending") {
		t.Errorf("after reject = %+v; want rejected and no longer pending", row)
	}
	if got := e.notified.take(); len(got) != 2 {
		t.Errorf("SettingsChanged calls = %v, want one per decision", got)
	}
	as, _ := e.st.Approvals(t.Context(), e.project.ID)
	if len(as) != 2 || as[0].Tool != "drop_orders" || as[0].Definition != nil || as[1].Tool != "get_order" {
		t.Errorf("stored approvals = %+v", as)
	}
}

func TestSettings(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	var p struct {
		MCPURL   string `json:"mcpUrl"`
		Settings map[string]any
	}
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/settings", map[string]any{
		"callWaitSeconds": 5, "clientAccess": "read", "rateLimitPerMinute": 60, "maxTools": 10,
		"longestTaskMinutes": 120, "keepTaskResultsHours": 168, "repeatWindowHours": 720,
	}, &p)
	got, _ := e.st.Project(t.Context(), "shop")
	want := store.ProjectSettings{CallWaitMs: 5000, ReadOnlyClients: true, RateLimitPerMinute: 60, MaxTools: 10,
		LongestTaskMs: 2 * 3600_000, TaskTTLMs: 7 * 24 * 3600_000, IdempotencyWindowMs: 720 * 3600_000}
	if got.Settings != want {
		t.Errorf("stored settings = %+v, want %+v", got.Settings, want)
	}
	if p.Settings["callWaitSeconds"] != 5.0 || p.Settings["clientAccess"] != "read" || !strings.HasSuffix(p.MCPURL, "/mcp") ||
		p.Settings["longestTaskMinutes"] != 120.0 || p.Settings["keepTaskResultsHours"] != 168.0 || p.Settings["repeatWindowHours"] != 720.0 {
		t.Errorf("answer = %+v", p)
	}
	if len(e.notified.take()) == 0 {
		t.Error("no SettingsChanged after saving settings")
	}
	for body, want := range map[string]string{
		`{"callWaitSeconds":31}`:       "callWaitSeconds: the call wait is 1 to 30 seconds, not 31",
		`{"callWaitSeconds":0}`:        "callWaitSeconds",
		`{"clientAccess":"write"}`:     `clientAccess: want "read" or "readwrite"`,
		`{"rateLimitPerMinute":-1}`:    "rateLimitPerMinute",
		`{"maxSchemaBytes":99999999}`:  "maxSchemaBytes",
		`{"longestTaskMinutes":1441}`:  "longestTaskMinutes: the longest task is 1 to 1440 minutes (24 hours), not 1441",
		`{"longestTaskMinutes":0}`:     "longestTaskMinutes: the longest task is 1 to 1440 minutes",
		`{"keepTaskResultsHours":169}`: "keepTaskResultsHours: task results are kept 1 to 168 hours (7 days), not 169",
		`{"repeatWindowHours":0}`:      "repeatWindowHours: request ids are kept 1 to 720 hours (30 days), not 0",
	} {
		var raw json.RawMessage = []byte(body)
		res := c.call("PATCH", "/api/projects/shop/settings", raw, nil)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(res.apiError(), want) {
			t.Errorf("PATCH %s: %d %q, want 400 with %q", body, res.StatusCode, res.apiError(), want)
		}
	}
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/settings", map[string]any{"callWaitSeconds": 30, "clientAccess": "readwrite", "longestTaskMinutes": 60}, nil)
	if got, _ := e.st.Project(t.Context(), "shop"); got.Settings.CallWaitMs != 0 || got.Settings.ReadOnlyClients || got.Settings.RateLimitPerMinute != 60 ||
		got.Settings.LongestTaskMs != 0 || got.Settings.TaskTTLMs != 7*24*3600_000 {
		t.Errorf("settings after a partial patch = %+v; want the default wait and longest task, read-write, the rate limit and the task TTL kept", got.Settings)
	}
}

func TestReplicaDisable(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	rep := e.connect("r-1", "eu-1", tool("get_order", "Look up.", true))
	other := e.connect("r-2", "us-1", tool("get_order", "Look up.", true))
	var agents struct {
		Keys     []struct{ ID string }
		Replicas []struct {
			ID, Instance, Version string
			Disabled              bool
		}
	}
	c.mustCall(http.StatusOK, "GET", "/api/projects/shop/agents", nil, &agents)
	if len(agents.Replicas) != 2 || agents.Replicas[0].Instance != "eu-1" || agents.Replicas[0].Version != "1.4.2" {
		t.Fatalf("agents = %+v", agents)
	}
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/replicas/r-1", map[string]any{"disabled": true}, nil)
	if !rep.Disabled() || other.Disabled() {
		t.Errorf("after disabling r-1: r-1 %v, r-2 %v", rep.Disabled(), other.Disabled())
	}
	if reps := e.reg.Snapshot(e.project.ID).Tools["get_order"].Replicas; len(reps) != 1 || reps[0] != other {
		t.Errorf("get_order is served by %v, want only r-2", reps)
	}
	if res := c.call("PATCH", "/api/projects/shop/replicas/r-9", map[string]any{"disabled": true}, nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("unknown replica: %d, want 404", res.StatusCode)
	}
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/replicas/r-1", map[string]any{"disabled": false}, nil)
	if rep.Disabled() {
		t.Error("r-1 still disabled after enabling")
	}
}

func TestClientKeys(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	var made struct {
		Key struct {
			ID       string
			ReadOnly bool
			Tools    []string
		}
		Secret string
	}
	c.mustCall(http.StatusCreated, "POST", "/api/projects/shop/keys",
		map[string]any{"kind": "client", "name": "ci", "readOnly": true, "tools": []string{"get_order", " search_orders "}}, &made)
	if !strings.HasPrefix(made.Secret, "sfx_client_") || !made.Key.ReadOnly || !slices.Equal(made.Key.Tools, []string{"get_order", "search_orders"}) {
		t.Fatalf("created key = %+v", made)
	}
	list := c.get("/api/projects/shop/keys")
	if strings.Contains(list.text(), made.Secret) {
		t.Error("the key list shows a secret")
	}
	if page := c.get("/p/shop/keys"); strings.Contains(page.text(), made.Secret) || !strings.Contains(page.text(), made.Key.ID) {
		t.Error("the Keys page shows a secret, or lacks the key")
	}
	if res := c.call("POST", "/api/projects/shop/keys", map[string]any{"kind": "client", "community": true}, nil); res.StatusCode != http.StatusBadRequest {
		t.Errorf("client key with agent metadata: %d, want 400", res.StatusCode)
	}
	e.notified.take()
	c.mustCall(http.StatusOK, "POST", "/api/projects/shop/keys/"+made.Key.ID+"/revoke", nil, nil)
	if k, _ := e.st.Key(t.Context(), made.Key.ID); !k.Revoked() {
		t.Error("key not revoked")
	}
	e.notified.mu.Lock()
	heard := slices.Clone(e.notified.kinds)
	e.notified.mu.Unlock()
	if want := []changes.Change{{Project: e.project.ID, Kind: changes.KeyRevoked, Key: made.Key.ID}}; !reflect.DeepEqual(heard, want) {
		t.Errorf("changes after revoking a key = %+v, want %+v", heard, want)
	}
	e.notified.take()
	if _, err := e.st.CreateProject(t.Context(), "other"); err != nil {
		t.Fatal(err)
	}
	if res := c.call("POST", "/api/projects/other/keys/"+e.agentKey.ID+"/revoke", nil, nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("revoking another project's key: %d, want 404", res.StatusCode)
	}
}

func TestCallsUsageAndTail(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	now := time.Now().UTC()
	calls := []store.Call{
		{Time: now.Add(-time.Minute), ProjectID: e.project.ID, Kind: "tool", Name: "get_order", KeyID: "key_a", Outcome: store.OutcomeOK, Billable: true, Progress: []string{"fetching"}},
		{Time: now, ProjectID: e.project.ID, Kind: "tool", Name: "create_order", KeyID: "key_b", Outcome: store.OutcomeError, Error: "No such customer.", Billable: true},
		{Time: now.AddDate(0, 0, -1), ProjectID: e.project.ID, Kind: "resource", Name: "orders://open", KeyID: "key_a", Outcome: store.OutcomeOK, Billable: true},
	}
	if err := e.st.AppendCalls(t.Context(), calls); err != nil {
		t.Fatal(err)
	}
	var got []struct{ Name, Outcome, Error string }
	c.mustCall(http.StatusOK, "GET", "/api/projects/shop/calls?outcome=error", nil, &got)
	if len(got) != 1 || got[0].Error != "No such customer." {
		t.Errorf("calls?outcome=error = %+v", got)
	}
	c.mustCall(http.StatusOK, "GET", "/api/projects/shop/calls?key=key_a&tool=get_order", nil, &got)
	if len(got) != 1 || got[0].Name != "get_order" {
		t.Errorf("calls?key=key_a&tool=get_order = %+v", got)
	}

	var u struct {
		Total int64
		Days  []struct {
			Day   string
			Calls int64
		}
		Tools []struct {
			Name  string
			Calls int64
		}
	}
	c.mustCall(http.StatusOK, "GET", "/api/projects/shop/usage", nil, &u)
	if u.Total != 3 || len(u.Days) != 14 || u.Days[13].Calls != 2 || len(u.Tools) != 3 {
		t.Errorf("usage = %+v; want 3 calls over 14 days, 2 today", u)
	}
	if res := c.call("GET", "/api/projects/shop/usage?from=2026-02-01&to=2026-01-01", nil, nil); res.StatusCode != http.StatusBadRequest {
		t.Errorf("backwards range: %d, want 400", res.StatusCode)
	}
	page := c.get("/p/shop/usage")
	if !strings.Contains(page.text(), "<svg") || !strings.Contains(page.text(), "3 billable calls") {
		t.Error("Usage page lacks the chart or the total")
	}

	// The live tail sends records written after it started.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/api/projects/shop/calls/stream?tool=get_order", nil)
	res, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("stream Content-Type = %q", ct)
	}
	if err := e.st.AppendCalls(t.Context(), []store.Call{
		{Time: now, ProjectID: e.project.ID, Kind: "tool", Name: "create_order", Outcome: store.OutcomeOK},
		{Time: now, ProjectID: e.project.ID, Kind: "tool", Name: "get_order", KeyID: "key_tail", Outcome: store.OutcomeOK},
	}); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "data: ") {
			if !strings.Contains(line, `"key": "key_tail"`) && !strings.Contains(line, `"key":"key_tail"`) {
				t.Fatalf("tail sent %s, want only the new get_order call", line)
			}
			return
		}
	}
	t.Fatalf("tail ended without a record: %v", sc.Err())
}

func TestPagesRender(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	e.connect("r-1", "eu-1", tool("get_order", "Look up one order.", true))
	c.mustCall(http.StatusCreated, "POST", "/api/tokens", map[string]any{"name": "ci"}, nil)
	for path, want := range map[string]string{
		"/":                "New project",
		"/admin":           `<tr data-audit="token.create">`,
		"/p/shop/members":  "Add member",
		"/p/shop/audit":    "Audit log",
		"/p/shop":          `<span class="tok">claude</span> <span class="tok">mcp</span> <span class="tok">add</span> <span class="tok">--transport</span> <span class="tok">http</span> <span class="tok">spacefix-shop</span>`,
		"/p/shop/tools":    "Description models see",
		"/p/shop/agents":   "r-1",
		"/p/shop/keys":     "New client key",
		"/p/shop/logs":     "data-live",
		"/p/shop/usage":    "Per tool",
		"/p/shop/settings": "Approve tool changes",
	} {
		res := c.get(path)
		if res.StatusCode != http.StatusOK || !strings.Contains(res.text(), want) {
			t.Errorf("GET %s: %d, want 200 containing %q", path, res.StatusCode, want)
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
	}
	if res := c.get("/p/nope/tools"); res.StatusCode != http.StatusNotFound || !strings.Contains(res.text(), `There is no project &#34;nope&#34;`) {
		t.Errorf("unknown project: %d", res.StatusCode)
	}
	if res := c.get("/static/app.js"); res.StatusCode != http.StatusOK {
		t.Errorf("static app.js: %d", res.StatusCode)
	}
}

// Two services on one agent key: the Agents and Tools pages say so.
func TestReplicasDifferShown(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	e.connect("r-1", "", tool("get_order", "Look up.", true))
	e.connect("r-2", "", tool("get_order", "Look up.", false))
	type differ struct {
		Tool, Fields string
		Differences  []string
	}
	var agents struct {
		Keys []struct {
			ID      string
			Differs []differ
		}
	}
	c.mustCall(http.StatusOK, "GET", "/api/projects/shop/agents", nil, &agents)
	want := []differ{{Tool: "get_order", Fields: "readOnlyHint", Differences: []string{"annotations.readOnlyHint: unset vs true"}}}
	if len(agents.Keys) != 1 {
		t.Fatalf("agent keys = %+v, want one", agents.Keys)
	}
	if diff := cmp.Diff(want, agents.Keys[0].Differs); diff != "" {
		t.Errorf("differs (-want +got):\n%s", diff)
	}
	if r := c.tools()["get_order"]; !slices.Contains(r.pills(), "Replicas differ: readOnlyHint") {
		t.Errorf("get_order pills = %v, want Replicas differ: readOnlyHint", r.pills())
	}
	for path, wants := range map[string][]string{
		"/p/shop/agents": {"Replicas differ: get_order readOnlyHint", "annotations.readOnlyHint: unset vs true", "spacefix keys create --kind agent"},
		"/p/shop/tools":  {"Replicas differ: readOnlyHint", `title="annotations.readOnlyHint: unset vs true.`},
	} {
		page := c.get(path).text()
		for _, w := range wants {
			if !strings.Contains(page, w) {
				t.Errorf("%s lacks %q", path, w)
			}
		}
	}
}

func TestArgsSetting(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	var p struct {
		Settings map[string]any
	}
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/settings", map[string]any{"maxArgumentBytes": 2048}, &p)
	if got, _ := e.st.Project(t.Context(), "shop"); got.Settings.MaxArgumentBytes != 2048 || got.Settings.ArgumentLimit() != 2048 {
		t.Errorf("stored settings = %+v, want maxArgumentBytes 2048", got.Settings)
	}
	if p.Settings["maxArgumentBytes"] != 2048.0 {
		t.Errorf("answer settings = %+v, want maxArgumentBytes 2048", p.Settings)
	}
	for body, want := range map[string]string{
		`{"maxArgumentBytes":100}`:      "maxArgumentBytes: want 0 (the default, 1048576) or 1024 to 33554432, not 100",
		`{"maxArgumentBytes":40000000}`: "maxArgumentBytes: want 0 (the default) to 33554432, not 40000000",
	} {
		var raw json.RawMessage = []byte(body)
		res := c.call("PATCH", "/api/projects/shop/settings", raw, nil)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(res.apiError(), want) {
			t.Errorf("PATCH %s: %d %q, want 400 with %q", body, res.StatusCode, res.apiError(), want)
		}
	}
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/settings", map[string]any{"maxArgumentBytes": 0}, nil)
	if got, _ := e.st.Project(t.Context(), "shop"); got.Settings.ArgumentLimit() != store.DefaultMaxArgumentBytes {
		t.Errorf("limit after 0 = %d, want the default", got.Settings.ArgumentLimit())
	}
}

// A replica run by spacefix bridge shows as a bridged MCP server: the
// server's own name and version, the transport and the command, on the
// agents page and in the API.
func TestBridgedReplicaShown(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	b := &agentproto.Bridge{Transport: "stdio", Target: "npx -y @modelcontextprotocol/server-filesystem /srv", Server: "secure-filesystem-server", ServerVersion: "0.2.0"}
	e.connectBridge("r-b", b, tool("files__read_text_file", "Read a file.", true))
	var agents struct {
		Replicas []struct {
			ID     string
			Bridge *agentproto.Bridge
		}
	}
	c.mustCall(http.StatusOK, "GET", "/api/projects/shop/agents", nil, &agents)
	if len(agents.Replicas) != 1 || agents.Replicas[0].Bridge == nil || *agents.Replicas[0].Bridge != *b {
		t.Fatalf("agents API = %+v, want the bridge %+v", agents.Replicas, b)
	}
	page := c.get("/p/shop/agents").text()
	for _, want := range []string{"Bridged MCP server", "secure-filesystem-server 0.2.0", "stdio: <code class=\"wrap\">npx -y @modelcontextprotocol/server-filesystem /srv</code>"} {
		if !strings.Contains(page, want) {
			t.Errorf("agents page lacks %q", want)
		}
	}
}
