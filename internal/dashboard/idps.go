package dashboard

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/spacefix/spacefix/internal/oauth"
	"github.com/spacefix/spacefix/internal/store"
)

// idpJSON is a trusted identity provider as the admin API shows it.
type idpJSON struct {
	Issuer           string     `json:"issuer"`
	JWKSURI          string     `json:"jwksUri,omitempty"`
	AllowedClients   []string   `json:"allowedClients"`
	ProvisionProject string     `json:"provisionProject,omitempty"`
	ProvisionRole    store.Role `json:"provisionRole,omitempty"`
	CreatedAt        time.Time  `json:"createdAt"`
}

func idpOut(p store.IdP, project string) idpJSON {
	return idpJSON{Issuer: p.Issuer, JWKSURI: p.JWKSURI, AllowedClients: p.AllowedClients,
		ProvisionProject: project, ProvisionRole: p.ProvisionRole, CreatedAt: p.CreatedAt}
}

func (d *Dashboard) apiIdPs(w http.ResponseWriter, r *http.Request) error {
	ps, err := d.st.IdPs(r.Context())
	if err != nil {
		return err
	}
	names, err := d.projectNames(r)
	if err != nil {
		return err
	}
	out := make([]idpJSON, 0, len(ps))
	for _, p := range ps {
		out = append(out, idpOut(p, names[p.ProvisionProjectID]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// apiAddIdP trusts an identity provider's ID-JAGs, instance-wide.
func (d *Dashboard) apiAddIdP(w http.ResponseWriter, r *http.Request) error {
	var in idpJSON
	if err := readJSON(r, &in); err != nil {
		return err
	}
	p := store.IdP{Issuer: in.Issuer, JWKSURI: in.JWKSURI, AllowedClients: in.AllowedClients, ProvisionRole: in.ProvisionRole}
	if in.ProvisionProject != "" {
		pr, err := d.st.Project(r.Context(), in.ProvisionProject)
		if errors.Is(err, store.ErrNotFound) {
			return fieldError("provisionProject", "there is no project %q; GET /api/projects lists them", in.ProvisionProject)
		}
		if err != nil {
			return err
		}
		p.ProvisionProjectID = pr.ID
	}
	p, err := oauth.CheckIdP(p)
	if err != nil {
		return errorf(http.StatusBadRequest, "%s", err.Error())
	}
	created, err := d.st.CreateIdP(r.Context(), p)
	if errors.Is(err, store.ErrExists) {
		return errorf(http.StatusConflict, "The identity provider %s is trusted already. Remove it first to change it: DELETE /api/idps?issuer=…", p.Issuer)
	}
	if err != nil {
		return err
	}
	p = created
	d.log.Info("identity provider trusted", "issuer", p.Issuer, "by", principalFrom(r.Context()).name())
	d.audit(r, 0, "idp.add", p.Issuer, nil, store.IdPAudit(p, in.ProvisionProject))
	writeJSON(w, http.StatusCreated, idpOut(p, in.ProvisionProject))
	return nil
}

// apiRemoveIdP stops trusting an identity provider: its ID-JAGs are
// refused from then on; tokens issued for them run out within the hour.
func (d *Dashboard) apiRemoveIdP(w http.ResponseWriter, r *http.Request) error {
	issuer := r.URL.Query().Get("issuer")
	if issuer == "" {
		return fieldError("issuer", "name the identity provider: DELETE /api/idps?issuer=https://…")
	}
	p, err := d.st.IdP(r.Context(), issuer)
	if err == nil {
		err = d.st.DeleteIdP(r.Context(), issuer)
	}
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "There is no trusted identity provider %s. GET /api/idps lists them.", issuer)
	}
	if err != nil {
		return err
	}
	names, _ := d.projectNames(r)
	d.log.Info("identity provider removed", "issuer", issuer, "by", principalFrom(r.Context()).name())
	d.audit(r, 0, "idp.remove", issuer, store.IdPAudit(p, names[p.ProvisionProjectID]), nil)
	writeJSON(w, http.StatusOK, map[string]any{"issuer": issuer, "removed": true})
	return nil
}

// idpsFor fills the Admin page's identity providers card.
func (d *Dashboard) idpsFor(r *http.Request, data *adminData, names map[int64]string) error {
	ps, err := d.st.IdPs(r.Context())
	if err != nil {
		return err
	}
	for _, p := range ps {
		data.IdPs = append(data.IdPs, idpOut(p, names[p.ProvisionProjectID]))
	}
	for _, n := range names {
		data.Projects = append(data.Projects, n)
	}
	slices.Sort(data.Projects)
	return nil
}
