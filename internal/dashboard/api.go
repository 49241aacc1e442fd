package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
)

// maxBody bounds a JSON request body.
const maxBody = 64 << 10

// apiRoute is one route of the admin API and what it needs of the caller.
type apiRoute struct {
	pattern string
	fn      apiFunc
	need    need
}

// apiRoutes is the admin API. Every route with {project} names the least
// role it needs there; the rest need an instance admin or only a sign-in.
// Reads need viewer; tool controls, settings, approvals, agent metadata,
// replicas, cancelling a task and checking or trying a policy need editor;
// members, keys, tokens, connected apps and saving the policy need owner.
func (d *Dashboard) apiRoutes() []apiRoute {
	return []apiRoute{
		{"GET /api/me", d.apiMe, signedIn},
		{"PATCH /api/me", d.apiPatchMe, signedIn},
		{"GET /api/projects", d.apiProjects, signedIn},
		{"POST /api/projects", d.apiCreateProject, instanceAdmin},
		{"GET /api/projects/{project}", d.apiProject, viewer},
		{"PATCH /api/projects/{project}/settings", d.apiPatchSettings, editor},
		{"GET /api/projects/{project}/policy", d.apiPolicy, viewer},
		{"GET /api/projects/{project}/policy/versions", d.apiPolicyVersions, viewer},
		{"GET /api/projects/{project}/policy/interceptors", d.apiPolicyInterceptors, viewer},
		{"PUT /api/projects/{project}/policy", d.apiPutPolicy, owner},
		{"POST /api/projects/{project}/policy/check", d.apiCheckPolicy, editor},
		{"POST /api/projects/{project}/policy/test", d.apiTestPolicy, editor},
		{"GET /api/projects/{project}/tools", d.apiTools, viewer},
		{"PATCH /api/projects/{project}/tools/{tool}", d.apiPatchTool, editor},
		{"POST /api/projects/{project}/tools/{tool}/approve", d.apiApprove, editor},
		{"POST /api/projects/{project}/tools/{tool}/reject", d.apiReject, editor},
		{"GET /api/projects/{project}/agents", d.apiAgents, viewer},
		{"PATCH /api/projects/{project}/agent-keys/{id}", d.apiPatchAgentKey, editor},
		{"PATCH /api/projects/{project}/replicas/{id}", d.apiPatchReplica, editor},
		{"GET /api/projects/{project}/keys", d.apiKeys, viewer},
		{"POST /api/projects/{project}/keys", d.apiCreateKey, owner},
		{"POST /api/projects/{project}/keys/{id}/revoke", d.apiRevokeKey, owner},
		{"GET /api/projects/{project}/apps", d.apiApps, viewer},
		{"POST /api/projects/{project}/apps/{id}/revoke", d.apiRevokeApp, owner},
		{"GET /api/projects/{project}/calls", d.apiCalls, viewer},
		{"GET /api/projects/{project}/calls/stream", d.apiCallStream, viewer},
		{"GET /api/projects/{project}/usage", d.apiUsage, viewer},
		{"GET /api/projects/{project}/tasks", d.apiTasks, viewer},
		{"POST /api/projects/{project}/tasks/{id}/cancel", d.apiCancelTask, editor},
		{"GET /api/projects/{project}/members", d.apiMembers, viewer},
		{"POST /api/projects/{project}/members", d.apiAddMember, owner},
		{"PATCH /api/projects/{project}/members/{user}", d.apiPatchMember, owner},
		{"DELETE /api/projects/{project}/members/{user}", d.apiRemoveMember, owner},
		{"GET /api/projects/{project}/invites", d.apiProjectInvites, owner},
		{"POST /api/projects/{project}/invites/{id}/revoke", d.apiRevokeProjectInvite, owner},
		{"GET /api/projects/{project}/tokens", d.apiProjectTokens, owner},
		{"POST /api/projects/{project}/tokens", d.apiCreateProjectToken, owner},
		{"POST /api/projects/{project}/tokens/{id}/revoke", d.apiRevokeProjectToken, owner},
		{"GET /api/projects/{project}/audit", d.apiAudit, viewer},
		{"GET /api/users", d.apiUsers, instanceAdmin},
		{"PATCH /api/users/{id}", d.apiPatchUser, instanceAdmin},
		{"DELETE /api/users/{id}", d.apiDeleteUser, instanceAdmin},
		{"GET /api/invites", d.apiInvites, instanceAdmin},
		{"POST /api/invites", d.apiInvite, instanceAdmin},
		{"POST /api/invites/{id}/revoke", d.apiRevokeInvite, instanceAdmin},
		{"GET /api/tokens", d.apiTokens, instanceAdmin},
		{"POST /api/tokens", d.apiCreateToken, instanceAdmin},
		{"POST /api/tokens/{id}/revoke", d.apiRevokeToken, instanceAdmin},
		{"GET /api/audit", d.apiAudit, instanceAdmin},
		{"POST /api/identity/rotate", d.apiRotateIdentity, instanceAdmin},
		{"GET /api/idps", d.apiIdPs, instanceAdmin},
		{"POST /api/idps", d.apiAddIdP, instanceAdmin},
		{"DELETE /api/idps", d.apiRemoveIdP, instanceAdmin},
		// Upstream accounts: the route checks the role in the agent key's
		// project itself (editors and up see and disconnect anyone's).
		{"GET /api/upstream-accounts", d.apiUpstreamAccounts, signedIn},
		{"DELETE /api/upstream-accounts/{agentKey}", d.apiDisconnectUpstream, signedIn},
		{"GET /api/me/upstream-accounts", d.apiMyUpstreamAccounts, signedIn},
	}
}

