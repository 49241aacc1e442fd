package dashboard_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/spacefix/spacefix/internal/store"
)

// TestIdPsAPI: instance admins add, list and remove trusted identity
// providers; mistakes get a message naming the fix; both changes are
// audited.
func TestIdPsAPI(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	var added map[string]any
	c.mustCall(http.StatusCreated, "POST", "/api/idps", map[string]any{
		"issuer": "https://acme.okta.com", "allowedClients": []string{"https://app.example.com/client.json"},
		"provisionProject": "shop", "provisionRole": "viewer",
	}, &added)
	if added["issuer"] != "https://acme.okta.com" || added["provisionProject"] != "shop" || added["provisionRole"] != "viewer" {
		t.Errorf("POST /api/idps = %v", added)
	}
	for _, tt := range []struct {
		body   map[string]any
		status int
		want   string
	}{
		{map[string]any{"issuer": "https://acme.okta.com"}, http.StatusConflict,
			"The identity provider https://acme.okta.com is trusted already. Remove it first to change it: DELETE /api/idps?issuer=…"},
		{map[string]any{"issuer": "http://idp.example.com"}, http.StatusBadRequest,
			`issuer "http://idp.example.com" must use https (http only on a loopback address, for tests).`},
		{map[string]any{"issuer": "https://idp.example.com", "provisionProject": "nope", "provisionRole": "viewer"}, http.StatusBadRequest,
			`provisionProject: there is no project "nope"; GET /api/projects lists them`},
		{map[string]any{"issuer": "https://idp.example.com", "provisionProject": "shop", "provisionRole": "boss"}, http.StatusBadRequest,
			`provision role "boss" is not one of viewer, editor, owner.`},
		{map[string]any{"issuer": "https://idp.example.com", "allowedClients": []string{"two words"}}, http.StatusBadRequest,
			`allowed-client "two words" is not a client id: want a registered client id (client_…) or a Client ID Metadata Document URL.`},
	} {
		res := c.call("POST", "/api/idps", tt.body, nil)
		if res.StatusCode != tt.status || res.apiError() != tt.want {
			t.Errorf("POST /api/idps %v = %d %q;\nwant %d %q", tt.body, res.StatusCode, res.apiError(), tt.status, tt.want)
		}
	}
	var list []map[string]any
	c.mustCall(http.StatusOK, "GET", "/api/idps", nil, &list)
	if len(list) != 1 || list[0]["issuer"] != "https://acme.okta.com" {
		t.Errorf("GET /api/idps = %v; want the one entry", list)
	}
	c.mustCall(http.StatusOK, "DELETE", "/api/idps?issuer=https://acme.okta.com", nil, nil)
	if res := c.call("DELETE", "/api/idps?issuer=https://acme.okta.com", nil, nil); res.StatusCode != http.StatusNotFound ||
		res.apiError() != "There is no trusted identity provider https://acme.okta.com. GET /api/idps lists them." {
		t.Errorf("DELETE twice = %d %q", res.StatusCode, res.apiError())
	}
	es, err := e.st.Audit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range es {
		if a.Target == "https://acme.okta.com" {
			actions = append(actions, a.Action)
		}
	}
	slices.Sort(actions)
	if !slices.Equal(actions, []string{"idp.add", "idp.remove"}) {
		t.Errorf("audit actions = %v; want idp.add and idp.remove", actions)
	}
	if res := e.client().call("GET", "/api/idps", nil, nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /api/idps signed out = %d; want 401", res.StatusCode)
	}
}
