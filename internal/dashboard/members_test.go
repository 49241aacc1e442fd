package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/users"
)

// account gives a person an account of their own (through an instance
// invite, in no project) and returns their signed-in client.
func (e *env) account(email string) *client {
	e.t.Helper()
	path, err := users.Invite(context.Background(), e.st, store.User{}, email, false)
	if err != nil {
		e.t.Fatal(err)
	}
	c := e.client()
	res := c.form(path, url.Values{"email": {email}, "password": {"correct horse battery"}, "confirm": {"correct horse battery"}})
	if res.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("sign up %s: status %d: %s", email, res.StatusCode, res.body)
	}
	return c
}

// invite asks for a member through the API as c and returns the answer
// and the link's path.
func invite(t *testing.T, c *client, email string, role store.Role) (response, string) {
	t.Helper()
	var out struct {
		Invite string `json:"invite"`
	}
	res := c.mustCall(http.StatusCreated, "POST", "/api/projects/shop/members", map[string]any{"email": email, "role": role}, &out)
	u, err := url.Parse(out.Invite)
	if err != nil || !strings.HasPrefix(u.Path, "/join/") {
		t.Fatalf("invite for %s = %q; want a /join/ link", email, out.Invite)
	}
	return res, u.Path
}

var expiresAt = regexp.MustCompile(`"expiresAt": ?"[^"]*"`)

// alike is an answer with what must differ between two invites (the
// link's secret, the address, the time) replaced by placeholders.
func alike(body []byte, link, email string) string {
	s := strings.ReplaceAll(string(body), strings.TrimPrefix(link, "/join/"), "SECRET")
	s = strings.ReplaceAll(s, email, "EMAIL")
	return expiresAt.ReplaceAllString(s, `"expiresAt":"TIME"`)
}

func memberRoles(t *testing.T, c *client) map[string]store.Role {
	t.Helper()
	var ms []struct {
		Email string     `json:"email"`
		Role  store.Role `json:"role"`
	}
	c.mustCall(http.StatusOK, "GET", "/api/projects/shop/members", nil, &ms)
	out := map[string]store.Role{}
	for _, m := range ms {
		out[m.Email] = m.Role
	}
	return out
}

