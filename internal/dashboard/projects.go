package dashboard

import (
	"errors"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/store"
)

type projectJSON = apitypes.Project

func (d *Dashboard) projectOut(r *http.Request, p store.Project) projectJSON {
	return projectJSON{ID: p.ID, Name: p.Name, CreatedAt: p.CreatedAt, MCPURL: d.base(r) + "/mcp", Settings: settingsOut(p.Settings)}
}

func (d *Dashboard) apiMe(w http.ResponseWriter, r *http.Request) error {
	p := principalFrom(r.Context())
	out := map[string]any{"admin": p.admin()}
	if p.token != nil {
		out["token"] = p.token.ID
		if p.token.ProjectID != 0 {
			names, err := d.projectNames(r)
			if err != nil {
				return err
			}
			out["project"], out["role"] = names[p.token.ProjectID], p.token.Role
		}
	} else {
		out["email"], out["name"] = p.user.Email, p.user.Name
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// apiPatchMe sets the name a signed-in person gives themselves: agents see
// it as the caller's name (core.Person.Name, the identity token's name)
// within a minute. Audited as user.update.
func (d *Dashboard) apiPatchMe(w http.ResponseWriter, r *http.Request) error {
	p := principalFrom(r.Context())
	if p.token != nil {
		return errorf(http.StatusBadRequest, "An API token has no name to set; sign in to the dashboard as the person.")
	}
	var in struct {
		Name *string `json:"name"`
	}
	if err := readJSON(r, &in); err != nil {
		return err
	}
	if in.Name == nil {
		return fieldError("name", "missing; send the name to set, or an empty one to take it away")
	}
	name, err := personName(*in.Name)
	if err != nil {
		return err
	}
	if err := d.st.SetUserName(r.Context(), p.user.ID, name); err != nil {
		return err
	}
	d.audit(r, 0, "user.update", p.user.Email, map[string]string{"name": p.user.Name}, map[string]string{"name": name})
	writeJSON(w, http.StatusOK, map[string]any{"email": p.user.Email, "name": name})
	return nil
}

// personName is a name as a person typed it, trimmed; refused when too
// long or with control characters, which no name has.
func personName(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case len(s) > store.MaxUserName:
		return "", fieldError("name", "%d bytes; use at most %d", len(s), store.MaxUserName)
	case !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0:
		return "", fieldError("name", "use letters, spaces and punctuation only, no control characters")
	}
	return s, nil
}

func (d *Dashboard) apiProjects(w http.ResponseWriter, r *http.Request) error {
	ps, err := d.visibleProjects(r.Context(), principalFrom(r.Context()))
	if err != nil {
		return err
	}
	out := make([]projectJSON, 0, len(ps))
	for _, p := range ps {
		out = append(out, d.projectOut(r, p))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (d *Dashboard) apiCreateProject(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Name string `json:"name"`
	}
	if err := readJSON(r, &in); err != nil {
		return err
	}
	in.Name = strings.TrimSpace(in.Name)
	if !agentproto.ValidName(in.Name) {
		return fieldError("name", "a project name is 1 to 64 characters from A-Z a-z 0-9 _ -, not %q", in.Name)
	}
	p, err := d.st.CreateProject(r.Context(), in.Name)
	if errors.Is(err, store.ErrExists) {
		return errorf(http.StatusConflict, "A project named %q exists already. Choose another name.", in.Name)
	}
	if err != nil {
		return err
	}
	// The person who makes a project is its first owner.
	if by := principalFrom(r.Context()); by.token == nil {
		if _, err := d.st.SetMember(r.Context(), store.Member{ProjectID: p.ID, UserID: by.user.ID, Role: store.RoleOwner}); err != nil {
			return err
		}
	}
	d.log.Info("project created", "project", p.Name, "by", principalFrom(r.Context()).name())
	d.audit(r, p.ID, "project.create", p.Name, nil, map[string]any{"name": p.Name})
	writeJSON(w, http.StatusCreated, d.projectOut(r, p))
	return nil
}

func (d *Dashboard) apiProject(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d.projectOut(r, p))
	return nil
}
