package dashboard_test

import (
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/dashboard"
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

// The Overview does not offer a loopback MCP URL to remote connectors
// (Claude, ChatGPT): they connect from their own servers, so it says that
// the gateway needs --public-url first.
func TestOverviewRemoteConnectorNeedsPublicURL(t *testing.T) {
	e := newEnv(t)
	page := e.admin().get("/p/shop").text()
	if !strings.Contains(page, "as a remote connector, once the gateway runs with --public-url https://HOST") ||
		strings.Contains(page, "as a remote connector: paste this URL") {
		t.Error("the Overview offers its loopback URL to remote connectors without saying they need --public-url")
	}
	public := newEnvWith(t, func(o *dashboard.Options) { o.BaseURL = func() string { return "https://mcp.example.com" } })
	if page := public.admin().get("/p/shop").text(); !strings.Contains(page, "as a remote connector: paste this URL, then sign in") {
		t.Error("behind a public URL the Overview does not offer it to remote connectors")
	}
}
