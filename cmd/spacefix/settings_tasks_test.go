package main

import (
	"context"
	"strings"
	"testing"
)

// settings set --max-running-tasks: stored, shown, and a value out of
// range refused naming the flag and the range.
func TestSettingsMaxRunningTasks(t *testing.T) {
	_, url, token, st := adminGateway(t)
	t.Setenv("SPACEFIX_TOKEN", token)
	out, err := runCLI(t, "settings", "show", "--url", url)
	if err != nil || !strings.Contains(out, "Tasks per caller        100\n") {
		t.Fatalf("settings show before it is set: %v\n%s", err, out)
	}
	out, err = runCLI(t, "settings", "set", "--url", url, "--max-running-tasks", "3")
	if err != nil || !strings.Contains(out, "Tasks per caller        3\n") {
		t.Fatalf("settings set --max-running-tasks 3: %v\n%s", err, out)
	}
	if p, _ := st.Project(context.Background(), "default"); p.Settings.MaxRunningTasks != 3 {
		t.Errorf("stored %d, want 3", p.Settings.MaxRunningTasks)
	}
	for _, n := range []string{"0", "10001"} {
		want := "--max-running-tasks: running tasks per caller are 1 to 10000, not " + n
		if _, err := runCLI(t, "settings", "set", "--url", url, "--max-running-tasks", n); err == nil || err.Error() != want {
			t.Errorf("settings set --max-running-tasks %s: %v, want %q", n, err, want)
		}
	}
}
