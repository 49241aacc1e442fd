package dashboard_test

import (
	"strings"
	"testing"
)

// The Settings page explains tasks in its own words: someone with only the
// binary has no docs/ folder to look in.
func TestSettingsPageExplainsTasks(t *testing.T) {
	e := newEnv(t)
	page := e.admin().get("/p/shop/settings").text()
	if strings.Contains(page, "docs/") {
		t.Error("the Settings page sends the reader to a docs/ file")
	}
	want := "A client that speaks MCP tasks follows the task; any other gets a job reference and fetches the result with the <code>spacefix_job</code> tool."
	if !strings.Contains(page, want) {
		t.Errorf("the Settings page lacks %q", want)
	}
}
