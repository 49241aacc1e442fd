package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/textfmt"
)

func settings(ctx context.Context, args []string, stdout io.Writer) error {
	return dispatch(ctx, "settings", args, stdout, command{"show", settingsShow}, command{"set", settingsSet})
}

func settingsShow(ctx context.Context, args []string, stdout io.Writer) error {
	return apiShow(ctx, "settings show", args, stdout, func(c *apiClient) string { return c.projectPath("") }, printSettings)
}

func printSettings(w io.Writer, p apitypes.Project) error {
	s := p.Settings
	access := map[string]string{"read": "read only", "readwrite": "read and write"}[s.ClientAccess]
	limit := func(n int) string {
		if n == 0 {
			return "default"
		}
		return fmt.Sprint(n)
	}
	rate := "none"
	if s.RateLimitPerMinute > 0 {
		rate = fmt.Sprintf("%d calls per minute per key", s.RateLimitPerMinute)
	}
	t := newTable(w)
	t.row("Project", p.Name)
	t.row("MCP endpoint", p.MCPURL)
	t.row("Call wait", fmt.Sprintf("%d s", s.CallWaitSeconds))
	t.row("Client access", access)
	t.row("Approve tool changes", fmt.Sprint(s.ApproveToolChanges))
	t.row("Rate limit", rate)
	t.row("Max tools per agent", limit(s.MaxTools))
	t.row("Max schema bytes", limit(s.MaxSchemaBytes))
	t.row("Max resources", limit(s.MaxResources))
	t.row("Max registration bytes", limit(s.MaxRegistrationBytes))
	args := fmt.Sprintf("default (%s bytes)", textfmt.Thousands(store.DefaultMaxArgumentBytes))
	if s.MaxArgumentBytes > 0 {
		args = textfmt.Thousands(int64(s.MaxArgumentBytes)) + " bytes"
	}
	t.row("Largest arguments", args)
	t.row("Longest task", (time.Duration(s.LongestTaskMinutes) * time.Minute).String())
	t.row("Keep task results", (time.Duration(s.KeepTaskResultsHours) * time.Hour).String())
	t.row("Tasks per caller", fmt.Sprint(s.MaxRunningTasks))
	t.row("Repeat window", (time.Duration(s.RepeatWindowHours) * time.Hour).String())
	return t.flush()
}

func settingsSet(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("settings set", stdout)
	client := apiFlags(fs)
	wait := fs.Int("call-wait", 0, "how long a call waits for its result, 1 to 30 `SECONDS`")
	access := fs.String("client-access", "", "read (every client is read-only) or readwrite")
	approve := fs.Bool("approve-tool-changes", false, "hold new and changed tools as pending until approved (=false turns it off)")
	rate := fs.Int("rate-limit", 0, "calls per minute one client key may make; 0 means no limit")
	maxTools := fs.Int("max-tools", 0, "tools per agent; 0 means the default")
	maxSchema := fs.Int("max-schema-bytes", 0, "bytes of input schema per tool; 0 means the default")
	maxRes := fs.Int("max-resources", 0, "resources per agent; 0 means the default")
	maxReg := fs.Int("max-registration-bytes", 0, "bytes of one registration; 0 means the default")
	maxArgs := fs.Int("max-argument-bytes", 0, "the largest arguments one call may carry, 1,024 to 33,554,432 `BYTES`; 0 means the default (1 MiB)")
	longest := fs.Duration("longest-task", 0, "how long a task may run before it is stopped, whole minutes from 1m to 24h (default 1h)")
	keep := fs.Duration("keep-task-results", 0, "how long an ended task's result is kept at most, whole hours from 1h to 168h (7 days; default 24h)")
	maxRunning := fs.Int("max-running-tasks", 0, "how many tasks and jobs one caller (a key, or a person through OAuth) may have running at once, 1 to 10,000 (default 100)")
	repeat := fs.Duration("repeat-window", 0, "how long a repeat-safe tool's request ids are remembered, whole hours from 1h to 720h (30 days; default 24h)")
	asJSON := fs.Bool("json", false, "print the admin API's JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	given := setFlags(fs)
	var patch apitypes.SettingsPatch
	if given["longest-task"] {
		n, err := wholeUnits("longest-task", *longest, time.Minute, time.Minute, 24*time.Hour)
		if err != nil {
			return err
		}
		patch.LongestTaskMinutes = &n
	}
	if given["keep-task-results"] {
		n, err := wholeUnits("keep-task-results", *keep, time.Hour, time.Hour, 7*24*time.Hour)
		if err != nil {
			return err
		}
		patch.KeepTaskResultsHours = &n
	}
	if given["repeat-window"] {
		n, err := wholeUnits("repeat-window", *repeat, time.Hour, time.Hour, 30*24*time.Hour)
		if err != nil {
			return err
		}
		patch.RepeatWindowHours = &n
	}
	for flag, set := range map[string]func(){
		"call-wait": func() { patch.CallWaitSeconds = wait }, "client-access": func() { patch.ClientAccess = access },
		"approve-tool-changes": func() { patch.ApproveToolChanges = approve }, "rate-limit": func() { patch.RateLimitPerMinute = rate },
		"max-tools": func() { patch.MaxTools = maxTools }, "max-schema-bytes": func() { patch.MaxSchemaBytes = maxSchema },
		"max-resources": func() { patch.MaxResources = maxRes }, "max-registration-bytes": func() { patch.MaxRegistrationBytes = maxReg },
		"max-argument-bytes": func() { patch.MaxArgumentBytes = maxArgs }, "max-running-tasks": func() { patch.MaxRunningTasks = maxRunning },
	} {
		if given[flag] {
			set()
		}
	}
	if patch == (apitypes.SettingsPatch{}) {
		return usageError{"settings set: nothing to change; see spacefix settings set --help"}
	}
	c, err := client()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.do(ctx, "PATCH", c.projectPath("/settings"), patch, &raw); err != nil {
		return apiFieldFlags(err, settingsFlags)
	}
	return printAs(stdout, *asJSON, raw, func(w io.Writer, p apitypes.Project) error {
		fmt.Fprintln(w, "Saved. MCP clients get the new settings on their next request.")
		return printSettings(w, p)
	})
}

// wholeUnits is d in units of unit, or a usage error naming flag when d is
// not a whole number of them or not within [lo, hi].
func wholeUnits(flag string, d, unit, lo, hi time.Duration) (int, error) {
	if d%unit != 0 || d < lo || d > hi {
		return 0, usageError{fmt.Sprintf("settings set: --%s is whole %s from %s to %s, not %s", flag, unitName[unit], short(lo), short(hi), d)}
	}
	return int(d / unit), nil
}

var unitName = map[time.Duration]string{time.Minute: "minutes", time.Hour: "hours"}

// short prints a whole number of hours or minutes as a person writes it:
// 24h, 1m.
func short(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return fmt.Sprintf("%dm", d/time.Minute)
}

// settingsFlags are the settings set flags by the admin API field each sets,
// so the gateway's refusal names the flag the person typed.
var settingsFlags = map[string]string{
	"callWaitSeconds": "call-wait", "clientAccess": "client-access", "approveToolChanges": "approve-tool-changes",
	"rateLimitPerMinute": "rate-limit", "maxTools": "max-tools", "maxSchemaBytes": "max-schema-bytes",
	"maxResources": "max-resources", "maxRegistrationBytes": "max-registration-bytes", "maxArgumentBytes": "max-argument-bytes",
	"longestTaskMinutes": "longest-task", "keepTaskResultsHours": "keep-task-results", "repeatWindowHours": "repeat-window",
	"maxRunningTasks": "max-running-tasks",
}
