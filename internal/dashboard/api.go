package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/store"
)

// maxBody bounds a JSON request body.
const maxBody = 64 << 10

func (d *Dashboard) apiRoutes(mux *http.ServeMux) {
	routes := []struct {
		pattern string
		fn      apiFunc
		admin   bool
	}{
		{"GET /api/me", d.apiMe, false},
		{"GET /api/projects", d.apiProjects, false},
		{"POST /api/projects", d.apiCreateProject, false},
		{"GET /api/projects/{project}", d.apiProject, false},
		{"PATCH /api/projects/{project}/settings", d.apiPatchSettings, false},
		{"GET /api/projects/{project}/tools", d.apiTools, false},
		{"PATCH /api/projects/{project}/tools/{tool}", d.apiPatchTool, false},
		{"POST /api/projects/{project}/tools/{tool}/approve", d.apiApprove, false},
		{"POST /api/projects/{project}/tools/{tool}/reject", d.apiReject, false},
		{"GET /api/projects/{project}/agents", d.apiAgents, false},
		{"PATCH /api/projects/{project}/agent-keys/{id}", d.apiPatchAgentKey, false},
		{"PATCH /api/projects/{project}/replicas/{id}", d.apiPatchReplica, false},
		{"GET /api/projects/{project}/keys", d.apiKeys, false},
		{"POST /api/projects/{project}/keys", d.apiCreateKey, false},
		{"POST /api/projects/{project}/keys/{id}/revoke", d.apiRevokeKey, false},
		{"GET /api/projects/{project}/apps", d.apiApps, false},
		{"POST /api/projects/{project}/apps/{id}/revoke", d.apiRevokeApp, false},
		{"GET /api/projects/{project}/calls", d.apiCalls, false},
		{"GET /api/projects/{project}/calls/stream", d.apiCallStream, false},
		{"GET /api/projects/{project}/usage", d.apiUsage, false},
		{"GET /api/users", d.apiUsers, true},
		{"POST /api/invites", d.apiInvite, true},
		{"GET /api/tokens", d.apiTokens, true},
		{"POST /api/tokens", d.apiCreateToken, true},
		{"POST /api/tokens/{id}/revoke", d.apiRevokeToken, true},
	}
	for _, rt := range routes {
		mux.Handle(rt.pattern, d.api(rt.fn, rt.admin))
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

// api adapts an apiFunc: it authenticates the request (a Bearer admin token
// or a session cookie), checks admin rights, and maps errors to statuses.
func (d *Dashboard) api(fn apiFunc, admin bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok, err := d.authenticate(r)
		switch {
		case err != nil:
			d.apiError(w, r, err)
			return
		case !ok:
			writeJSON(w, http.StatusUnauthorized, apiErr{Error: msgUnauthorized})
			return
		case admin && !p.admin():
			writeJSON(w, http.StatusForbidden, apiErr{Error: "Only an admin may do this. Ask an admin of this gateway."})
			return
		}
		r = r.WithContext(withPrincipal(r.Context(), p))
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

// notFound turns the store's ErrNotFound into a 404 that names what.
func notFound(err error, format string, args ...any) error {
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, format, args...)
	}
	return err
}

// fieldError is a 400 that names the field at fault.
func fieldError(field, format string, args ...any) error {
	return errorf(http.StatusBadRequest, "%s: %s", field, fmt.Sprintf(format, args...))
}
