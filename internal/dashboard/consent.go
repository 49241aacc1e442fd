package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"slices"

	"github.com/spacefix/spacefix/internal/oauth"
	"github.com/spacefix/spacefix/internal/store"
)

// consentData is what the OAuth consent page shows.
type consentData struct {
	Req      *oauth.AuthRequest
	Projects []store.Project
	CanWrite bool // the app asked for mcp:write
	Error    string
	// Write and Project are what the form starts with: the person's last
	// choice for this app if they connected it before (and it is still
	// connected), else read only and the first project. The least access
	// is the default; more is a choice.
	Write   bool
	Project string
}

// authorizeGate checks an authorization request and the person making it.
// It answers the request itself (an error page, a redirect back to the app
// with an error, or to the sign-in page) and returns ok false when there
// is nothing more to do.
func (d *Dashboard) authorizeGate(w http.ResponseWriter, r *http.Request) (*oauth.AuthRequest, principal, bool) {
	v := &view{Title: "Sign-in request", Version: d.version}
	if d.oauth == nil {
		d.renderError(w, r, v, errorf(http.StatusNotFound, "OAuth sign-in is turned off on this gateway (--oauth=false). Use a client key."))
		return nil, principal{}, false
	}
	a, err := d.oauth.ParseAuthorize(r)
	var (
		pe *oauth.PageError
		re *oauth.RedirectError
	)
	switch {
	case errors.As(err, &pe):
		d.renderError(w, r, v, errorf(http.StatusBadRequest, "%s", pe.Message))
		return nil, principal{}, false
	case errors.As(err, &re):
		http.Redirect(w, r, re.URL, http.StatusSeeOther)
		return nil, principal{}, false
	case err != nil:
		d.serverError(w, r, "check an OAuth authorization request", err)
		return nil, principal{}, false
	}
	p, ok, err := d.authenticate(r)
	if err != nil {
		d.serverError(w, r, "authenticate", err)
		return nil, principal{}, false
	}
	if !ok || p.token != nil {
		next := r.URL.Path + "?" + a.Params.Encode()
		http.Redirect(w, r, "/login?next="+url.QueryEscape(next), http.StatusSeeOther)
		return nil, principal{}, false
	}
	return a, p, true
}

// consentPage asks the signed-in person whether the app may reach one of
// their projects, and how.
func (d *Dashboard) consentPage(w http.ResponseWriter, r *http.Request) {
	a, p, ok := d.authorizeGate(w, r)
	if !ok {
		return
	}
	d.renderConsent(w, r, http.StatusOK, a, p, "")
}

func (d *Dashboard) renderConsent(w http.ResponseWriter, r *http.Request, status int, a *oauth.AuthRequest, p principal, msg string) {
	projects, err := d.projectsOf(r, p)
	if err != nil {
		d.serverError(w, r, "list projects", err)
		return
	}
	data := consentData{Req: a, Projects: projects, CanWrite: oauth.Writes(a.Scope), Error: msg}
	if g, ok := d.lastChoice(r, p, a.ClientID, projects); ok {
		data.Write, data.Project = data.CanWrite && oauth.Writes(g.Scope), g.ProjectName
	}
	v := &view{Title: "Allow " + a.ClientName + "?", User: p.user, Version: d.version, Data: data}
	d.render(w, status, "consent", v)
}

// lastChoice is the newest connection the person made for the app (by
// its client id) to one of projects that is still connected.
func (d *Dashboard) lastChoice(r *http.Request, p principal, clientID string, projects []store.Project) (store.OAuthGrant, bool) {
	var last store.OAuthGrant
	found := false
	for _, pr := range projects {
		gs, err := d.st.OAuthGrants(r.Context(), pr.ID)
		if err != nil {
			d.log.Warn("consent: read earlier connections", "project", pr.Name, "err", err)
			continue
		}
		for _, g := range gs {
			if g.UserID == p.user.ID && g.ClientID == clientID && (!found || g.CreatedAt.After(last.CreatedAt)) {
				last, found = g, true
				last.ProjectName = pr.Name
			}
		}
	}
	return last, found
}

// projectsOf lists the projects a person may connect an app to: those
// they are a member of (instance admins: all).
func (d *Dashboard) projectsOf(r *http.Request, p principal) ([]store.Project, error) {
	return d.visibleProjects(r.Context(), p)
}

// consent takes the person's decision: the browser goes back to the app
// with a code, or with access_denied.
func (d *Dashboard) consent(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		d.renderError(w, r, &view{Version: d.version}, errorf(http.StatusBadRequest, "The form could not be read. Start the sign-in from the app again."))
		return
	}
	a, p, ok := d.authorizeGate(w, r)
	if !ok {
		return
	}
	if r.PostFormValue("decision") != "approve" {
		d.log.Info("OAuth sign-in declined", "user", p.name(), "client", a.ClientName)
		http.Redirect(w, r, a.Deny(), http.StatusSeeOther)
		return
	}
	projects, err := d.projectsOf(r, p)
	if err != nil {
		d.serverError(w, r, "list projects", err)
		return
	}
	name := r.PostFormValue("project")
	i := slices.IndexFunc(projects, func(pr store.Project) bool { return pr.Name == name })
	if i < 0 {
		d.renderConsent(w, r, http.StatusBadRequest, a, p, "Pick one of your projects.")
		return
	}
	write := r.PostFormValue("access") == "write"
	if write {
		// Read and write access lets the app call tools that change
		// things; a viewer can only give what a viewer has.
		role, err := d.roleIn(r.Context(), p, projects[i])
		if err != nil {
			d.serverError(w, r, "check the role", err)
			return
		}
		if !role.AtLeast(store.RoleEditor) {
			d.renderConsent(w, r, http.StatusForbidden, a, p, "You are a viewer in "+name+", so you can give the app read-only access. "+askOwner)
			return
		}
	}
	to, err := d.oauth.Approve(r.Context(), a, p.user.ID, projects[i].ID, write)
	if err != nil {
		d.serverError(w, r, "issue an OAuth code", err)
		return
	}
	d.log.Info("OAuth sign-in approved", "user", p.name(), "client", a.ClientName, "project", name, "write", write)
	r = r.WithContext(withPrincipal(r.Context(), p))
	d.audit(r, projects[i].ID, "app.connect", a.ClientName, nil, map[string]any{"client": a.ClientName, "clientId": a.ClientID, "readOnly": !write})
	http.Redirect(w, r, to, http.StatusSeeOther)
}
