package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/dashboard"
	"github.com/spacefix/spacefix/internal/store"
)

// member adds a person to the shop project through the API as the admin
// would (an invite link, since they have no account), signs them up with
// it and returns their signed-in client.
func (e *env) member(admin *client, email string, role store.Role) *client {
	e.t.Helper()
	var inv struct {
		Invite string `json:"invite"`
	}
	admin.mustCall(http.StatusCreated, "POST", "/api/projects/shop/members", map[string]any{"email": email, "role": role}, &inv)
	u, err := url.Parse(inv.Invite)
	if err != nil || !strings.HasPrefix(u.Path, "/join/") {
		e.t.Fatalf("invite = %q; want a /join/ link", inv.Invite)
	}
	c := e.client()
	res := c.form(u.Path, url.Values{"email": {email}, "password": {"correct horse battery"}, "confirm": {"correct horse battery"}})
	if res.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("sign up %s: status %d: %s", email, res.StatusCode, res.body)
	}
	return c
}

// concrete fills a route's path parameters.
func concrete(path, project string) string {
	return strings.NewReplacer("{project}", project, "{tool}", "search", "{id}", "x_1", "{user}", "1").Replace(path)
}

// mutating reports whether a route changes anything.
func mutating(r dashboard.Route) bool { return r.Method != http.MethodGet }

// TestRolesEnforcedOnEveryRoute walks the admin API's route table, so a
// route added later cannot forget its check: a viewer gets 403 with a
// sentence naming the role on every route that changes anything, an editor
// on every owner route, people without the instance admin flag on every
// instance route, and a project token cannot even see another project.
func TestRolesEnforcedOnEveryRoute(t *testing.T) {
	e := newEnv(t)
	admin := e.admin()
	e.st.CreateProject(t.Context(), "other")
	viewer := e.member(admin, "vic@example.com", store.RoleViewer)
	editor := e.member(admin, "eve@example.com", store.RoleEditor)
	owner := e.member(admin, "olga@example.com", store.RoleOwner)

	var tok struct {
		Secret string `json:"secret"`
	}
	admin.mustCall(http.StatusCreated, "POST", "/api/projects/shop/tokens", map[string]any{"name": "ci", "role": "editor"}, &tok)
	token := e.client()
	token.bearer = tok.Secret

	routes := dashboard.Routes()
	if len(routes) < 30 {
		t.Fatalf("the route table has %d routes; want the whole API", len(routes))
	}
	checked := 0
	for _, r := range routes {
		path := concrete(r.Path, "shop")
		for _, who := range []struct {
			name string
			c    *client
			role store.Role
		}{{"viewer", viewer, store.RoleViewer}, {"editor", editor, store.RoleEditor}, {"owner", owner, store.RoleOwner}, {"editor token", token, store.RoleEditor}} {
			if strings.HasSuffix(r.Path, "/stream") {
				continue // long-lived; its check is the same wrapper's
			}
			res := who.c.call(r.Method, path, map[string]any{}, nil)
			switch {
			case r.Admin:
				if res.StatusCode != http.StatusForbidden || res.apiError() != "Only an instance admin may do this. Ask an admin of this gateway." {
					t.Errorf("%s %s as %s: %d %q; want 403 for instance admins only", r.Method, path, who.name, res.StatusCode, res.apiError())
				}
			case r.Role == "":
				if res.StatusCode == http.StatusForbidden {
					t.Errorf("%s %s as %s: 403 %q; any signed-in caller may", r.Method, path, who.name, res.apiError())
				}
			case !who.role.AtLeast(r.Role):
				want := "needs the " + map[store.Role]string{store.RoleEditor: "editor or owner", store.RoleOwner: "owner"}[r.Role] + ` role in project "shop"`
				if res.StatusCode != http.StatusForbidden || !strings.Contains(res.apiError(), want) {
					t.Errorf("%s %s as %s: %d %q; want 403 saying it %s", r.Method, path, who.name, res.StatusCode, res.apiError(), want)
				}
				if !mutating(r) && r.Role == store.RoleViewer {
					t.Errorf("%s %s: a read needs more than viewer", r.Method, path)
				}
			default:
				if res.StatusCode == http.StatusForbidden || res.StatusCode == http.StatusUnauthorized {
					t.Errorf("%s %s as %s: %d %q; a %s may", r.Method, path, who.name, res.StatusCode, res.apiError(), who.role)
				}
			}
			checked++
		}
		if r.Role != "" && mutating(r) && r.Role == store.RoleViewer {
			t.Errorf("%s %s changes something but needs only viewer", r.Method, r.Path)
		}
		// Another project is invisible to the members of this one and to
		// its token: answered as if it did not exist.
		if r.Role != "" {
			for name, c := range map[string]*client{"viewer": viewer, "owner": owner, "token": token} {
				res := c.call(r.Method, concrete(r.Path, "other"), map[string]any{}, nil)
				if res.StatusCode != http.StatusNotFound || res.apiError() != `There is no project "other", or you are not a member of it. Pick one from the list of projects.` {
					t.Errorf("%s %s as the shop %s: %d %q; want 404 as for no project", r.Method, concrete(r.Path, "other"), name, res.StatusCode, res.apiError())
				}
			}
		}
	}
	t.Logf("checked %d route and role pairs", checked)

	// Lists show only what one may see.
	for name, c := range map[string]*client{"viewer": viewer, "token": token} {
		var ps []struct{ Name string }
		c.mustCall(http.StatusOK, "GET", "/api/projects", nil, &ps)
		if len(ps) != 1 || ps[0].Name != "shop" {
			t.Errorf("GET /api/projects as the %s = %+v; want shop only", name, ps)
		}
	}
	var all []struct{ Name string }
	admin.mustCall(http.StatusOK, "GET", "/api/projects", nil, &all)
	if len(all) != 2 {
		t.Errorf("GET /api/projects as the instance admin = %+v; want both", all)
	}
}