func (d *Dashboard) apiMux(mux *http.ServeMux) {
	for _, rt := range d.apiRoutes() {
		if strings.Contains(rt.pattern, "{project}") != (rt.need.role != "") {
			panic("dashboard: route " + rt.pattern + ": a project route names the role it needs, and only a project route does")
		}
		mux.Handle(rt.pattern, d.api(rt.fn, rt.need))
	}
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, apiErr{Error: "No such API route: " + r.Method + " " + r.URL.Path + ". See docs/api.md."})
	})
}

// apiFunc handles one API request. It writes its answer itself and returns
// an error only instead of writing: an *httpError is shown as is, anything
// else is logged and answered with a 500 that reveals nothing.
type apiFunc func(w http.ResponseWriter, r *http.Request) error

type apiErr = apitypes.Error

const msgUnauthorized = "Sign in to the dashboard, or send an admin API token: Authorization: Bearer sfx_admin_…. " +
	"Make one with: spacefix tokens create"

// api adapts an apiFunc: it authenticates the request (a Bearer API token
// or a session cookie), checks what the route needs, and maps errors to
// statuses.
func (d *Dashboard) api(fn apiFunc, n need) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok, err := d.authenticate(r)
		switch {
		case err != nil:
			d.apiError(w, r, err)
			return
		case !ok:
			writeJSON(w, http.StatusUnauthorized, apiErr{Error: msgUnauthorized})
			return
		}
		r = r.WithContext(withPrincipal(r.Context(), p))
		if r, err = d.check(r, p, n); err != nil {
			d.apiError(w, r, err)
			return
		}
		if err := fn(w, r); err != nil {
			d.apiError(w, r, err)
		}
	})
}

func (d *Dashboard) apiError(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if errors.As(err, &he) {
		writeJSON(w, he.status, apiErr{Error: he.msg})
		return
	}
	d.log.Error("admin API", "method", r.Method, "path", r.URL.Path, "err", err)
	writeJSON(w, http.StatusInternalServerError, apiErr{Error: "The gateway could not do that; its log says why. Try again in a moment."})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// readJSON decodes a request body into v, refusing unknown fields so that
// a misspelt setting is an error rather than silently ignored.
func readJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return errorf(http.StatusUnsupportedMediaType, "Send JSON with Content-Type: application/json.")
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return errorf(http.StatusBadRequest, "The request body is not the JSON this call takes: %v. See docs/api.md.", err)
	}
	return nil
}

// fieldError is a 400 that names the field at fault.
func fieldError(field, format string, args ...any) error {
	return errorf(http.StatusBadRequest, "%s: %s", field, fmt.Sprintf(format, args...))
}
