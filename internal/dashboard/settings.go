package dashboard

import (
	"context"
	"net/http"
	"time"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/store"
)

// Client access values.
const (
	accessRead      = "read"
	accessReadWrite = "readwrite"
)

// Bounds of the project settings.
const (
	minCallWait        = 1
	maxCallWait        = 30
	maxRateLimit       = 10_000
	maxToolsLimit      = 10_000
	maxSchemaLimit     = 8 << 20
	maxResourcesLimit  = 100_000
	maxRegisterLimit   = 64 << 20
	minArgumentLimit   = 1 << 10
	maxArgumentLimit   = 32 << 20
	defaultCallWaitSec = 30

	// The task settings, in the units the API shows them in.
	minLongestTask     = 1
	maxLongestTask     = int(store.MaxLongestTask / time.Minute)
	defaultLongestTask = int(store.DefaultLongestTask / time.Minute)
	minKeepTask        = 1
	maxKeepTask        = int(store.MaxTaskTTL / time.Hour)
	defaultKeepTask    = int(store.DefaultTaskTTL / time.Hour)
	minRunningTasks    = 1
	minRepeatWindow    = int(store.MinIdempotencyWindow / time.Hour)
	maxRepeatWindow    = int(store.MaxIdempotencyWindow / time.Hour)
	defaultRepeat      = int(store.DefaultIdempotencyWindow / time.Hour)
)

type settingsJSON = apitypes.Settings

func settingsOut(s store.ProjectSettings) settingsJSON {
	access := accessReadWrite
	if s.ReadOnlyClients {
		access = accessRead
	}
	return settingsJSON{
		CallWaitSeconds: int(s.CallWait().Round(time.Second) / time.Second), ClientAccess: access,
		ApproveToolChanges: s.ApproveToolChanges, RateLimitPerMinute: s.RateLimitPerMinute,
		MaxTools: s.MaxTools, MaxSchemaBytes: s.MaxSchemaBytes, MaxResources: s.MaxResources,
		MaxRegistrationBytes: s.MaxRegistrationBytes, MaxArgumentBytes: s.MaxArgumentBytes,
		LongestTaskMinutes:   int(s.LongestTask().Round(time.Minute) / time.Minute),
		KeepTaskResultsHours: int(s.TaskTTL().Round(time.Hour) / time.Hour),
		MaxRunningTasks:      s.RunningTaskCap(),
		RepeatWindowHours:    int(s.IdempotencyWindow().Round(time.Hour) / time.Hour),
	}
}

// settingsPatch changes the fields that are present.
type settingsPatch struct{ apitypes.SettingsPatch }