// TestViewerPagesReadOnly: a viewer sees the Settings, Tools, Keys and
// Agents pages without controls, with a line saying who can change them;
// a person outside the project gets the not-found page.
func TestViewerPagesReadOnly(t *testing.T) {
	e := newEnv(t)
	e.connect("r-1", "host-a", tool("search", "Search orders.", true))
	admin := e.admin()
	viewer := e.member(admin, "vic@example.com", store.RoleViewer)
	editor := e.member(admin, "eve@example.com", store.RoleEditor)
	for _, c := range []struct {
		page, line, control string
	}{
		{"settings", "Editors and owners can change it", "Save settings"},
		{"tools", "Editors and owners can change it", "data-edit="},
		{"agents", "Editors and owners can change it", `"disabled":true`},
		{"keys", "Owners can change it", "Create client key"},
		{"members", "Only owners of shop can change who is a member.", "Add member"},
	} {
		res := viewer.get("/p/shop/" + c.page)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET /p/shop/%s as a viewer: %d", c.page, res.StatusCode)
		}
		if !strings.Contains(res.text(), c.line) || strings.Contains(res.text(), c.control) {
			t.Errorf("/p/shop/%s for a viewer: want the line %q and no %q", c.page, c.line, c.control)
		}
		if a := admin.get("/p/shop/" + c.page).text(); strings.Contains(a, c.line) || !strings.Contains(a, c.control) {
			t.Errorf("/p/shop/%s for the admin: want %q and no read-only line", c.page, c.control)
		}
	}
	if !strings.Contains(viewer.get("/p/shop/settings").text(), `<fieldset class="plain" disabled>`) {
		t.Error("the viewer's settings form is not disabled")
	}
	if s := editor.get("/p/shop/settings").text(); !strings.Contains(s, "Save settings") || strings.Contains(s, "read-only for you") {
		t.Error("an editor's settings page is read-only")
	}
	if s := editor.get("/p/shop/members").text(); strings.Contains(s, "Add member") || strings.Contains(s, "Project API tokens") {
		t.Error("an editor's members page offers to manage members or tokens")
	}
	if res := viewer.get("/admin"); res.StatusCode != http.StatusForbidden {
		t.Errorf("GET /admin as a viewer: %d; want 403", res.StatusCode)
	}

	e.st.CreateProject(t.Context(), "secret")
	res := viewer.get("/p/secret/tools")
	if res.StatusCode != http.StatusNotFound || !strings.Contains(res.text(), "or you are not a member of it") {
		t.Errorf("GET /p/secret/tools as a non-member: %d; want the not-found page", res.StatusCode)
	}
	if strings.Contains(viewer.get("/").text(), "/p/secret") {
		t.Error("the projects page lists a project the viewer is not a member of")
	}
}

