package dashboard

import (
	"errors"
	"net/http"
	"net/mail"
	"slices"
	"strconv"
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

// userOf loads the user named in the path.
func (d *Dashboard) userOf(r *http.Request) (store.User, error) {
	missing := errorf(http.StatusNotFound, "There is no user with id %q. GET /api/users lists them.", r.PathValue("id"))
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return store.User{}, missing
	}
	u, err := d.st.UserByID(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return store.User{}, missing
	}
	return u, err
}

// keepsAnAdmin refuses a change that would leave the gateway without an
// admin person.
func (d *Dashboard) keepsAnAdmin(r *http.Request, u store.User) error {
	if !u.Admin {
		return nil
	}
	us, err := d.st.Users(r.Context())
	if err != nil {
		return err
	}
	for _, o := range us {
		if o.Admin && o.ID != u.ID {
			return nil
		}
	}
	return errorf(http.StatusConflict, "%s is the last admin of this gateway. Make someone else an admin first.", u.Email)
}

// apiPatchUser gives or takes the instance admin flag.
func (d *Dashboard) apiPatchUser(w http.ResponseWriter, r *http.Request) error {
	u, err := d.userOf(r)
	if err != nil {
		return err
	}
	var in struct {
		Admin *bool `json:"admin"`
	}
	if err := readJSON(r, &in); err != nil {
		return err
	}
	if in.Admin == nil {
		return fieldError("admin", "send {\"admin\": true} or {\"admin\": false}")
	}
	if !*in.Admin {
		if err := d.keepsAnAdmin(r, u); err != nil {
			return err
		}
	}
	if err := d.st.SetAdmin(r.Context(), u.ID, *in.Admin); err != nil {
		return err
	}
	d.log.Info("user admin flag set", "user", u.Email, "admin", *in.Admin, "by", principalFrom(r.Context()).name())
	d.audit(r, 0, "user.update", u.Email, map[string]any{"email": u.Email, "admin": u.Admin}, map[string]any{"email": u.Email, "admin": *in.Admin})
	u.Admin = *in.Admin
	writeJSON(w, http.StatusOK, userJSON{u.ID, u.Email, u.Admin, u.CreatedAt})
	return nil
}

// apiDeleteUser removes a person: their sessions end, their memberships
// go, and the OAuth apps and upstream accounts they connected are
// disconnected.
func (d *Dashboard) apiDeleteUser(w http.ResponseWriter, r *http.Request) error {
	u, err := d.userOf(r)
	if err != nil {
		return err
	}
	if err := d.keepsAnAdmin(r, u); err != nil {
		return err
	}
	ms, err := d.st.Memberships(r.Context(), u.ID)
	if err != nil {
		return err
	}
	accounts, err := d.accountsGoing(r.Context(), store.UpstreamFilter{UserID: u.ID})
	if err != nil {
		return err
	}
	if err := d.st.DeleteUser(r.Context(), u.ID); err != nil {
		return err
	}
	ps, err := d.st.Projects(r.Context())
	if err != nil {
		return err
	}
	for _, p := range ps {
		if err := d.revokeGrantsOf(r, p.ID, u.ID, false); err != nil {
			return err
		}
	}
	d.log.Info("user removed", "user", u.Email, "by", principalFrom(r.Context()).name())
	roles := map[string]store.Role{}
	names, _ := d.projectNames(r)
	for _, m := range ms {
		roles[names[m.ProjectID]] = m.Role
	}
	d.audit(r, 0, "user.remove", u.Email, map[string]any{"email": u.Email, "admin": u.Admin, "projects": roles}, nil)
	d.auditGone(r, accounts, u.Email)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
