package dashboard_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// Running tasks per caller: 100 until set, 1 to 10,000, stored as 0 when
// set back to the default, and a value out of range is refused naming the
// field and the range.
func TestSettingsMaxRunningTasks(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	var p struct{ Settings map[string]any }
	c.mustCall(http.StatusOK, "GET", "/api/projects/shop", nil, &p)
	if p.Settings["maxRunningTasks"] != 100.0 {
		t.Errorf("maxRunningTasks before it is set = %v, want 100", p.Settings["maxRunningTasks"])
	}
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/settings", map[string]any{"maxRunningTasks": 3}, &p)
	if got, _ := e.st.Project(t.Context(), "shop"); got.Settings.MaxRunningTasks != 3 || got.Settings.RunningTaskCap() != 3 || p.Settings["maxRunningTasks"] != 3.0 {
		t.Errorf("after setting 3: stored %d, answered %v", got.Settings.MaxRunningTasks, p.Settings["maxRunningTasks"])
	}
	for body, want := range map[string]string{
		`{"maxRunningTasks":0}`:     "maxRunningTasks: running tasks per caller are 1 to 10000, not 0",
		`{"maxRunningTasks":10001}`: "maxRunningTasks: running tasks per caller are 1 to 10000, not 10001",
	} {
		res := c.call("PATCH", "/api/projects/shop/settings", json.RawMessage(body), nil)
		if res.StatusCode != http.StatusBadRequest || res.apiError() != want {
			t.Errorf("PATCH %s: %d %q, want 400 %q", body, res.StatusCode, res.apiError(), want)
		}
	}
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/settings", map[string]any{"maxRunningTasks": 10000}, nil)
	c.mustCall(http.StatusOK, "PATCH", "/api/projects/shop/settings", map[string]any{"maxRunningTasks": 100}, nil)
	if got, _ := e.st.Project(t.Context(), "shop"); got.Settings.MaxRunningTasks != 0 {
		t.Errorf("after setting the default: stored %d, want 0 (the default)", got.Settings.MaxRunningTasks)
	}
}
