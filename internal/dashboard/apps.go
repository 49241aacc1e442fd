package dashboard

import (
	"errors"
	"net/http"
	"time"

	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/oauth"
	"github.com/spacefix/spacefix/internal/store"
)

// appJSON is a connected app: an OAuth grant, without any secret.
type appJSON struct {
	ID         string    `json:"id"`
	Client     string    `json:"client"`   // the app's name, as it gave it
	ClientID   string    `json:"clientId"` // a registered id or a metadata document URL
	ApprovedBy string    `json:"approvedBy"`
	ReadOnly   bool      `json:"readOnly"`
	CreatedAt  time.Time `json:"createdAt"`
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
}

func appOut(g store.OAuthGrant) appJSON {
	return appJSON{
		ID: g.ID, Client: g.ClientName, ClientID: g.ClientID, ApprovedBy: g.UserEmail, ReadOnly: !oauth.Writes(g.Scope),
		CreatedAt: g.CreatedAt, LastUsedAt: g.LastUsedAt,
	}
}

func (d *Dashboard) connectedApps(r *http.Request, projectID int64) ([]appJSON, error) {
	gs, err := d.st.OAuthGrants(r.Context(), projectID)
	if err != nil {
		return nil, err
	}
	out := make([]appJSON, 0, len(gs))
	for _, g := range gs {
		out = append(out, appOut(g))
	}
	return out, nil
}

func (d *Dashboard) apiApps(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	apps, err := d.connectedApps(r, p.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apps)
	return nil
}

// apiRevokeApp disconnects an app: its tokens stop working at once on
// this gateway and within a second on the others.
func (d *Dashboard) apiRevokeApp(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	g, err := d.st.OAuthGrant(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && g.ProjectID != p.ID) {
		return errorf(http.StatusNotFound, "Project %s has no connected app %q. See GET /api/projects/%s/apps.", p.Name, id, p.Name)
	}
	if err != nil {
		return err
	}
	if err := d.st.RevokeOAuthGrant(r.Context(), id); err != nil {
		return err
	}
	d.changes.Publish(changes.Change{Project: p.ID, Kind: changes.KeyRevoked, Key: id})
	d.log.Info("OAuth app disconnected", "project", p.Name, "app", id, "client", g.ClientName, "by", principalFrom(r.Context()).name())
	d.audit(r, p.ID, "app.revoke", g.ClientName, appOut(g), map[string]any{"id": id, "revoked": true})
	w.WriteHeader(http.StatusNoContent)
	return nil
}
