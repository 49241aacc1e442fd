package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/spacefix/spacefix/internal/store"
)

func testMembers(t *testing.T, s store.Store) {
	ctx := t.Context()
	p, q := mustProject(t, s, "alpha"), mustProject(t, s, "beta")
	ada, bob := mustUser(t, s, "ada@example.com", false), mustUser(t, s, "bob@example.com", false)
	if ms, err := s.Members(ctx, p.ID); err != nil || len(ms) != 0 {
		t.Fatalf("Members of a new project = %v, %v; want none", ms, err)
	}
	clk := startClock()
	m, err := s.SetMember(ctx, store.Member{ProjectID: p.ID, UserID: ada.ID, Role: store.RoleOwner})
	if err != nil {
		t.Fatal(err)
	}
	clk.check(t, "CreatedAt", m.CreatedAt)
	want := store.Member{ProjectID: p.ID, UserID: ada.ID, Email: "ada@example.com", Role: store.RoleOwner, CreatedAt: m.CreatedAt}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("SetMember mismatch (-want +got):\n%s", diff)
	}
	time.Sleep(2 * time.Millisecond)
	if _, err := s.SetMember(ctx, store.Member{ProjectID: p.ID, UserID: bob.ID, Role: store.RoleViewer}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetMember(ctx, store.Member{ProjectID: q.ID, UserID: bob.ID, Role: store.RoleEditor}); err != nil {
		t.Fatal(err)
	}
	// A new role keeps when the member joined.
	up, err := s.SetMember(ctx, store.Member{ProjectID: p.ID, UserID: ada.ID, Role: store.RoleEditor})
	if err != nil || up.Role != store.RoleEditor || !up.CreatedAt.Equal(m.CreatedAt) {
		t.Errorf("SetMember(new role) = %+v, %v; want editor, joined %v", up, err, m.CreatedAt)
	}
	if got, err := s.Member(ctx, p.ID, ada.ID); err != nil || got != up {
		t.Errorf("Member = %+v, %v; want %+v", got, err, up)
	}
	ms, err := s.Members(ctx, p.ID)
	if err != nil || len(ms) != 2 || ms[0].UserID != ada.ID || ms[1].UserID != bob.ID || ms[1].Role != store.RoleViewer {
		t.Errorf("Members = %+v, %v; want ada (editor) then bob (viewer)", ms, err)
	}
	bobs, err := s.Memberships(ctx, bob.ID)
	if err != nil || len(bobs) != 2 || bobs[0].ProjectID != p.ID || bobs[1].ProjectID != q.ID || bobs[1].Role != store.RoleEditor {
		t.Errorf("Memberships(bob) = %+v, %v; want alpha (viewer) and beta (editor)", bobs, err)
	}

	_, err = s.SetMember(ctx, store.Member{ProjectID: p.ID, UserID: 9999, Role: store.RoleViewer})
	wantErr(t, "SetMember of an unknown user", err, store.ErrNotFound)
	_, err = s.SetMember(ctx, store.Member{ProjectID: 9999, UserID: ada.ID, Role: store.RoleViewer})
	wantErr(t, "SetMember in an unknown project", err, store.ErrNotFound)
	if _, err := s.SetMember(ctx, store.Member{ProjectID: p.ID, UserID: ada.ID, Role: "admin"}); err == nil {
		t.Error(`SetMember with role "admin" succeeded, want an error`)
	}

	if err := s.RemoveMember(ctx, p.ID, bob.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.Member(ctx, p.ID, bob.ID)
	wantErr(t, "Member after RemoveMember", err, store.ErrNotFound)
	wantErr(t, "RemoveMember twice", s.RemoveMember(ctx, p.ID, bob.ID), store.ErrNotFound)
	if ms, _ := s.Memberships(ctx, bob.ID); len(ms) != 1 || ms[0].ProjectID != q.ID {
		t.Errorf("Memberships(bob) after removal from alpha = %+v; want beta only", ms)
	}
}

// testScopedTokensAndInvites: project tokens and invites keep their
// project and role; instance ones have none.
func testScopedTokensAndInvites(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "alpha")
	tok, err := s.CreateAPIToken(ctx, store.APIToken{ID: "tok_p", Name: "deploy", ProjectID: p.ID, Role: store.RoleEditor}, hash("p"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.APITokenByHash(ctx, hash("p")); err != nil || got != tok || got.ProjectID != p.ID || got.Role != store.RoleEditor {
		t.Errorf("APITokenByHash = %+v, %v; want project %d, editor", got, err, p.ID)
	}
	inst, err := s.CreateAPIToken(ctx, store.APIToken{ID: "tok_i"}, hash("i"))
	if err != nil || inst.ProjectID != 0 || inst.Role != "" {
		t.Errorf("instance token = %+v, %v", inst, err)
	}
	inv, err := s.CreateInvite(ctx, store.Invite{ID: "inv_p", ProjectID: p.ID, Role: store.RoleViewer, ExpiresAt: time.Now().Add(time.Hour)}, hash("inv"))
	if err != nil {
		t.Fatal(err)
	}
	used, err := s.UseInvite(ctx, hash("inv"))
	if err != nil || used.ProjectID != p.ID || used.Role != store.RoleViewer || used.ID != inv.ID {
		t.Errorf("UseInvite = %+v, %v; want project %d, viewer", used, err, p.ID)
	}
}

func testAudit(t *testing.T, s store.Store) {
	ctx := t.Context()
	p, q := mustProject(t, s, "alpha"), mustProject(t, s, "beta")
	clk := startClock()
	first, err := s.AppendAudit(ctx, store.AuditEntry{
		ProjectID: p.ID, Actor: "ada@example.com", Addr: "192.0.2.7", Action: "tool.update", Target: "search",
		Before: json.RawMessage(`{"disabled":false}`), After: json.RawMessage(`{"disabled":true}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	clk.check(t, "At", first.At)
	add := func(project int64, actor, action, target string) store.AuditEntry {
		t.Helper()
		e, err := s.AppendAudit(ctx, store.AuditEntry{ProjectID: project, Actor: actor, Action: action, Target: target})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for i := range 5 {
		add(p.ID, "token tok_a (ci)", "key.create", fmt.Sprintf("key_%d", i))
	}
	add(q.ID, "bob@example.com", "tool.update", "other")
	add(0, "cli", "token.create", "tok_x")
	last := add(p.ID, "bob@example.com", "tool.approve", "search")

	all, err := s.Audit(ctx, store.AuditFilter{ProjectID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 7 || all[0].ID != last.ID || all[6].ID != first.ID {
		t.Fatalf("Audit(alpha) = %d entries, first %+v; want 7, newest first", len(all), all[0])
	}
	if diff := cmp.Diff(first, all[6], cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("the first entry came back changed (-want +got):\n%s", diff)
	}
	if string(all[0].Before) != "null" || string(all[0].After) != "null" {
		t.Errorf("empty Before/After came back as %s/%s, want null", all[0].Before, all[0].After)
	}
	page, err := s.Audit(ctx, store.AuditFilter{ProjectID: p.ID, Limit: 3})
	if err != nil || len(page) != 3 {
		t.Fatalf("a page of 3 = %d, %v", len(page), err)
	}
	next, err := s.Audit(ctx, store.AuditFilter{ProjectID: p.ID, Limit: 3, BeforeID: page[2].ID})
	if err != nil || len(next) != 3 || next[0].ID >= page[2].ID {
		t.Errorf("the next page = %+v, %v; want 3 older entries", next, err)
	}
	for _, c := range []struct {
		f    store.AuditFilter
		want int
	}{
		{store.AuditFilter{ProjectID: p.ID, Action: "key.create"}, 5},
		{store.AuditFilter{ProjectID: p.ID, Action: "tool."}, 2},
		{store.AuditFilter{ProjectID: p.ID, Action: "tool"}, 0},
		{store.AuditFilter{ProjectID: p.ID, Actor: "bob@example.com"}, 1},
		{store.AuditFilter{ProjectID: q.ID}, 1},
		{store.AuditFilter{ProjectID: 0}, 1},
		{store.AuditFilter{ProjectID: p.ID, Since: time.Now().Add(time.Hour)}, 0},
	} {
		if got, err := s.Audit(ctx, c.f); err != nil || len(got) != c.want {
			t.Errorf("Audit(%+v) = %d entries, %v; want %d", c.f, len(got), err, c.want)
		}
	}
	if n, err := s.PruneAudit(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Errorf("PruneAudit(an hour ago) = %d, %v; want 0", n, err)
	}
	if n, err := s.PruneAudit(ctx, time.Now().Add(time.Second)); err != nil || n != 9 {
		t.Errorf("PruneAudit(now) = %d, %v; want 9", n, err)
	}
}

// testUserAdminAndDelete: the admin flag is given and taken; deleting a
// user ends their sessions and memberships and frees their email.
func testUserAdminAndDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "alpha")
	bob := mustUser(t, s, "bob@example.com", false)
	if err := s.SetAdmin(ctx, bob.ID, true); err != nil {
		t.Fatal(err)
	}
	if u, err := s.UserByID(ctx, bob.ID); err != nil || !u.Admin {
		t.Errorf("after SetAdmin(true) = %+v, %v; want admin", u, err)
	}
	wantErr(t, "SetAdmin(unknown)", s.SetAdmin(ctx, 9999, true), store.ErrNotFound)
	if _, err := s.SetMember(ctx, store.Member{ProjectID: p.ID, UserID: bob.ID, Role: store.RoleOwner}); err != nil {
		t.Fatal(err)
	}
	sess := mustSession(t, s, bob.ID, "bob-session")
	if err := s.DeleteUser(ctx, bob.ID); err != nil {
		t.Fatal(err)
	}
	_, err := s.UserByID(ctx, bob.ID)
	wantErr(t, "UserByID after DeleteUser", err, store.ErrNotFound)
	_, err = s.SessionByHash(ctx, hash(sess))
	wantErr(t, "SessionByHash after DeleteUser", err, store.ErrNotFound)
	if ms, err := s.Members(ctx, p.ID); err != nil || len(ms) != 0 {
		t.Errorf("Members after DeleteUser = %+v, %v; want none", ms, err)
	}
	wantErr(t, "DeleteUser twice", s.DeleteUser(ctx, bob.ID), store.ErrNotFound)
	if _, err := s.CreateUser(ctx, store.User{Email: "bob@example.com"}, "h"); err != nil {
		t.Errorf("CreateUser with a deleted user's email: %v", err)
	}
}

// testAcceptInvite: a person with an account joins by accepting a project
// invite, once, with the invite's role; a member keeps their role; an
// invite that cannot be accepted stays as it was.
func testAcceptInvite(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "alpha")
	ada, bob := mustUser(t, s, "ada@example.com", false), mustUser(t, s, "bob@example.com", false)
	invite := func(id string, projectID int64, role store.Role) {
		t.Helper()
		if _, err := s.CreateInvite(ctx, store.Invite{ID: id, Email: "bob@example.com", ProjectID: projectID, Role: role, CreatedBy: ada.ID,
			ExpiresAt: time.Now().Add(time.Hour)}, hash(id)); err != nil {
			t.Fatal(err)
		}
	}
	live := func(what, id string) {
		t.Helper()
		if _, err := s.InviteByHash(ctx, hash(id)); err != nil {
			t.Errorf("%s: the invite is no longer live: %v", what, err)
		}
	}

	invite("inv_editor", p.ID, store.RoleEditor)
	if _, err := s.Member(ctx, p.ID, bob.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob is a member before accepting: %v", err)
	}
	clk := startClock()
	inv, m, err := s.AcceptInvite(ctx, hash("inv_editor"), bob.ID)
	if err != nil {
		t.Fatal(err)
	}
	clk.check(t, "UsedAt", inv.UsedAt)
	clk.check(t, "CreatedAt", m.CreatedAt)
	if inv.ID != "inv_editor" || inv.ProjectID != p.ID || inv.Role != store.RoleEditor {
		t.Errorf("AcceptInvite invite = %+v; want inv_editor, alpha, editor", inv)
	}
	want := store.Member{ProjectID: p.ID, UserID: bob.ID, Email: "bob@example.com", Role: store.RoleEditor, CreatedAt: m.CreatedAt}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("AcceptInvite member mismatch (-want +got):\n%s", diff)
	}
	if got, err := s.Member(ctx, p.ID, bob.ID); err != nil || got != m {
		t.Errorf("Member after AcceptInvite = %+v, %v; want %+v", got, err, m)
	}
	_, _, err = s.AcceptInvite(ctx, hash("inv_editor"), bob.ID)
	wantErr(t, "AcceptInvite twice", err, store.ErrNotFound)
	_, err = s.InviteByHash(ctx, hash("inv_editor"))
	wantErr(t, "InviteByHash after AcceptInvite", err, store.ErrNotFound)

	// A member already keeps their role; the invite is used.
	invite("inv_viewer", p.ID, store.RoleViewer)
	if _, m, err := s.AcceptInvite(ctx, hash("inv_viewer"), bob.ID); err != nil || m.Role != store.RoleEditor {
		t.Errorf("AcceptInvite as a member = %+v, %v; want editor kept", m, err)
	}
	_, err = s.InviteByHash(ctx, hash("inv_viewer"))
	wantErr(t, "InviteByHash after accepting as a member", err, store.ErrNotFound)

	// What cannot be accepted is left as it was.
	_, _, err = s.AcceptInvite(ctx, hash("no such invite"), bob.ID)
	wantErr(t, "AcceptInvite of an unknown invite", err, store.ErrNotFound)
	invite("inv_unknown_user", p.ID, store.RoleOwner)
	_, _, err = s.AcceptInvite(ctx, hash("inv_unknown_user"), 9999)
	wantErr(t, "AcceptInvite by an unknown user", err, store.ErrNotFound)
	live("after an unknown user", "inv_unknown_user")
	invite("inv_instance", 0, "")
	_, _, err = s.AcceptInvite(ctx, hash("inv_instance"), ada.ID)
	wantErr(t, "AcceptInvite of an instance invite", err, store.ErrNotFound)
	live("after accepting an instance invite", "inv_instance")
	invite("inv_revoked", p.ID, store.RoleOwner)
	if err := s.RevokeInvite(ctx, "inv_revoked"); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.AcceptInvite(ctx, hash("inv_revoked"), ada.ID)
	wantErr(t, "AcceptInvite of a revoked invite", err, store.ErrNotFound)
	if _, err := s.Member(ctx, p.ID, ada.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ada became a member through a revoked invite: %v", err)
	}
}