// TestAddMemberAnswersAlike: adding a member answers the same for an
// address with an account and one without (an invite link, the same
// status, shape and wording), so it tells an owner nothing about who has
// an account; the person with an account is not a member until they
// accept, and accepting makes them one with the invited role. The audit
// log has the invitations, then the acceptance.
func TestAddMemberAnswersAlike(t *testing.T) {
	e := newEnv(t)
	admin := e.admin()
	olga := e.member(admin, "olga@example.com", store.RoleOwner)
	bob := e.account("bob@example.com")

	known, knownLink := invite(t, olga, "bob@example.com", store.RoleEditor)
	unknown, unknownLink := invite(t, olga, "carol@example.com", store.RoleEditor)
	if known.StatusCode != unknown.StatusCode || known.Header.Get("Content-Type") != unknown.Header.Get("Content-Type") {
		t.Errorf("answers: %d %q for an account, %d %q for none; want the same", known.StatusCode, known.Header.Get("Content-Type"), unknown.StatusCode, unknown.Header.Get("Content-Type"))
	}
	a, b := alike(known.body, knownLink, "bob@example.com"), alike(unknown.body, unknownLink, "carol@example.com")
	if a != b {
		t.Errorf("answers differ:\nfor an account: %s\nfor none:       %s", a, b)
	}
	// Signed out, the two links show the same page too.
	anon := e.client()
	pa, pb := anon.get(knownLink), anon.get(unknownLink)
	if pa.StatusCode != http.StatusOK || alike(pa.body, knownLink, "bob@example.com") != alike(pb.body, unknownLink, "carol@example.com") {
		t.Errorf("signed-out invite pages differ (%d, %d):\n%s\n----\n%s", pa.StatusCode, pb.StatusCode, pa.body, pb.body)
	}
	if !strings.Contains(pa.text(), `href="/login?next=`+url.QueryEscape(knownLink)+`"`) || !strings.Contains(pa.text(), "Sign in to accept") {
		t.Errorf("the signed-out invite page offers no way to sign in and accept:\n%s", pa.body)
	}

	if _, ok := memberRoles(t, olga)["bob@example.com"]; ok {
		t.Fatal("bob is a member before accepting")
	}
	if res := bob.get("/api/projects/shop"); res.StatusCode != http.StatusNotFound {
		t.Errorf("bob reading the project before accepting: %d; want 404", res.StatusCode)
	}

	// Signed in, bob is offered the project; accepting makes him an editor.
	page := bob.get(knownLink)
	if page.StatusCode != http.StatusOK || !strings.Contains(page.text(), "You are invited to project <strong>shop</strong> as <strong>editor</strong>. You are signed in as bob@example.com.") {
		t.Errorf("bob's invite page: %d\n%s", page.StatusCode, page.body)
	}
	res := bob.form(knownLink+"/accept", nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/p/shop" {
		t.Fatalf("accept: %d to %q; want 303 to /p/shop", res.StatusCode, res.Header.Get("Location"))
	}
	if got := memberRoles(t, olga)["bob@example.com"]; got != store.RoleEditor {
		t.Errorf("bob's role after accepting = %q; want editor", got)
	}
	if res := bob.get("/api/projects/shop"); res.StatusCode != http.StatusOK {
		t.Errorf("bob reading the project after accepting: %d; want 200", res.StatusCode)
	}
	if res := bob.form(knownLink+"/accept", nil); res.StatusCode != http.StatusNotFound || !strings.Contains(res.text(), "This link is unknown, used or expired.") {
		t.Errorf("accepting twice: %d\n%s", res.StatusCode, res.body)
	}

	var page2 auditPage
	olga.mustCall(http.StatusOK, "GET", "/api/projects/shop/audit?action=member.", nil, &page2)
	var got []string
	for _, en := range page2.Entries {
		got = append(got, en.Action+" "+en.Target+" by "+en.Actor+" "+compact(en.After))
	}
	want := []string{ // newest first
		`member.join bob@example.com by bob@example.com {"email":"bob@example.com","role":"editor"}`,
		`member.invite carol@example.com by olga@example.com {"email":"carol@example.com","role":"editor"}`,
		`member.invite bob@example.com by olga@example.com {"email":"bob@example.com","role":"editor"}`,
	}
	if strings.Join(got[:min(3, len(got))], "\n") != strings.Join(want, "\n") {
		t.Errorf("audit member.* (newest first):\n%s\nwant first:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAcceptInviteAsSomeoneElse: an invite is for its address only; a
// person signed in as another is told to sign out, and the link still
// works for the right person afterwards.
func TestAcceptInviteAsSomeoneElse(t *testing.T) {
	e := newEnv(t)
	admin := e.admin()
	bob := e.account("bob@example.com")
	_, link := invite(t, admin, "carol@example.com", store.RoleViewer)
	page := bob.get(link)
	if !strings.Contains(page.text(), "This invite is for carol@example.com; you are signed in as bob@example.com. Sign out, then open the link again and sign in as carol@example.com.") {
		t.Errorf("carol's invite opened by bob:\n%s", page.body)
	}
	if res := bob.form(link+"/accept", nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("bob accepting carol's invite: %d; want 403", res.StatusCode)
	}
	if _, ok := memberRoles(t, admin)["bob@example.com"]; ok {
		t.Error("bob joined through carol's invite")
	}
	// Signed out, accepting goes to the sign-in page, which comes back.
	anon := e.client()
	if res := anon.form(link+"/accept", nil); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login?next="+url.QueryEscape(link) {
		t.Errorf("accepting signed out: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	carol := e.account("carol@example.com")
	carol.form("/logout", nil)
	res := carol.form("/login", url.Values{"email": {"carol@example.com"}, "password": {"correct horse battery"}, "next": {link}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != link {
		t.Fatalf("sign in to accept: %d to %q; want back to the link", res.StatusCode, res.Header.Get("Location"))
	}
	if res := carol.form(link+"/accept", nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("carol accepting: %d\n%s", res.StatusCode, res.body)
	}
	if got := memberRoles(t, admin)["carol@example.com"]; got != store.RoleViewer {
		t.Errorf("carol's role = %q; want viewer", got)
	}
}
