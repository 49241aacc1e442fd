package dashboard

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/spacefix/spacefix/internal/store"
)

// need is what a route asks of whoever calls it. Every API route and page
// declares one, and the wrappers ([Dashboard.api], [Dashboard.page]) check
// it before the handler runs, so a handler cannot forget.
type need struct {
	// admin: only an instance admin (an admin person or an instance
	// token).
	admin bool
	// role: the least role in the project named in the path; required
	// for every route with {project}.
	role store.Role
}

var (
	signedIn      = need{}
	instanceAdmin = need{admin: true}
	viewer        = need{role: store.RoleViewer}
	editor        = need{role: store.RoleEditor}
	owner         = need{role: store.RoleOwner}
)

// projectAccess is the project a request acts on and the caller's role in
// it, set by the wrappers.
type projectAccess struct {
	project store.Project
	role    store.Role
}

type projectKey struct{}

func accessFrom(ctx context.Context) (projectAccess, bool) {
	a, ok := ctx.Value(projectKey{}).(projectAccess)
	return a, ok
}

// roleIn is p's role in a project: owner for instance admins, a project
// token's own role in its project, a person's membership; "" for none.
func (d *Dashboard) roleIn(ctx context.Context, p principal, proj store.Project) (store.Role, error) {
	switch {
	case p.admin():
		return store.RoleOwner, nil
	case p.token != nil:
		if p.token.ProjectID == proj.ID {
			return p.token.Role, nil
		}
		return "", nil
	}
	m, err := d.st.Member(ctx, proj.ID, p.user.ID)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	return m.Role, err
}

// visibleProjects lists the projects p may see: all for an instance admin,
// else those p is a member of (a project token: its own).
func (d *Dashboard) visibleProjects(ctx context.Context, p principal) ([]store.Project, error) {
	ps, err := d.st.Projects(ctx)
	if err != nil || p.admin() {
		return ps, err
	}
	if p.token != nil {
		return slices.DeleteFunc(ps, func(q store.Project) bool { return q.ID != p.token.ProjectID }), nil
	}
	ms, err := d.st.Memberships(ctx, p.user.ID)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ps, func(q store.Project) bool {
		return !slices.ContainsFunc(ms, func(m store.Member) bool { return m.ProjectID == q.ID })
	}), nil
}

// check enforces n for p on r: it returns r with the project access in its
// context, or the error to answer with. A project p may not see is
// answered like one that does not exist.
func (d *Dashboard) check(r *http.Request, p principal, n need) (*http.Request, error) {
	if n.admin && !p.admin() {
		return nil, errorf(http.StatusForbidden, "Only an instance admin may do this. Ask an admin of this gateway.")
	}
	if n.role == "" {
		return r, nil
	}
	proj, err := d.loadProject(r)
	if err != nil {
		return nil, err
	}
	role, err := d.roleIn(r.Context(), p, proj)
	if err != nil {
		return nil, err
	}
	if role == "" {
		return nil, noProject(proj.Name)
	}
	if !role.AtLeast(n.role) {
		return nil, errorf(http.StatusForbidden, "%s needs the %s role in project %q; %s %s. %s",
			actionName(r), roleNeeded(n.role), proj.Name, p.you(), article(role), askOwner)
	}
	return r.WithContext(context.WithValue(r.Context(), projectKey{}, projectAccess{proj, role})), nil
}

const askOwner = "Ask an owner of the project (its Members page lists them)."

// roleNeeded says who may: "editor or owner" for editor.
func roleNeeded(r store.Role) string {
	switch r {
	case store.RoleViewer:
		return "viewer, editor or owner"
	case store.RoleEditor:
		return "editor or owner"
	}
	return string(r)
}

func article(r store.Role) string { return "a " + string(r) }

// you says who the caller is, for messages: "you are", "this token is".
func (p principal) you() string {
	if p.token != nil {
		return "this token is"
	}
	return "you are"
}

// actionName names the request for messages.
func actionName(r *http.Request) string {
	if r.Method == http.MethodGet {
		return "Viewing this"
	}
	return "This change"
}

func noProject(name string) error {
	return errorf(http.StatusNotFound, "There is no project %q, or you are not a member of it. Pick one from the list of projects.", name)
}

// audit records a change in the audit log: who (from the request), from
// where, what, and the values before and after, which must hold no secret.
// The change is made already, so a failure to record it is logged with
// everything the entry would have held rather than undoing the change.
func (d *Dashboard) audit(r *http.Request, projectID int64, action, target string, before, after any) {
	e := store.NewAuditEntry(projectID, principalFrom(r.Context()).name(), clientAddr(r), action, target, before, after)
	if _, err := d.st.AppendAudit(r.Context(), e); err != nil {
		d.log.Error("audit log: entry not saved", "project", projectID, "actor", e.Actor, "addr", e.Addr,
			"action", action, "target", target, "before", string(e.Before), "after", string(e.After), "err", err)
	}
}
