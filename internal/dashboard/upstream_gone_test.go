package dashboard_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/spacefix/spacefix/internal/store"
)

// TestUpstreamGoneAudited (issue 32, item 5): removing a person's
// membership, or the person, disconnects their upstream accounts with
// them; the audit log says so with one upstream.disconnect entry per
// account, by the one who removed them, without a token.
func TestUpstreamGoneAudited(t *testing.T) {
	e, f := upstreamEnv(t)
	admin := e.admin()
	e.member(admin, "vic@example.com", store.RoleViewer)
	e.member(admin, "eve@example.com", store.RoleEditor)
	vic := e.put(f, "vic@example.com", "at-vic-secret")
	eve := e.put(f, "eve@example.com", "at-eve-secret")
	key := e.agentKey.ID

	admin.mustCall(http.StatusNoContent, "DELETE", fmt.Sprintf("/api/projects/shop/members/%d", vic), nil, nil)
	admin.mustCall(http.StatusNoContent, "DELETE", fmt.Sprintf("/api/users/%d", eve), nil, nil)
	if as, err := e.st.UpstreamAccounts(t.Context(), store.UpstreamFilter{AgentKeyID: key}); err != nil || len(as) != 0 {
		t.Errorf("stored accounts after vic's membership and eve went = %d, %v; want none", len(as), err)
	}

	var page auditPage
	res := admin.mustCall(http.StatusOK, "GET", "/api/projects/shop/audit?action=upstream.disconnect", nil, &page)
	noToken(t, "the audit log", res.body)
	if len(page.Entries) != 2 {
		t.Fatalf("upstream.disconnect entries = %+v; want 2 (vic's, eve's)", page.Entries)
	}
	for i, email := range []string{"eve@example.com", "vic@example.com"} { // newest first
		en := page.Entries[i]
		sameJSON(t, email+"'s disconnect, before", en.Before, fmt.Sprintf(`{"agentKey":%q,"host":"mcp.example.test","user":%q}`, key, email))
		if en.Actor != "ada@example.com" || en.Target != key || string(en.After) != "null" {
			t.Errorf("%s's upstream.disconnect = %+v; want by ada@example.com, on %s", email, en, key)
		}
	}
}
