package dashboard

import (
	"net/http"
	"strconv"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
)

// Page sizes of GET …/policy/versions.
const (
	defaultPolicyVersions = 20
	maxPolicyVersions     = 100
)

// apiPolicyVersions lists the saved versions of the project's policy,
// newest first: ?limit= of them (1 to maxPolicyVersions, default
// defaultPolicyVersions). The documents are not in it; the audit log
// keeps each one (policy.update).
func (d *Dashboard) apiPolicyVersions(w http.ResponseWriter, r *http.Request) error {
	proj, err := d.project(r)
	if err != nil {
		return err
	}
	limit := defaultPolicyVersions
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPolicyVersions {
			return fieldError("limit", "want 1 to %d, not %q", maxPolicyVersions, v)
		}
		limit = n
	}
	vs, err := d.st.PolicyVersions(r.Context(), proj.ID, limit)
	if err != nil {
		return err
	}
	out := apitypes.PolicyVersions{Versions: make([]apitypes.PolicyVersion, 0, len(vs))}
	for _, v := range vs {
		out.Versions = append(out.Versions, apitypes.PolicyVersion{Version: v.Version, UpdatedAt: v.UpdatedAt.UTC(), UpdatedBy: v.UpdatedBy})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
