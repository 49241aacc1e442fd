package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

// testGateway runs a gateway on a new store file, bootstrapped as at first
// start, until the test ends.
func testGateway(t *testing.T) (data string, g *gateway.Gateway, first *gateway.FirstStart, st store.Store) {
	t.Helper()
	return testGatewayWith(t, nil)
}

// testGatewayWith is testGateway with the last word on the config.
func testGatewayWith(t *testing.T, config func(*gateway.Config)) (data string, g *gateway.Gateway, first *gateway.FirstStart, st store.Store) {
	t.Helper()
	data = filepath.Join(t.TempDir(), "s.db")
	st, err := sqlite.Open(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	if first, err = gateway.Bootstrap(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	cfg := gateway.DefaultConfig()
	cfg.Addr, cfg.Logger = "127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil))
	if config != nil {
		config(&cfg)
	}
	if g, err = gateway.New(cfg, st); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return data, g, first, st
}

// adminGateway runs a gateway on a store file and returns its URL and an
// admin API token made with the CLI on the same file.
func adminGateway(t *testing.T) (data, url, token string, st store.Store) {
	t.Helper()
	data, g, _, st := testGateway(t)
	out, err := runCLI(t, "tokens", "create", "--data", data, "--name", "ci", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var tok struct{ ID, Token string }
	if err := json.Unmarshal([]byte(out), &tok); err != nil || !strings.HasPrefix(tok.Token, "sfx_admin_") {
		t.Fatalf("tokens create --json printed %q: %v", out, err)
	}
	return data, g.URL(), tok.Token, st
}

func TestToolsCommands(t *testing.T) {
	_, url, token, st := adminGateway(t)
	api := []string{"--url", url, "--token", token, "--project", "default"}
	out, err := runCLI(t, append([]string{"tools", "set", "get_order", "--create", "--description", "Find one order.", "--cache", "30", "--access", "read", "--disabled=true"}, api...)...)
	if err != nil || !strings.Contains(out, "Saved get_order") || !strings.Contains(out, "Not registered, Edited, Cached 30s, Treated as read, Disabled") {
		t.Fatalf("tools set: %v\n%s", err, out)
	}
	got, _ := st.ToolSettings(context.Background(), 1)
	if len(got) != 1 || got[0].Description != "Find one order." || got[0].CacheSeconds != 30 || got[0].Access != store.AccessRead || !got[0].Disabled {
		t.Errorf("stored settings = %+v", got)
	}
	// Only the flags given change.
	if _, err := runCLI(t, append([]string{"tools", "set", "get_order", "--disabled=false"}, api...)...); err != nil {
		t.Fatal(err)
	}
	got, _ = st.ToolSettings(context.Background(), 1)
	if len(got) != 1 || got[0].Disabled || got[0].CacheSeconds != 30 {
		t.Errorf("after --disabled=false: %+v; want only Disabled changed", got)
	}
	out, err = runCLI(t, append([]string{"tools", "list"}, api...)...)
	if err != nil || !strings.Contains(out, "get_order") || !strings.Contains(out, "Find one order.") {
		t.Errorf("tools list: %v\n%s", err, out)
	}
	out, err = runCLI(t, append([]string{"tools", "list", "--json"}, api...)...)
	if err != nil || !strings.Contains(out, `"cacheSeconds": 30`) {
		t.Errorf("tools list --json: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tools", "set", "get_order", "--cache", "4000"}, "--cache: a whole number from 0 (off) to 3600, not 4000"},
		{[]string{"tools", "set", "get_order", "--approve"}, `No connected agent registers a tool "get_order"`},
		{[]string{"tools", "set", "get_order"}, "nothing to change"},
		{[]string{"tools", "list", "--project", "nope"}, `There is no project "nope", or you are not a member of it. Pick one from the list of projects. Projects: default (--project NAME).`},
	} {
		if _, err := runCLI(t, append(c.args, "--url", url, "--token", token)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
	if _, err := runCLI(t, "tools", "list", "--url", url, "--token", "sfx_admin_wrong"); err == nil || !strings.Contains(err.Error(), "spacefix tokens create") {
		t.Errorf("wrong token: %v, want a hint to make one", err)
	}
	t.Setenv("SPACEFIX_TOKEN", "")
	if _, err := runCLI(t, "tools", "list", "--url", url); err == nil || !strings.Contains(err.Error(), "no admin API token") {
		t.Errorf("no token: %v", err)
	}
}

// A typo in a tool name is refused, naming the tools there are, instead of
// leaving a phantom row for a tool no agent offers.
func TestFirstHourToolsSetRefusesUnknownName(t *testing.T) {
	_, url, token, st := adminGateway(t)
	api := []string{"--url", url, "--token", token}
	_, err := runCLI(t, append([]string{"tools", "set", "no_such", "--cache", "30"}, api...)...)
	if want := `tools set: project "default" has no tool "no_such" (no agent has offered a tool yet); check the name, or pass --create to save settings for a tool an agent will offer later`; err == nil || err.Error() != want {
		t.Errorf("tools set no_such = %v, want %q", err, want)
	}
	if _, err := runCLI(t, append([]string{"tools", "set", "get_order", "--create", "--cache", "30"}, api...)...); err != nil {
		t.Fatalf("tools set --create: %v", err)
	}
	_, err = runCLI(t, append([]string{"tools", "set", "get_ordr", "--cache", "30"}, api...)...)
	if want := `(the tools are: get_order)`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("tools set get_ordr = %v, want it to contain %q", err, want)
	}
	if got, _ := st.ToolSettings(context.Background(), 1); len(got) != 1 || got[0].Tool != "get_order" {
		t.Errorf("saved settings = %+v, want only get_order's", got)
	}
}

// The admin commands find the gateway without --url: through SPACEFIX_URL,
// else through the address serve last recorded in the store.
func TestFirstHourAdminFindsGateway(t *testing.T) {
	data := filepath.Join(t.TempDir(), "s.db")
	ctx, cancel := context.WithCancel(context.Background())
	var out, logs syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--data", data}, &out, &logs) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "MCP endpoint") {
		if time.Now().After(deadline) {
			t.Fatalf("serve printed no MCP endpoint:\n%s\n%s", out.String(), logs.String())
		}
		time.Sleep(10 * time.Millisecond) // poll interval, bounded by the deadline: a real gateway on a socket and a database, which synctest cannot fake
	}
	tok, err := runCLI(t, "tokens", "create", "--data", data, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ Token string }
	if err := json.Unmarshal([]byte(tok), &created); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPACEFIX_TOKEN", created.Token)
	t.Setenv("SPACEFIX_URL", "")
	if got, err := runCLI(t, "settings", "show", "--data", data); err != nil || !strings.Contains(got, "Call wait") {
		t.Errorf("settings show with the address from the store: %v\n%s", err, got)
	}
	base := strings.TrimSuffix(regexp.MustCompile(`MCP endpoint  (\S+)`).FindStringSubmatch(out.String())[1], "/mcp")
	if got, err := runCLI(t, "users", "setup-link", "--data", data); err != nil || !strings.Contains(got, "  "+base+"/setup/") {
		t.Errorf("users setup-link with the address from the store: %v\n%s\nwant a link on %s", err, got, base)
	}
	t.Setenv("SPACEFIX_URL", "http://127.0.0.1:1")
	if _, err := runCLI(t, "settings", "show", "--data", data); err == nil || !strings.Contains(err.Error(), "reach the gateway at http://127.0.0.1:1") {
		t.Errorf("settings show with SPACEFIX_URL: %v, want SPACEFIX_URL to win over the store", err)
	}
}

func TestSettingsCommand(t *testing.T) {
	_, url, token, st := adminGateway(t)
	t.Setenv("SPACEFIX_TOKEN", token)
	out, err := runCLI(t, "settings", "set", "--url", url, "--call-wait", "5", "--client-access", "read", "--rate-limit", "60", "--approve-tool-changes",
		"--longest-task", "2h", "--keep-task-results", "48h", "--repeat-window", "72h")
	if err != nil || !strings.Contains(out, "Call wait") || !strings.Contains(out, "5 s") || !strings.Contains(out, "60 calls per minute per key") ||
		!strings.Contains(out, "Longest task            2h0m0s") || !strings.Contains(out, "Keep task results       48h0m0s") ||
		!strings.Contains(out, "Repeat window           72h0m0s") {
		t.Fatalf("settings set: %v\n%s", err, out)
	}
	p, _ := st.Project(context.Background(), "default")
	want := store.ProjectSettings{CallWaitMs: 5000, ReadOnlyClients: true, RateLimitPerMinute: 60, ApproveToolChanges: true,
		LongestTaskMs: 2 * 3600_000, TaskTTLMs: 48 * 3600_000, IdempotencyWindowMs: 72 * 3600_000}
	if p.Settings != want {
		t.Errorf("stored settings = %+v, want %+v", p.Settings, want)
	}
	if _, err := runCLI(t, "settings", "set", "--url", url, "--call-wait", "31"); err == nil || err.Error() != "--call-wait: the call wait is 1 to 30 seconds, not 31" {
		t.Errorf("call wait 31: %v, want the flag named", err)
	}
	if out, err := runCLI(t, "settings", "show", "--url", url); err != nil || !strings.Contains(out, "Largest arguments       default (1,048,576 bytes)") {
		t.Errorf("settings show leaves out the largest arguments: %v\n%s", err, out)
	}
	for flag, want := range map[string]string{
		"--longest-task=90s":       "settings set: --longest-task is whole minutes from 1m to 24h, not 1m30s",
		"--longest-task=25h":       "settings set: --longest-task is whole minutes from 1m to 24h, not 25h0m0s",
		"--keep-task-results=169h": "settings set: --keep-task-results is whole hours from 1h to 168h, not 169h0m0s",
		"--repeat-window=30m":      "settings set: --repeat-window is whole hours from 1h to 720h, not 30m0s",
		"--repeat-window=721h":     "settings set: --repeat-window is whole hours from 1h to 720h, not 721h0m0s",
	} {
		if _, err := runCLI(t, "settings", "set", "--url", url, flag); err == nil || err.Error() != want {
			t.Errorf("settings set %s: %v, want %q", flag, err, want)
		}
	}
	out, err = runCLI(t, "settings", "show", "--url", url)
	if err != nil || !strings.Contains(out, "read only") {
		t.Errorf("settings show: %v\n%s", err, out)
	}
}

func TestTokensAndUsers(t *testing.T) {
	data := filepath.Join(t.TempDir(), "s.db")
	out, err := runCLI(t, "users", "setup-link", "--data", data, "--url", "https://gw.example/")
	if err != nil || !strings.Contains(out, "https://gw.example/setup/") {
		t.Fatalf("users setup-link: %v\n%s", err, out)
	}
	out, err = runCLI(t, "tokens", "create", "--data", data, "--name", "deploy")
	if err != nil || !strings.Contains(out, "sfx_admin_") || !strings.Contains(out, "cannot be shown again") {
		t.Fatalf("tokens create: %v\n%s", err, out)
	}
	out, _ = runCLI(t, "tokens", "list", "--data", data)
	id := strings.Fields(strings.Split(out, "\n")[1])[0]
	if !strings.HasPrefix(id, "tok_") || strings.Contains(out, "sfx_admin_") {
		t.Fatalf("tokens list:\n%s", out)
	}
	if out, err := runCLI(t, "tokens", "revoke", id, "--data", data); err != nil || !strings.Contains(out, "Revoked "+id) {
		t.Errorf("tokens revoke: %v %s", err, out)
	}
	if _, err := runCLI(t, "tokens", "revoke", "tok_nope", "--data", data); err == nil || !strings.Contains(err.Error(), `no token "tok_nope"`) {
		t.Errorf("revoke unknown: %v", err)
	}
}

// TestProjectTokensAndAudit: a project token made with the CLI acts on its
// project with its role and nowhere else, through a running gateway's
// admin API; the changes are in spacefix audit list.
func TestProjectTokensAndAudit(t *testing.T) {
	data, url, _, st := adminGateway(t)
	if _, err := runCLI(t, "projects", "create", "shop", "--data", data); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "tokens", "create", "--data", data, "--project", "default"); err == nil || !strings.Contains(err.Error(), "--project and --role go together") {
		t.Errorf("--project without --role: %v", err)
	}
	if _, err := runCLI(t, "tokens", "create", "--data", data, "--project", "default", "--role", "admin"); err == nil || !strings.Contains(err.Error(), `--role must be viewer, editor or owner, not "admin"`) {
		t.Errorf("--role admin: %v", err)
	}
	tok := func(role string) string {
		out, err := runCLI(t, "tokens", "create", "--data", data, "--project", "default", "--role", role, "--name", role+"-bot", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Token, Project, Role string }
		if err := json.Unmarshal([]byte(out), &v); err != nil || v.Project != "default" || v.Role != role {
			t.Fatalf("tokens create --project --role --json = %q: %v", out, err)
		}
		return v.Token
	}
	viewer, editor := tok("viewer"), tok("editor")
	list, _ := runCLI(t, "tokens", "list", "--data", data, "--project", "default")
	if !strings.Contains(list, "default (viewer)") || !strings.Contains(list, "default (editor)") || strings.Contains(list, "instance (admin)") {
		t.Errorf("tokens list --project default:\n%s", list)
	}

	if out, err := runCLI(t, "tools", "list", "--url", url, "--token", viewer); err != nil {
		t.Errorf("tools list with a viewer token: %v\n%s", err, out)
	}
	_, err := runCLI(t, "tools", "set", "search_orders", "--disabled", "--create", "--url", url, "--token", viewer)
	if err == nil || !strings.Contains(err.Error(), `This change needs the editor or owner role in project "default"; this token is a viewer.`) {
		t.Errorf("tools set with a viewer token: %v", err)
	}
	if out, err := runCLI(t, "tools", "set", "search_orders", "--disabled", "--create", "--url", url, "--token", editor); err != nil {
		t.Errorf("tools set with an editor token: %v\n%s", err, out)
	}
	if _, err := runCLI(t, "tools", "list", "--project", "shop", "--url", url, "--token", editor); err == nil || !strings.Contains(err.Error(), `There is no project "shop", or you are not a member of it.`) {
		t.Errorf("tools list of another project with a project token: %v", err)
	}

	out, err := runCLI(t, "audit", "list", "--data", data, "--project", "default", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct{ Action, Actor, Target string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit list --json line %q: %v", line, err)
		}
		actions = append(actions, e.Action+" by "+strings.Fields(e.Actor)[0])
	}
	want := []string{"tool.update by token", "token.create by cli", "token.create by cli"}
	if !slices.Equal(actions, want) {
		t.Errorf("audit list --project default = %q; want %q", actions, want)
	}
	table, _ := runCLI(t, "audit", "list", "--data", data, "--project", "default")
	if !strings.Contains(table, "tool.update") || !strings.Contains(table, `"disabled":true`) || strings.Contains(table, "sfx_admin_") {
		t.Errorf("audit list table:\n%s", table)
	}
	_ = st
}

// tools list names the argument that carries a repeat-safe tool's
// request id.
func TestToolsListRequestID(t *testing.T) {
	var b strings.Builder
	err := printTools(&b, []apitypes.Tool{
		{Name: "create_order", Registered: true, IdempotencyKey: "requestId", Pills: []apitypes.Pill{{Text: "Repeat-safe (requestId)"}}},
		{Name: "get_order", Registered: true, ReadOnly: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if len(lines) < 3 || !strings.Contains(lines[0], "REQUEST ID") ||
		!strings.Contains(lines[1], "requestId") || !strings.Contains(lines[1], "Repeat-safe (requestId)") || strings.Contains(lines[2], "requestId") {
		t.Errorf("tools list:\n%s", b.String())
	}
}

// The audit table shows "&", "<" and ">" as they were typed, not as the
// \u0026 of JSON for HTML pages.
func TestAuditListShowsText(t *testing.T) {
	data := filepath.Join(t.TempDir(), "s.db")
	if out, err := runCLI(t, "tokens", "create", "--data", data, "--name", "R&D <ci>"); err != nil {
		t.Fatalf("tokens create: %v\n%s", err, out)
	}
	table, err := runCLI(t, "audit", "list", "--data", data)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table, `"R&D <ci>"`) || strings.Contains(table, `\u0026`) {
		t.Errorf("audit list:\n%s\nwant the token's name as typed, \"R&D <ci>\"", table)
	}
}
