package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// TestLogsNameApps: a call made with an OAuth token shows its app's name
// and the person who connected it, not the raw app_… id, on the Logs page
// and in the API; so does an app disconnected since.
func TestLogsNameApps(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	ctx := context.Background()
	ada, _, err := e.st.UserByEmail(ctx, "ada@example.com")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []store.OAuthGrant{
		{ID: "app_live1", ClientName: "Claude Desktop"},
		{ID: "app_gone1", ClientName: "Old Inspector"},
	} {
		g.ProjectID, g.UserID, g.ClientID, g.Scope = e.project.ID, ada.ID, "client-"+g.ID, "mcp:read"
		if _, err := e.st.CreateOAuthGrant(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.RevokeOAuthGrant(ctx, "app_gone1"); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := e.st.AppendCalls(ctx, []store.Call{
		{Time: now, ProjectID: e.project.ID, Kind: "tool", Name: "get_order", KeyID: "app_live1", Outcome: store.OutcomeOK},
		{Time: now, ProjectID: e.project.ID, Kind: "tool", Name: "get_order", KeyID: "app_gone1", Outcome: store.OutcomeOK},
	}); err != nil {
		t.Fatal(err)
	}
	page := c.get("/p/shop/logs").text()
	for _, want := range []string{
		`<span title="app_live1">Claude Desktop (app of ada@example.com)</span>`,
		`<span title="app_gone1">Old Inspector (app of ada@example.com), disconnected</span>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the Logs page lacks %s", want)
		}
	}
	var calls []struct{ Key, KeyName string }
	c.mustCall(200, "GET", "/api/projects/shop/calls", nil, &calls)
	got := map[string]string{}
	for _, call := range calls {
		got[call.Key] = call.KeyName
	}
	if got["app_live1"] != "Claude Desktop (app of ada@example.com)" || got["app_gone1"] != "Old Inspector (app of ada@example.com), disconnected" {
		t.Errorf("GET …/calls names the apps %q", got)
	}
}

// The Logs page shows a call's duration in ms under a second and in
// seconds above: a 45-second report reads 45.0 s, not 45017.6 ms.
func TestLogsDurations(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	now := time.Now()
	if err := e.st.AppendCalls(context.Background(), []store.Call{
		{Time: now, ProjectID: e.project.ID, Kind: "tool", Name: "sales_report", KeyID: "key_x", Outcome: store.OutcomeOK, Duration: 45017600 * time.Microsecond},
		{Time: now, ProjectID: e.project.ID, Kind: "tool", Name: "get_order", KeyID: "key_x", Outcome: store.OutcomeOK, Duration: 12300 * time.Microsecond},
	}); err != nil {
		t.Fatal(err)
	}
	page := c.get("/p/shop/logs").text()
	for _, want := range []string{`<td class="num">45.0 s</td>`, `<td class="num">12.3 ms</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the Logs page lacks %s", want)
		}
	}
	if strings.Contains(page, "45017.6") {
		t.Error("the Logs page shows 45017.6 ms")
	}
}
