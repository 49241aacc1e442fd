package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/dashboard"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/users"
)

func TestSetupLinkMakesFirstAdmin(t *testing.T) {
	e := newEnv(t)
	path, err := users.SetupPath(t.Context(), e.st)
	if err != nil {
		t.Fatal(err)
	}
	c := e.client()
	if res := c.get(path); res.StatusCode != http.StatusOK || !strings.Contains(res.text(), "Set up Spacefix") {
		t.Fatalf("GET setup link: %d %s", res.StatusCode, res.body)
	}
	res := c.form(path, url.Values{"email": {"ada@example.com"}, "password": {"correct horse battery"}, "confirm": {"other password!!"}})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(res.text(), "The two passwords differ") {
		t.Fatalf("mismatched passwords: %d, want 400 saying they differ", res.StatusCode)
	}
	res = c.form(path, url.Values{"email": {"ada@example.com"}, "password": {"correct horse battery"}, "confirm": {"correct horse battery"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("setup: %d %s", res.StatusCode, res.body)
	}
	cookie := res.Cookies()[0]
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Secure {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Lax, not Secure over plain HTTP", cookie)
	}
	var me map[string]any
	c.mustCall(http.StatusOK, "GET", "/api/me", nil, &me)
	if me["email"] != "ada@example.com" || me["admin"] != true {
		t.Errorf("GET /api/me = %v, want ada as admin", me)
	}
	// The link worked once.
	if res := e.client().get(path); res.StatusCode != http.StatusNotFound {
		t.Errorf("setup link after use: %d, want 404", res.StatusCode)
	}
	if p, _ := users.SetupPath(t.Context(), e.st); p != "" {
		t.Errorf("SetupPath once a user exists = %q, want none", p)
	}
}

func TestSecureCookieBehindTLSProxy(t *testing.T) {
	e := newEnv(t)
	e.admin()
	c := e.client()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/login", strings.NewReader(url.Values{
		"email": {"ada@example.com"}, "password": {"correct horse battery"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	res := c.do(req)
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) == 0 || !res.Cookies()[0].Secure {
		t.Fatalf("sign-in behind an https proxy: %d, cookies %v; want a Secure cookie", res.StatusCode, res.Cookies())
	}
}

func TestSignInAndOut(t *testing.T) {
	e := newEnv(t)
	e.admin()
	c := e.client()
	if res := c.get("/p/shop/tools"); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login?next=%2Fp%2Fshop%2Ftools" {
		t.Fatalf("page without a session: %d to %q, want a redirect to sign-in", res.StatusCode, res.Header.Get("Location"))
	}
	if res := c.call("GET", "/api/projects", nil, nil); res.StatusCode != http.StatusUnauthorized || !strings.Contains(res.apiError(), "spacefix tokens create") {
		t.Fatalf("API without a session: %d %q, want 401 saying how to get a token", res.StatusCode, res.apiError())
	}
	res := c.form("/login", url.Values{"email": {"ada@example.com"}, "password": {"wrong password"}})
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(res.text(), "Wrong email or password.") {
		t.Fatalf("wrong password: %d", res.StatusCode)
	}
	res = c.form("/login", url.Values{"email": {"ADA@example.com"}, "password": {"correct horse battery"}, "next": {"/p/shop/tools"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/p/shop/tools" {
		t.Fatalf("sign-in: %d to %q, want back to the page asked for", res.StatusCode, res.Header.Get("Location"))
	}
	if res := c.get("/p/shop/tools"); res.StatusCode != http.StatusOK {
		t.Fatalf("page after sign-in: %d", res.StatusCode)
	}
	c.form("/logout", nil)
	if res := c.get("/p/shop/tools"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("page after sign-out: %d, want a redirect", res.StatusCode)
	}
}

func TestSignInRedirectStaysOnSite(t *testing.T) {
	e := newEnv(t)
	e.admin()
	for _, next := range []string{"https://evil.example/", "//evil.example/", "/\\evil.example", "javascript:alert(1)"} {
		res := e.client().form("/login", url.Values{"email": {"ada@example.com"}, "password": {"correct horse battery"}, "next": {next}})
		if loc := res.Header.Get("Location"); loc != "/" {
			t.Errorf("next=%q redirected to %q, want /", next, loc)
		}
	}
}

func TestSignInRateLimited(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	var last response
	for range 11 {
		last = c.form("/login", url.Values{"email": {"ada@example.com"}, "password": {"guess"}})
	}
	if last.StatusCode != http.StatusTooManyRequests || !strings.Contains(last.text(), "Too many sign-in attempts. Try again in") {
		t.Fatalf("11th attempt in a minute: %d, want 429 saying when to retry", last.StatusCode)
	}
}

func TestCrossOriginWritesRefused(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	for _, h := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Origin": "https://evil.example"},
	} {
		req, _ := http.NewRequest(http.MethodPatch, e.srv.URL+"/api/projects/shop/tools/get_order", strings.NewReader(`{"disabled":true}`))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		if res := c.do(req); res.StatusCode != http.StatusForbidden {
			t.Errorf("cross-origin PATCH with %v: %d, want 403", h, res.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/logout", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if res := c.do(req); res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site sign-out form: %d, want 403", res.StatusCode)
	}
	if got, _ := e.st.ToolSettings(t.Context(), e.project.ID); len(got) != 0 {
		t.Errorf("a refused cross-origin write saved %v", got)
	}
}

func TestAPITokenAndAdminRights(t *testing.T) {
	e := newEnv(t)
	admin := e.admin()
	var created struct {
		Token  struct{ ID string }
		Secret string
	}
	admin.mustCall(http.StatusCreated, "POST", "/api/tokens", map[string]string{"name": "ci"}, &created)
	cli := e.client()
	cli.bearer = created.Secret
	cli.mustCall(http.StatusOK, "GET", "/api/projects/shop", nil, nil)
	cli.mustCall(http.StatusOK, "GET", "/api/tokens", nil, nil)

	// A member is not an admin.
	var inv struct{ URL string }
	admin.mustCall(http.StatusCreated, "POST", "/api/invites", map[string]any{"email": "bob@example.com"}, &inv)
	u, _ := url.Parse(inv.URL)
	bob := e.client()
	if res := bob.form(u.Path, url.Values{"email": {"bob@example.com"}, "password": {"bobs password!"}, "confirm": {"bobs password!"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("bob joins: %d %s", res.StatusCode, res.body)
	}
	bob.mustCall(http.StatusOK, "GET", "/api/projects", nil, nil)
	if res := bob.call("POST", "/api/tokens", map[string]string{}, nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("member creating a token: %d, want 403", res.StatusCode)
	}

	admin.mustCall(http.StatusOK, "POST", "/api/tokens/"+created.Token.ID+"/revoke", nil, nil)
	if res := cli.call("GET", "/api/projects", nil, nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("revoked token: %d, want 401", res.StatusCode)
	}
}

func TestSessionEndsWithPasswordChange(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	u, _, err := e.st.UserByEmail(context.Background(), "ada@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.SetPassword(context.Background(), u.ID, users.HashPassword("a new password")); err != nil {
		t.Fatal(err)
	}
	if res := c.call("GET", "/api/me", nil, nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("old session after a password change: %d, want 401", res.StatusCode)
	}
}

// A signed-in person names themselves: PATCH /api/me sets the name (trimmed),
// GET /api/me and the store say it, the change is audited, and a name too
// long, with control characters or missing is refused with the field named.
func TestPatchMeName(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	var out map[string]any
	c.mustCall(http.StatusOK, "PATCH", "/api/me", map[string]any{"name": "  Ada Lovelace "}, &out)
	if out["name"] != "Ada Lovelace" {
		t.Errorf("PATCH /api/me = %v, want the name trimmed", out)
	}
	var me map[string]any
	c.mustCall(http.StatusOK, "GET", "/api/me", nil, &me)
	if me["name"] != "Ada Lovelace" {
		t.Errorf("GET /api/me = %v, want the name", me)
	}
	u, _, err := e.st.UserByEmail(t.Context(), "ada@example.com")
	if err != nil || u.Name != "Ada Lovelace" {
		t.Errorf("the store's user = %+v, %v", u, err)
	}
	es, err := e.st.Audit(t.Context(), store.AuditFilter{Action: "user.update"})
	if err != nil || len(es) != 1 || es[0].Target != "ada@example.com" || string(es[0].Before) != `{"name":""}` || string(es[0].After) != `{"name":"Ada Lovelace"}` {
		t.Errorf("audit user.update: %v, %+v", err, es)
	}
	for _, bad := range []struct {
		body any
		want string
	}{
		{map[string]any{"name": strings.Repeat("a", 101)}, "name: 101 bytes; use at most 100"},
		{map[string]any{"name": "Ada\nLovelace"}, "name: use letters, spaces and punctuation only, no control characters"},
		{map[string]any{}, "name: missing; send the name to set, or an empty one to take it away"},
	} {
		res := c.call("PATCH", "/api/me", bad.body, nil)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(res.text(), bad.want) {
			t.Errorf("PATCH /api/me %v: %d %s; want 400 %q", bad.body, res.StatusCode, res.body, bad.want)
		}
	}
	c.mustCall(http.StatusOK, "PATCH", "/api/me", map[string]any{"name": ""}, nil)
	if u, _, _ := e.st.UserByEmail(t.Context(), "ada@example.com"); u.Name != "" {
		t.Errorf("name after setting it empty = %q", u.Name)
	}
}

// Two gateways on one host, at two ports: a browser keeps cookies per
// host, not per port, so each gateway names its session cookie after its
// port, and a person signed in at both stays signed in at both.
func TestSessionsOfTwoGatewaysOnOneHost(t *testing.T) {
	one, two := newEnv(t), newEnv(t)
	browser := one.admin() // signs in at the first
	at := func(e *env) *client { return &client{t: t, e: e, http: browser.http} }
	path, err := users.SetupPath(context.Background(), two.st)
	if err != nil || path == "" {
		t.Fatalf("SetupPath = %q, %v", path, err)
	}
	res := at(two).form(path, url.Values{"email": {"ada@example.com"}, "password": {"correct horse battery"}, "confirm": {"correct horse battery"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("setup at the second gateway: status %d, want 303", res.StatusCode)
	}
	for i, e := range []*env{one, two} {
		if res := at(e).get("/p/shop/tools"); res.StatusCode != http.StatusOK {
			t.Errorf("gateway %d after signing in at both: status %d to %q, want the page", i+1, res.StatusCode, res.Header.Get("Location"))
		}
	}
	u1, _ := url.Parse(one.srv.URL)
	if got, want := dashboard.SessionCookieName(one.srv.URL), "spacefix_session_"+u1.Port(); got != want {
		t.Errorf("SessionCookieName(%s) = %q, want %q", one.srv.URL, got, want)
	}
	if got := dashboard.SessionCookieName("https://gw.example.com"); got != "spacefix_session" {
		t.Errorf("SessionCookieName(https://gw.example.com) = %q, want spacefix_session", got)
	}
}
