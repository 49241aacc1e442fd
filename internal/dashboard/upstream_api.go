package dashboard

import (
	"net/http"
	"strconv"

	"github.com/spacefix/spacefix/internal/store"
)

// The upstream accounts API: list an agent key's accounts, your own, and
// disconnect one.

// apiUpstreamAccounts is GET /api/upstream-accounts?agentKey=: an agent
// key's accounts, all of them for editors and up, else the caller's own.
func (d *Dashboard) apiUpstreamAccounts(w http.ResponseWriter, r *http.Request) error {
	if d.upstream == nil {
		return errNoUpstream
	}
	id := r.URL.Query().Get("agentKey")
	if id == "" {
		return fieldError("agentKey", "name the bridged agent's key, for example ?agentKey=key_…; your own accounts over every agent are at GET /api/me/upstream-accounts")
	}
	p := principalFrom(r.Context())
	k, proj, role, err := d.agentKeyFor(r.Context(), p, id)
	if err != nil {
		return err
	}
	f := store.UpstreamFilter{ProjectID: proj.ID, AgentKeyID: k.ID}
	if !role.AtLeast(store.RoleEditor) {
		if p.token != nil { // a viewer token is nobody: it has no accounts
			writeJSON(w, http.StatusOK, map[string]any{"accounts": []upstreamAccountJSON{}})
			return nil
		}
		f.UserID = p.user.ID
	}
	as, err := d.upstream.Accounts(r.Context(), f)
	if err != nil {
		return err
	}
	out, err := d.accountsOut(r.Context(), as)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"accounts": out})
	return nil
}

// apiMyUpstreamAccounts is GET /api/me/upstream-accounts: the signed-in
// person's accounts, and the agents they may connect one to.
func (d *Dashboard) apiMyUpstreamAccounts(w http.ResponseWriter, r *http.Request) error {
	if d.upstream == nil {
		return errNoUpstream
	}
	p := principalFrom(r.Context())
	if p.token != nil {
		return errorf(http.StatusBadRequest, "An API token is not a person and has no upstream accounts. Sign in to the dashboard, or list an agent's accounts with GET /api/upstream-accounts?agentKey=….")
	}
	ps, err := d.visibleProjects(r.Context(), p)
	if err != nil {
		return err
	}
	accounts, connect, err := d.myAccounts(r.Context(), p.user, ps)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"accounts": accounts, "connect": connect})
	return nil
}

// apiDisconnectUpstream is DELETE /api/upstream-accounts/{agentKey}?user=ID:
// a person disconnects their own account (user may be left out), an
// editor or owner anyone's in their project.
func (d *Dashboard) apiDisconnectUpstream(w http.ResponseWriter, r *http.Request) error {
	if d.upstream == nil {
		return errNoUpstream
	}
	p := principalFrom(r.Context())
	k, proj, role, err := d.agentKeyFor(r.Context(), p, r.PathValue("agentKey"))
	if err != nil {
		return err
	}
	userID := p.user.ID
	if s := r.URL.Query().Get("user"); s != "" {
		if userID, err = strconv.ParseInt(s, 10, 64); err != nil || userID <= 0 {
			return fieldError("user", "a user id, a whole number such as ?user=3 (GET /api/upstream-accounts lists them as userId)")
		}
	}
	if userID == 0 {
		return fieldError("user", "an API token is not a person: name whose account to disconnect, ?user=ID")
	}
	if (p.token != nil || userID != p.user.ID) && !role.AtLeast(store.RoleEditor) {
		return errorf(http.StatusForbidden, "Disconnecting another person's account needs the editor or owner role in project %q; %s %s. %s",
			proj.Name, p.you(), article(role), askOwner)
	}
	as, err := d.upstream.Accounts(r.Context(), store.UpstreamFilter{ProjectID: proj.ID, AgentKeyID: k.ID, UserID: userID})
	if err != nil {
		return err
	}
	if len(as) == 0 {
		return errorf(http.StatusNotFound, "That person has no account connected to agent key %s. GET /api/upstream-accounts?agentKey=%s lists the accounts.", k.ID, k.ID)
	}
	out, err := d.accountsOut(r.Context(), as[:1])
	if err != nil {
		return err
	}
	gone, err := d.upstream.Disconnect(r.Context(), k.ID, userID)
	if err != nil {
		return err
	}
	if !gone { // disconnected by someone else meanwhile
		return errorf(http.StatusNotFound, "That person has no account connected to agent key %s. GET /api/upstream-accounts?agentKey=%s lists the accounts.", k.ID, k.ID)
	}
	a := out[0]
	d.log.Info("upstream account disconnected", "project", proj.Name, "agentKey", k.ID, "host", a.Host, "user", a.Email, "by", p.name())
	d.audit(r, proj.ID, actionUpstreamDisconnect, k.ID, upstreamAudit(k.ID, a.Host, a.Email), nil)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
