package dashboard

import (
	"errors"
	"net/http"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/oauth"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/users"
)

// memberJSON is a project member.
type memberJSON struct {
	UserID   int64      `json:"userId"`
	Email    string     `json:"email"`
	Role     store.Role `json:"role"`
	JoinedAt time.Time  `json:"joinedAt"`
}

func memberOut(m store.Member) memberJSON {
	return memberJSON{m.UserID, m.Email, m.Role, m.CreatedAt}
}

// memberAudit is what the audit log keeps of a membership.
type memberAudit struct {
	Email string     `json:"email"`
	Role  store.Role `json:"role"`
}

func (d *Dashboard) apiMembers(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	ms, err := d.st.Members(r.Context(), p.ID)
	if err != nil {
		return err
	}
	out := make([]memberJSON, 0, len(ms))
	for _, m := range ms {
		out = append(out, memberOut(m))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func roleField(role store.Role) error {
	if !role.Valid() {
		return fieldError("role", "want viewer, editor or owner, not %q", role)
	}
	return nil
}

// apiAddMember invites a person to the project with a role. Everyone gets
// an invite link, whether or not they have an account: the answer (status,
// shape and wording) must not tell an owner whether an address is known
// here, and nobody joins a project without agreeing. A person with an
// account signs in and accepts (see [Dashboard.acceptInvite]); anyone else
// sets up an account with the link, as before. Only someone who is a
// member already is refused: the members list shows them anyway.
func (d *Dashboard) apiAddMember(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	var in struct {
		Email string     `json:"email"`
		Role  store.Role `json:"role"`
	}
	if err := readJSON(r, &in); err != nil {
		return err
	}
	in.Email = strings.TrimSpace(in.Email)
	if a, err := mail.ParseAddress(in.Email); err != nil || a.Name != "" {
		return fieldError("email", "want an address such as bob@example.com")
	}
	if err := roleField(in.Role); err != nil {
		return err
	}
	if err := d.notYetMember(r, p, in.Email); err != nil {
		return err
	}
	by := principalFrom(r.Context())
	path, err := users.InviteToProject(r.Context(), d.st, by.user, in.Email, p.ID, in.Role)
	if err != nil {
		return err
	}
	d.log.Info("member invited", "project", p.Name, "for", in.Email, "role", in.Role, "by", by.name())
	d.audit(r, p.ID, "member.invite", in.Email, nil, memberAudit{in.Email, in.Role})
	writeJSON(w, http.StatusCreated, map[string]any{
		"invite": d.base(r) + path, "expiresAt": time.Now().Add(users.InviteLifetime).UTC(),
		"email": in.Email, "role": in.Role,
	})
	return nil
}

// notYetMember refuses to invite someone who is a member of the project
// already.
func (d *Dashboard) notYetMember(r *http.Request, p store.Project, email string) error {
	u, _, err := d.st.UserByEmail(r.Context(), email)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	m, err := d.st.Member(r.Context(), p.ID, u.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return errorf(http.StatusConflict, "%s is already a %s of project %s. Change their role with PATCH /api/projects/%s/members/%d.", u.Email, m.Role, p.Name, p.Name, u.ID)
}

// member loads the member named in the path.
func (d *Dashboard) member(r *http.Request, p store.Project) (store.Member, error) {
	missing := errorf(http.StatusNotFound, "Project %s has no member with user id %q. GET /api/projects/%s/members lists them.", p.Name, r.PathValue("user"), p.Name)
	id, err := strconv.ParseInt(r.PathValue("user"), 10, 64)
	if err != nil {
		return store.Member{}, missing
	}
	m, err := d.st.Member(r.Context(), p.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Member{}, missing
	}
	return m, err
}

// keepsAnOwner refuses a change that would leave the project without an
// owner.
func (d *Dashboard) keepsAnOwner(r *http.Request, p store.Project, m store.Member, next store.Role) error {
	if m.Role != store.RoleOwner || next == store.RoleOwner {
		return nil
	}
	ms, err := d.st.Members(r.Context(), p.ID)
	if err != nil {
		return err
	}
	for _, o := range ms {
		if o.Role == store.RoleOwner && o.UserID != m.UserID {
			return nil
		}
	}
	return errorf(http.StatusConflict, "%s is the last owner of project %s. Make someone else an owner first.", m.Email, p.Name)
}

func (d *Dashboard) apiPatchMember(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	m, err := d.member(r, p)
	if err != nil {
		return err
	}
	var in struct {
		Role store.Role `json:"role"`
	}
	if err := readJSON(r, &in); err != nil {
		return err
	}
	if err := roleField(in.Role); err != nil {
		return err
	}
	if err := d.keepsAnOwner(r, p, m, in.Role); err != nil {
		return err
	}
	next, err := d.st.SetMember(r.Context(), store.Member{ProjectID: p.ID, UserID: m.UserID, Role: in.Role})
	if err != nil {
		return err
	}
	// A viewer may give apps read-only access only: the read and write
	// ones they connected as an editor or owner are disconnected (they can
	// sign in again, read only).
	if !in.Role.AtLeast(store.RoleEditor) {
		if err := d.revokeGrantsOf(r, p.ID, m.UserID, true); err != nil {
			return err
		}
	}
	d.log.Info("member role changed", "project", p.Name, "user", m.Email, "role", in.Role, "by", principalFrom(r.Context()).name())
	d.audit(r, p.ID, "member.update", m.Email, memberAudit{m.Email, m.Role}, memberAudit{m.Email, in.Role})
	writeJSON(w, http.StatusOK, memberOut(next))
	return nil
}

// apiRemoveMember takes a person out of the project; the apps and the
// upstream accounts they connected to it are disconnected with them.
func (d *Dashboard) apiRemoveMember(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	m, err := d.member(r, p)
	if err != nil {
		return err
	}
	if err := d.keepsAnOwner(r, p, m, ""); err != nil {
		return err
	}
	accounts, err := d.accountsGoing(r.Context(), store.UpstreamFilter{ProjectID: p.ID, UserID: m.UserID})
	if err != nil {
		return err
	}
	if err := d.st.RemoveMember(r.Context(), p.ID, m.UserID); err != nil {
		return err
	}
	if err := d.revokeGrantsOf(r, p.ID, m.UserID, false); err != nil {
		return err
	}
	d.log.Info("member removed", "project", p.Name, "user", m.Email, "by", principalFrom(r.Context()).name())
	d.audit(r, p.ID, "member.remove", m.Email, memberAudit{m.Email, m.Role}, nil)
	d.auditGone(r, accounts, m.Email)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (d *Dashboard) apiProjectTokens(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	ts, err := d.projectTokens(r, p.ID)
	if err != nil {
		return err
	}
	out := make([]tokenJSON, 0, len(ts))
	for _, t := range ts {
		out = append(out, tokenOut(t, p.Name))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (d *Dashboard) projectTokens(r *http.Request, projectID int64) ([]store.APIToken, error) {
	ts, err := d.st.APITokens(r.Context())
	if err != nil {
		return nil, err
	}
	var out []store.APIToken
	for _, t := range ts {
		if t.ProjectID == projectID {
			out = append(out, t)
		}
	}
	return out, nil
}

func (d *Dashboard) apiCreateProjectToken(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	var in struct {
		Name string     `json:"name"`
		Role store.Role `json:"role"`
	}
	if err := readJSON(r, &in); err != nil {
		return err
	}
	if err := roleField(in.Role); err != nil {
		return err
	}
	by := principalFrom(r.Context())
	tok, secret, err := users.CreateProjectToken(r.Context(), d.st, strings.TrimSpace(in.Name), by.user.ID, p.ID, in.Role)
	if err != nil {
		return err
	}
	d.log.Info("project API token created", "project", p.Name, "token", tok.ID, "role", tok.Role, "by", by.name())
	d.audit(r, p.ID, "token.create", tok.ID, nil, store.TokenAudit(tok))
	writeJSON(w, http.StatusCreated, struct {
		Token  tokenJSON `json:"token"`
		Secret string    `json:"secret"`
	}{tokenOut(tok, p.Name), secret})
	return nil
}

func (d *Dashboard) apiRevokeProjectToken(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	ts, err := d.projectTokens(r, p.ID)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if t.ID != id {
			continue
		}
		if err := d.st.RevokeAPIToken(r.Context(), id); err != nil {
			return err
		}
		d.log.Info("project API token revoked", "project", p.Name, "token", id, "by", principalFrom(r.Context()).name())
		after := store.TokenAudit(t)
		after["revoked"] = true
		d.audit(r, p.ID, "token.revoke", id, store.TokenAudit(t), after)
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "revoked": true})
		return nil
	}
	return errorf(http.StatusNotFound, "Project %s has no API token %q. GET /api/projects/%s/tokens lists them.", p.Name, id, p.Name)
}

// revokeGrantsOf disconnects the OAuth apps a person connected to a
// project; with onlyWrite, those they gave read and write access only.
func (d *Dashboard) revokeGrantsOf(r *http.Request, projectID, userID int64, onlyWrite bool) error {
	gs, err := d.st.OAuthGrants(r.Context(), projectID)
	if err != nil {
		return err
	}
	for _, g := range gs {
		if g.UserID != userID || !g.RevokedAt.IsZero() || (onlyWrite && !oauth.Writes(g.Scope)) {
			continue
		}
		if err := d.st.RevokeOAuthGrant(r.Context(), g.ID); err != nil {
			return err
		}
		d.changes.Publish(changes.Change{Project: projectID, Kind: changes.KeyRevoked, Key: g.ID})
	}
	return nil
}

// inviteJSON is an invite that can still be used, without its link (shown
// once, when made).
type inviteJSON struct {
	ID        string     `json:"id"`
	Email     string     `json:"email,omitempty"` // empty: anyone with the link
	Admin     bool       `json:"admin,omitempty"`
	Project   string     `json:"project,omitempty"`
	Role      store.Role `json:"role,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt time.Time  `json:"expiresAt"`
}

// invites lists the live invites of a project (0: all of them).
func (d *Dashboard) invites(r *http.Request, projectID int64) ([]inviteJSON, error) {
	is, err := d.st.Invites(r.Context())
	if err != nil {
		return nil, err
	}
	names, err := d.projectNames(r)
	if err != nil {
		return nil, err
	}
	out := []inviteJSON{}
	for _, i := range is {
		if projectID == 0 || i.ProjectID == projectID {
			out = append(out, inviteJSON{i.ID, i.Email, i.Admin, names[i.ProjectID], i.Role, i.CreatedAt, i.ExpiresAt})
		}
	}
	return out, nil
}

func (d *Dashboard) apiProjectInvites(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	out, err := d.invites(r, p.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (d *Dashboard) apiInvites(w http.ResponseWriter, r *http.Request) error {
	out, err := d.invites(r, 0)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// revokeInvite ends a live invite of a project (0: any); the link stops
// working at once.
func (d *Dashboard) revokeInvite(w http.ResponseWriter, r *http.Request, projectID int64, where string) error {
	id := r.PathValue("id")
	is, err := d.invites(r, projectID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(is, func(in inviteJSON) bool { return in.ID == id })
	if i < 0 {
		return errorf(http.StatusNotFound, "There is no open invite %q%s; it may have been used or have expired.", id, where)
	}
	if err := d.st.RevokeInvite(r.Context(), id); err != nil {
		return notFoundAs(err, "The invite %q was used or expired meanwhile.", id)
	}
	inv := is[i]
	d.log.Info("invite revoked", "invite", id, "by", principalFrom(r.Context()).name())
	d.audit(r, projectID, "invite.revoke", inv.Email, map[string]any{"id": id, "email": inv.Email, "role": inv.Role, "admin": inv.Admin}, nil)
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "revoked": true})
	return nil
}

func (d *Dashboard) apiRevokeProjectInvite(w http.ResponseWriter, r *http.Request) error {
	p, err := d.project(r)
	if err != nil {
		return err
	}
	return d.revokeInvite(w, r, p.ID, " in project "+p.Name)
}

func (d *Dashboard) apiRevokeInvite(w http.ResponseWriter, r *http.Request) error {
	return d.revokeInvite(w, r, 0, "")
}

// notFoundAs turns the store's ErrNotFound into a 404 with a message.
func notFoundAs(err error, format string, args ...any) error {
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, format, args...)
	}
	return err
}

// inviteOffer is what an invite page says of a project invite. A person
// who has an account accepts it signed in; the page looks the same for a
// signed-out visitor either way, so the link tells no one whether its
// address has an account.
type inviteOffer struct {
	Project string // the project's name
	Role    store.Role
	SignIn  string // the sign-in page, coming back here to accept
	// Set for a signed-in visitor only:
	As     string // who is signed in
	For    string // the address the invite is for, when it is not As
	Action string // where the accept form posts
}

// inviteOffer describes a project invite; nil for an instance invite (it
// only creates accounts) or one whose project is gone.
func (d *Dashboard) inviteOffer(r *http.Request, inv store.Invite) (*inviteOffer, error) {
	if inv.ProjectID == 0 || inv.Admin {
		return nil, nil
	}
	names, err := d.projectNames(r)
	if err != nil {
		return nil, err
	}
	name, ok := names[inv.ProjectID]
	if !ok {
		return nil, nil
	}
	back := "/join/" + r.PathValue("secret")
	return &inviteOffer{Project: name, Role: inv.Role, SignIn: "/login?next=" + url.QueryEscape(back), Action: back + "/accept"}, nil
}

// sessionUser is the signed-in person of a browser request, if any.
func (d *Dashboard) sessionUser(r *http.Request) (store.User, bool, error) {
	p, ok, err := d.authenticate(r)
	if err != nil || !ok || p.token != nil {
		return store.User{}, false, err
	}
	return p.user, true, nil
}

// invitePage is the page of a live invite link: a signed-in visitor is
// offered the project to accept, anyone else the sign-up form (with a way
// to sign in and accept instead). ok is false when the store failed.
func (d *Dashboard) invitePage(w http.ResponseWriter, r *http.Request, inv store.Invite, status int, data joinData) bool {
	offer, err := d.inviteOffer(r, inv)
	if err != nil {
		d.serverError(w, r, "invite page", err)
		return false
	}
	data.Invite = offer
	title := "Create your account"
	if offer != nil {
		u, in, err := d.sessionUser(r)
		if err != nil {
			d.serverError(w, r, "invite page", err)
			return false
		}
		if in {
			offer.As = u.Email
			if inv.Email != "" && !strings.EqualFold(inv.Email, u.Email) {
				offer.For = inv.Email
			}
			title = "Join " + offer.Project
		}
	}
	d.renderBare(w, r, status, "join", title, data)
	return true
}

// acceptInvite is the signed-in answer to a project invite: the person
// joins the project with the invite's role, and the link is used.
func (d *Dashboard) acceptInvite(w http.ResponseWriter, r *http.Request) {
	secret := r.PathValue("secret")
	u, in, err := d.sessionUser(r)
	if err != nil {
		d.serverError(w, r, "accept invite", err)
		return
	}
	if !in {
		http.Redirect(w, r, "/login?next="+url.QueryEscape("/join/"+secret), http.StatusSeeOther)
		return
	}
	inv, err := users.CheckInvite(r.Context(), d.st, secret)
	if errors.Is(err, users.ErrBadInvite) {
		d.renderBare(w, r, http.StatusNotFound, "join", "Link expired", joinData{Error: err.Error()})
		return
	}
	if err != nil {
		d.serverError(w, r, "accept invite", err)
		return
	}
	if inv.ProjectID == 0 || inv.Admin || (inv.Email != "" && !strings.EqualFold(inv.Email, u.Email)) {
		// The page says what to do (sign out, or create an account).
		d.invitePage(w, r, inv, http.StatusForbidden, joinData{Email: inv.Email, Fixed: inv.Email != ""})
		return
	}
	_, was := d.st.Member(r.Context(), inv.ProjectID, u.ID)
	_, m, err := d.st.AcceptInvite(r.Context(), auth.Hash(secret), u.ID)
	if errors.Is(err, store.ErrNotFound) {
		// Used meanwhile, or the project was deleted.
		d.renderBare(w, r, http.StatusNotFound, "join", "Link expired", joinData{Error: users.ErrBadInvite.Error()})
		return
	}
	if err != nil {
		d.serverError(w, r, "accept invite", err)
		return
	}
	names, _ := d.projectNames(r)
	d.log.Info("project invite accepted", "project", names[m.ProjectID], "user", u.Email, "role", m.Role, "invite", inv.ID)
	if errors.Is(was, store.ErrNotFound) {
		d.audit(r.WithContext(withPrincipal(r.Context(), principal{user: u})), m.ProjectID, "member.join", u.Email, nil, memberAudit{u.Email, m.Role})
	}
	http.Redirect(w, r, "/p/"+url.PathEscape(names[m.ProjectID]), http.StatusSeeOther)
}