// apply returns s changed by the patch, or an error naming the first field
// out of bounds.
func (p settingsPatch) apply(s store.ProjectSettings) (store.ProjectSettings, error) {
	if v := p.CallWaitSeconds; v != nil {
		if *v < minCallWait || *v > maxCallWait {
			return s, fieldError("callWaitSeconds", "the call wait is %d to %d seconds, not %d", minCallWait, maxCallWait, *v)
		}
		s.CallWaitMs = *v * 1000
		if *v == defaultCallWaitSec {
			s.CallWaitMs = 0
		}
	}
	if v := p.ClientAccess; v != nil {
		if *v != accessRead && *v != accessReadWrite {
			return s, fieldError("clientAccess", "want %q or %q, not %q", accessRead, accessReadWrite, *v)
		}
		s.ReadOnlyClients = *v == accessRead
	}
	if v := p.LongestTaskMinutes; v != nil {
		if *v < minLongestTask || *v > maxLongestTask {
			return s, fieldError("longestTaskMinutes", "the longest task is %d to %d minutes (24 hours), not %d", minLongestTask, maxLongestTask, *v)
		}
		s.LongestTaskMs = int64(*v) * time.Minute.Milliseconds()
		if *v == defaultLongestTask {
			s.LongestTaskMs = 0
		}
	}
	if v := p.KeepTaskResultsHours; v != nil {
		if *v < minKeepTask || *v > maxKeepTask {
			return s, fieldError("keepTaskResultsHours", "task results are kept %d to %d hours (7 days), not %d", minKeepTask, maxKeepTask, *v)
		}
		s.TaskTTLMs = int64(*v) * time.Hour.Milliseconds()
		if *v == defaultKeepTask {
			s.TaskTTLMs = 0
		}
	}
	if v := p.MaxRunningTasks; v != nil {
		if *v < minRunningTasks || *v > store.MaxRunningTasksCap {
			return s, fieldError("maxRunningTasks", "running tasks per caller are %d to %d, not %d", minRunningTasks, store.MaxRunningTasksCap, *v)
		}
		s.MaxRunningTasks = *v
		if *v == store.DefaultMaxRunningTasks {
			s.MaxRunningTasks = 0
		}
	}
	if v := p.RepeatWindowHours; v != nil {
		if *v < minRepeatWindow || *v > maxRepeatWindow {
			return s, fieldError("repeatWindowHours", "request ids are kept %d to %d hours (30 days), not %d", minRepeatWindow, maxRepeatWindow, *v)
		}
		s.IdempotencyWindowMs = int64(*v) * time.Hour.Milliseconds()
		if *v == defaultRepeat {
			s.IdempotencyWindowMs = 0
		}
	}
	if p.ApproveToolChanges != nil {
		s.ApproveToolChanges = *p.ApproveToolChanges
	}
	limits := []struct {
		name string
		v    *int
		dst  *int
		max  int
	}{
		{"rateLimitPerMinute", p.RateLimitPerMinute, &s.RateLimitPerMinute, maxRateLimit},
		{"maxTools", p.MaxTools, &s.MaxTools, maxToolsLimit},
		{"maxSchemaBytes", p.MaxSchemaBytes, &s.MaxSchemaBytes, maxSchemaLimit},
		{"maxResources", p.MaxResources, &s.MaxResources, maxResourcesLimit},
		{"maxRegistrationBytes", p.MaxRegistrationBytes, &s.MaxRegistrationBytes, maxRegisterLimit},
		{"maxArgumentBytes", p.MaxArgumentBytes, &s.MaxArgumentBytes, maxArgumentLimit},
	}
	for _, l := range limits {
		if l.v == nil {
			continue
		}
		if *l.v < 0 || *l.v > l.max {
			return s, fieldError(l.name, "want 0 (the default) to %d, not %d", l.max, *l.v)
		}
		*l.dst = *l.v
	}
	if v := p.MaxArgumentBytes; v != nil && *v != 0 && *v < minArgumentLimit {
		return s, fieldError("maxArgumentBytes", "want 0 (the default, %d) or %d to %d, not %d", store.DefaultMaxArgumentBytes, minArgumentLimit, maxArgumentLimit, *v)
	}
	return s, nil
}

func (d *Dashboard) apiPatchSettings(w http.ResponseWriter, r *http.Request) error {
	proj, err := d.project(r)
	if err != nil {
		return err
	}
	var patch settingsPatch
	if err := readJSON(r, &patch); err != nil {
		return err
	}
	next, err := patch.apply(proj.Settings)
	if err != nil {
		return err
	}
	if next.ApproveToolChanges && !proj.Settings.ApproveToolChanges {
		// Switching consent on must not hide every tool clients use now:
		// what is registered at this moment becomes the approved baseline.
		if err := d.approveBaseline(r.Context(), proj.ID); err != nil {
			return err
		}
	}
	if err := d.st.UpdateProjectSettings(r.Context(), proj.ID, next); err != nil {
		return err
	}
	d.notify(proj.ID)
	d.log.Info("project settings saved", "project", proj.Name, "by", principalFrom(r.Context()).name())
	d.audit(r, proj.ID, "settings.update", proj.Name, settingsOut(proj.Settings), settingsOut(next))
	proj.Settings = next
	writeJSON(w, http.StatusOK, d.projectOut(r, proj))
	return nil
}

// approveBaseline approves the current definition of every registered tool
// of a project that has no approval record yet.
func (d *Dashboard) approveBaseline(ctx context.Context, projectID int64) error {
	as, err := d.st.Approvals(ctx, projectID)
	if err != nil {
		return err
	}
	have := make(map[string]bool, len(as))
	for _, a := range as {
		have[a.Tool] = true
	}
	for _, t := range d.reg.Snapshot(projectID).ToolList {
		if have[t.Name] {
			continue
		}
		if _, err := d.st.ApproveTool(ctx, projectID, t.Name, access.Definition(t.Def)); err != nil {
			return err
		}
	}
	return nil
}

// defaultLimits are shown beside the limit fields: the registration limits
// of SPEC.md, which the agent front applies where a setting is 0.
var defaultLimits = struct{ MaxTools, MaxSchema, MaxResources, MaxRegister int }{
	agentproto.DefaultMaxTools, agentproto.DefaultMaxSchema, agentproto.DefaultMaxResources, agentproto.DefaultMaxRegister,
}
