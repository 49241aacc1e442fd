package dashboard

import (
	"errors"
	"net/http"
	"strings"

	"github.com/spacefix/spacefix/core/agentproto"
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
		out["email"] = p.user.Email
	}
	writeJSON(w, http.StatusOK, out)
	return nil
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