// TestMembersAndOwners: members are added, changed and removed; a project
// keeps at least one owner; a person with an account joins by accepting.
func TestMembersAndOwners(t *testing.T) {
	e := newEnv(t)
	admin := e.admin()
	olga := e.member(admin, "olga@example.com", store.RoleOwner)
	// The admin who ran setup owns shop too; olga is to be the only owner.
	admin.mustCall(http.StatusNoContent, "DELETE", "/api/projects/shop/members/1", nil, nil)
	var ms []struct {
		UserID int64      `json:"userId"`
		Email  string     `json:"email"`
		Role   store.Role `json:"role"`
	}
	olga.mustCall(http.StatusOK, "GET", "/api/projects/shop/members", nil, &ms)
	if len(ms) != 1 || ms[0].Email != "olga@example.com" || ms[0].Role != store.RoleOwner {
		t.Fatalf("members = %+v; want olga, owner", ms)
	}
	olgaID := ms[0].UserID
	res := olga.call("PATCH", "/api/projects/shop/members/"+itoa(olgaID), map[string]any{"role": "viewer"}, nil)
	if res.StatusCode != http.StatusConflict || res.apiError() != "olga@example.com is the last owner of project shop. Make someone else an owner first." {
		t.Errorf("demoting the last owner: %d %q", res.StatusCode, res.apiError())
	}
	res = olga.call("DELETE", "/api/projects/shop/members/"+itoa(olgaID), nil, nil)
	if res.StatusCode != http.StatusConflict {
		t.Errorf("removing the last owner: %d %q; want 409", res.StatusCode, res.apiError())
	}
	// The admin has an account: invited like anyone, a member once she
	// accepts.
	_, link := invite(t, olga, "ADA@example.com", store.RoleEditor)
	if res := admin.form(link+"/accept", nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("ada accepting: %d\n%s", res.StatusCode, res.body)
	}
	var m struct {
		UserID int64      `json:"userId"`
		Role   store.Role `json:"role"`
	}
	var all []struct {
		UserID int64      `json:"userId"`
		Email  string     `json:"email"`
		Role   store.Role `json:"role"`
	}
	olga.mustCall(http.StatusOK, "GET", "/api/projects/shop/members", nil, &all)
	for _, a := range all {
		if a.Email == "ada@example.com" {
			m.UserID, m.Role = a.UserID, a.Role
		}
	}
	if m.Role != store.RoleEditor || m.UserID == 0 {
		t.Errorf("ada after accepting = %+v; want a member, editor", m)
	}
	res = olga.call("POST", "/api/projects/shop/members", map[string]any{"email": "ada@example.com", "role": "viewer"}, nil)
	if res.StatusCode != http.StatusConflict || !strings.Contains(res.apiError(), "is already a editor of project shop") {
		t.Errorf("adding ada twice: %d %q", res.StatusCode, res.apiError())
	}
	res = olga.call("POST", "/api/projects/shop/members", map[string]any{"email": "x@example.com", "role": "admin"}, nil)
	if res.StatusCode != http.StatusBadRequest || res.apiError() != `role: want viewer, editor or owner, not "admin"` {
		t.Errorf("role admin: %d %q", res.StatusCode, res.apiError())
	}
	olga.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/members/"+itoa(m.UserID), map[string]any{"role": "owner"}, nil)
	olga.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/members/"+itoa(olgaID), map[string]any{"role": "viewer"}, nil)
	// Olga is a viewer now: she can no longer manage members.
	res = olga.call("DELETE", "/api/projects/shop/members/"+itoa(m.UserID), nil, nil)
	if res.StatusCode != http.StatusForbidden || res.apiError() != `This change needs the owner role in project "shop"; you are a viewer. Ask an owner of the project (its Members page lists them).` {
		t.Errorf("a viewer removing a member: %d %q", res.StatusCode, res.apiError())
	}
	admin.mustCall(http.StatusNoContent, "DELETE", "/api/projects/shop/members/"+itoa(olgaID), nil, nil)
	if res := olga.get("/api/projects/shop"); res.StatusCode != http.StatusNotFound {
		t.Errorf("a removed member reading the project: %d; want 404", res.StatusCode)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestInstanceAdminManagesPeople: admins give and take the admin flag and
// remove people; the gateway keeps one admin; a removed person is signed
// out and out of every project at once.
func TestInstanceAdminManagesPeople(t *testing.T) {
	e := newEnv(t)
	admin := e.admin()
	vic := e.member(admin, "vic@example.com", store.RoleEditor)
	var us []struct {
		ID    int64  `json:"id"`
		Email string `json:"email"`
		Admin bool   `json:"admin"`
	}
	admin.mustCall(http.StatusOK, "GET", "/api/users", nil, &us)
	ids := map[string]int64{}
	for _, u := range us {
		ids[u.Email] = u.ID
	}
	res := admin.call("PATCH", "/api/users/"+itoa(ids["ada@example.com"]), map[string]any{"admin": false}, nil)
	if res.StatusCode != http.StatusConflict || res.apiError() != "ada@example.com is the last admin of this gateway. Make someone else an admin first." {
		t.Errorf("taking the last admin's flag: %d %q", res.StatusCode, res.apiError())
	}
	admin.mustCall(http.StatusOK, "PATCH", "/api/users/"+itoa(ids["vic@example.com"]), map[string]any{"admin": true}, nil)
	if res := vic.get("/admin"); res.StatusCode != http.StatusOK {
		t.Errorf("GET /admin as the new admin: %d", res.StatusCode)
	}
	vic.mustCall(http.StatusOK, "PATCH", "/api/users/"+itoa(ids["vic@example.com"]), map[string]any{"admin": false}, nil)
	if res := vic.get("/admin"); res.StatusCode != http.StatusForbidden {
		t.Errorf("GET /admin after giving up the flag: %d; want 403", res.StatusCode)
	}
	admin.mustCall(http.StatusNoContent, "DELETE", "/api/users/"+itoa(ids["vic@example.com"]), nil, nil)
	if res := vic.get("/api/me"); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /api/me as a removed person: %d; want 401", res.StatusCode)
	}
	var ms []struct{ Email string }
	admin.mustCall(http.StatusOK, "GET", "/api/projects/shop/members", nil, &ms)
	if len(ms) != 1 || ms[0].Email != "ada@example.com" {
		t.Errorf("members after removing vic = %+v; want only ada, who ran setup", ms)
	}
	var page auditPage
	admin.mustCall(http.StatusOK, "GET", "/api/audit?action=user.", nil, &page)
	if len(page.Entries) != 3 || page.Entries[0].Action != "user.remove" || !strings.Contains(compact(page.Entries[0].Before), `"projects":{"shop":"editor"}`) {
		t.Errorf("instance audit user.* = %+v; want update, update, remove with vic's projects", page.Entries)
	}
	if res := admin.call("DELETE", "/api/users/9999", nil, nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("removing an unknown user: %d", res.StatusCode)
	}
}

// TestProjectInvites: an owner sees the project's open invites and revokes
// one; its link stops working at once, and the audit log says so.
func TestProjectInvites(t *testing.T) {
	e := newEnv(t)
	admin := e.admin()
	var made struct {
		Invite string `json:"invite"`
	}
	admin.mustCall(http.StatusCreated, "POST", "/api/projects/shop/members", map[string]any{"email": "bob@example.com", "role": "viewer"}, &made)
	var open []struct {
		ID, Email, Project string
		Role               store.Role
	}
	admin.mustCall(http.StatusOK, "GET", "/api/projects/shop/invites", nil, &open)
	if len(open) != 1 || open[0].Email != "bob@example.com" || open[0].Role != store.RoleViewer || open[0].Project != "shop" {
		t.Fatalf("open invites = %+v; want bob's, viewer", open)
	}
	if !strings.Contains(admin.get("/p/shop/members").text(), `data-invite="`+open[0].ID+`"`) {
		t.Error("the Members page does not list the open invite")
	}
	admin.mustCall(http.StatusOK, "POST", "/api/projects/shop/invites/"+open[0].ID+"/revoke", nil, nil)
	u, _ := url.Parse(made.Invite)
	if res := e.client().get(u.Path); res.StatusCode != http.StatusNotFound || !strings.Contains(res.text(), "This link is unknown, used or expired.") {
		t.Errorf("GET a revoked invite link: %d", res.StatusCode)
	}
	res := admin.call("POST", "/api/projects/shop/invites/"+open[0].ID+"/revoke", nil, nil)
	if res.StatusCode != http.StatusNotFound || !strings.Contains(res.apiError(), "There is no open invite") {
		t.Errorf("revoking twice: %d %q", res.StatusCode, res.apiError())
	}
	if a := only(t, admin, "shop", "invite.revoke"); a.Target != "bob@example.com" {
		t.Errorf("invite.revoke entry = %+v", a)
	}
}
