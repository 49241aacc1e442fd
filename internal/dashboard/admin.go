package dashboard

import (
	"net/http"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/users"
)

type userJSON struct {
	ID        int64     `json:"id"`
	Email     string    `json:"email"`
	Admin     bool      `json:"admin"`
	CreatedAt time.Time `json:"createdAt"`
}

// tokenJSON is an API token without its secret. Project and Role are
// empty for an instance token.
type tokenJSON struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Project   string     `json:"project,omitempty"`
	Role      store.Role `json:"role,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	Revoked   bool       `json:"revoked"`
}

func tokenOut(t store.APIToken, project string) tokenJSON {
	return tokenJSON{ID: t.ID, Name: t.Name, Project: project, Role: t.Role, CreatedAt: t.CreatedAt, Revoked: t.Revoked()}
}

// projectNames maps project ids to names, for listings.
func (d *Dashboard) projectNames(r *http.Request) (map[int64]string, error) {
	ps, err := d.st.Projects(r.Context())
	if err != nil {
		return nil, err
	}
	out := make(map[int64]string, len(ps))
	for _, p := range ps {
		out[p.ID] = p.Name
	}
	return out, nil
}

func (d *Dashboard) apiUsers(w http.ResponseWriter, r *http.Request) error {
	us, err := d.st.Users(r.Context())
	if err != nil {
		return err
	}
	out := make([]userJSON, 0, len(us))
	for _, u := range us {
		out = append(out, userJSON{u.ID, u.Email, u.Admin, u.CreatedAt})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// apiInvite makes a one-time sign-up link. Only a signed-in admin may: the
// invite records who made it.
func (d *Dashboard) apiInvite(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Email string `json:"email"`
		Admin bool   `json:"admin"`
	}
	if err := readJSON(r, &in); err != nil {
		return err
	}
	in.Email = strings.TrimSpace(in.Email)
	if in.Email != "" {
		if a, err := mail.ParseAddress(in.Email); err != nil || a.Name != "" {
			return fieldError("email", "want an address such as bob@example.com, or nothing for an invite anyone may use")
		}
	}
	p := principalFrom(r.Context())
	path, err := users.Invite(r.Context(), d.st, p.user, in.Email, in.Admin)
	if err != nil {
		return err
	}
	d.log.Info("invite created", "for", in.Email, "admin", in.Admin, "by", p.name())
	d.audit(r, 0, "invite.create", in.Email, nil, map[string]any{"email": in.Email, "admin": in.Admin})
	writeJSON(w, http.StatusCreated, map[string]any{
		"url": d.base(r) + path, "expiresAt": time.Now().Add(users.InviteLifetime).UTC(),
	})
	return nil
}

func (d *Dashboard) apiTokens(w http.ResponseWriter, r *http.Request) error {
	ts, err := d.st.APITokens(r.Context())
	if err != nil {
		return err
	}
	names, err := d.projectNames(r)
	if err != nil {
		return err
	}
	out := make([]tokenJSON, 0, len(ts))
	for _, t := range ts {
		out = append(out, tokenOut(t, names[t.ProjectID]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (d *Dashboard) apiCreateToken(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Name string `json:"name"`
	}
	if err := readJSON(r, &in); err != nil {
		return err
	}
	p := principalFrom(r.Context())
	tok, secret, err := users.CreateAPIToken(r.Context(), d.st, strings.TrimSpace(in.Name), p.user.ID)
	if err != nil {
		return err
	}
	d.log.Info("admin API token created", "token", tok.ID, "by", p.name())
	d.audit(r, 0, "token.create", tok.ID, nil, store.TokenAudit(tok))
	writeJSON(w, http.StatusCreated, struct {
		Token  tokenJSON `json:"token"`
		Secret string    `json:"secret"`
	}{tokenOut(tok, ""), secret})
	return nil
}

func (d *Dashboard) apiRevokeToken(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	ts, err := d.st.APITokens(r.Context())
	if err != nil {
		return err
	}
	i := slices.IndexFunc(ts, func(t store.APIToken) bool { return t.ID == id })
	if i < 0 {
		return errorf(http.StatusNotFound, "There is no API token %q. GET /api/tokens lists them.", id)
	}
	if err := d.st.RevokeAPIToken(r.Context(), id); err != nil {
		return err
	}
	d.log.Info("admin API token revoked", "token", id, "by", principalFrom(r.Context()).name())
	after := store.TokenAudit(ts[i])
	after["revoked"] = true
	d.audit(r, ts[i].ProjectID, "token.revoke", id, store.TokenAudit(ts[i]), after)
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "revoked": true})
	return nil
}
