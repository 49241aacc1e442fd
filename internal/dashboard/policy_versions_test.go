package dashboard_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/store"
)

// GET …/policy/versions: every saved version, newest first, with who
// saved it, to a viewer; bounded by ?limit=.
func TestPolicyVersions(t *testing.T) {
	e := newEnv(t)
	admin := e.admin()
	viewer := e.member(admin, "vic@example.com", store.RoleViewer)
	owner := e.member(admin, "olga@example.com", store.RoleOwner)

	var got apitypes.PolicyVersions
	viewer.mustCall(http.StatusOK, "GET", policyPath+"/versions", nil, &got)
	if got.Versions == nil || len(got.Versions) != 0 {
		t.Errorf("a project that never saved a policy: %+v; want versions []", got)
	}

	admin.mustCall(http.StatusOK, "PUT", policyPath, map[string]any{"rules": []any{}}, nil)
	owner.mustCall(http.StatusOK, "PUT", policyPath, map[string]any{"rules": []any{amountLimit}}, nil)
	admin.mustCall(http.StatusOK, "PUT", policyPath, map[string]any{"rules": []any{}}, nil)
	viewer.mustCall(http.StatusOK, "GET", policyPath+"/versions", nil, &got)
	type who struct {
		Version int64
		By      string
	}
	var seen []who
	for _, v := range got.Versions {
		seen = append(seen, who{v.Version, v.UpdatedBy})
		if v.UpdatedAt.IsZero() {
			t.Errorf("version %d has no updatedAt", v.Version)
		}
	}
	want := []who{{3, "ada@example.com"}, {2, "olga@example.com"}, {1, "ada@example.com"}}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}

	viewer.mustCall(http.StatusOK, "GET", policyPath+"/versions?limit=1", nil, &got)
	if len(got.Versions) != 1 || got.Versions[0].Version != 3 {
		t.Errorf("limit=1: %+v; want version 3 alone", got.Versions)
	}
	for _, bad := range []string{"0", "101", "ten"} {
		res := viewer.call("GET", policyPath+"/versions?limit="+bad, nil, nil)
		if want := `limit: want 1 to 100, not "` + bad + `"`; res.StatusCode != http.StatusBadRequest || res.apiError() != want {
			t.Errorf("limit=%s: %d %q; want 400 %q", bad, res.StatusCode, res.apiError(), want)
		}
	}
}
