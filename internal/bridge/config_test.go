package bridge

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// ParseConfig reads the mcpServers format clients use, takes ${VAR} from
// the environment, and names what is wrong without showing secrets.
func TestParseConfig(t *testing.T) {
	env := map[string]string{"GH_TOKEN": "ghp_secret", "ROOT": "/srv"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	got, err := ParseConfig([]byte(`{"mcpServers": {
		"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "${ROOT}/data"]},
		"github": {"url": "https://api.example.com/mcp?token=abc", "headers": {"Authorization": "Bearer ${GH_TOKEN}"}},
		"tool": {"command": "./tool", "env": {"API_KEY": "${GH_TOKEN}"}, "prefix": false, "timeout": 90, "protocol": "2026-07-28"}
	}}`), lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := []Server{
		{Name: "fs", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv/data"},
			Written: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "${ROOT}/data"}},
		{Name: "github", URL: "https://api.example.com/mcp?token=abc", Headers: map[string]string{"Authorization": "Bearer ghp_secret"}},
		{Name: "tool", Command: "./tool", Written: []string{"./tool"}, Env: map[string]string{"API_KEY": "ghp_secret"}, Unprefixed: true, Timeout: 90 * time.Second, Protocol: "2026-07-28"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("servers (-want +got):\n%s", d)
	}
	if tg := got[0].Target(); tg != "npx -y @modelcontextprotocol/server-filesystem ${ROOT}/data" {
		t.Errorf("stdio target = %q, want the arguments as written", tg)
	}
	if tg := got[1].Target(); tg != "https://api.example.com/…" {
		t.Errorf("remote target = %q: the path and query may hold a token", tg)
	}
	if tg := got[2].Target(); tg != "./tool" {
		t.Errorf("stdio target = %q", tg)
	}
	// A child gets 2025-11-25 unless its entry says otherwise; a remote
	// server is offered 2026-07-28.
	for i, want := range []string{"2025-11-25", "2026-07-28", "2026-07-28"} {
		if v := got[i].offered(); v != want {
			t.Errorf("%s is offered %s, want %s", got[i].Name, v, want)
		}
	}

	for _, c := range []struct{ file, want string }{
		{`{"mcpServers": {"a": {"command": "x", "env": {"K": "${NOPE} ${ALSO_NOPE}"}}}}`, "config: environment variables not set: ALSO_NOPE, NOPE"},
		{`{"mcpServers": {}}`, `config: no servers: write {"mcpServers": {"name": {"command": …} | {"url": …}}}`},
		{`{"mcpServers": {"a__b": {"command": "x"}}}`, `config: server name "a__b": use 1 to 64 characters from A-Z a-z 0-9 _ - without "__"`},
		{`{"mcpServers": {"a": {"command": "x", "timeout": 121}}}`, `config: server "a": timeout 2m1s: use at most 2m0s`},
		{`{"mcpServers": {"a": {"command": "x", "protocol": "2025-06-18"}}}`, `config: server "a": protocol "2025-06-18": use "2026-07-28" or "2025-11-25"`},
		{`{"mcpServers": {"a": {}}}`, `config: server "a": give a command (stdio) or a url (remote)`},
		{`{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}`, `config: server "a": give a command or a url, not both`},
		{`{"mcpServers": {"a": {"url": "ftp://u:pw@h/x"}}}`, `config: server "a": url "ftp://h/…": use an http:// or https:// URL`},
	} {
		_, err := ParseConfig([]byte(c.file), lookup)
		if err == nil || err.Error() != c.want {
			t.Errorf("ParseConfig(%s) = %v, want %q", c.file, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "ghp_secret") {
			t.Errorf("an error shows a secret: %v", err)
		}
	}
}

// progressLine words notifications/progress for the one line a Spacefix
// progress carries.
func TestProgressLine(t *testing.T) {
	for _, c := range []struct {
		progress, total float64
		msg, want       string
	}{
		{50, 100, "Completed step 50 of 100", "Completed step 50 of 100 (50/100)"},
		{3, 0, "", "3"},
		{0.5, 1, "", "0.5/1"},
	} {
		if got := progressLineOf(c.progress, c.total, c.msg); got != c.want {
			t.Errorf("progressLine(%v, %v, %q) = %q, want %q", c.progress, c.total, c.msg, got, c.want)
		}
	}
}

// Target is published (registration, bus, every viewer's Agents page, the
// log): it shows the command line as written, ${VAR} unexpanded, and a
// remote as scheme://host/…, never a secret.
func TestTargetShowsNoSecret(t *testing.T) {
	env := map[string]string{"PGPASSWORD": "pg-pass-7f3a", "TOKEN": "tok-9c1d", "HOST": "db.internal"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	servers, err := ParseConfig([]byte(`{"mcpServers": {
		"pg": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-postgres", "postgresql://app:${PGPASSWORD}@${HOST}/app"]},
		"remote": {"url": "https://user:pw@mcp.example.com/mcp/${TOKEN}/sse?token=${TOKEN}"}
	}}`), lookup)
	if err != nil {
		t.Fatal(err)
	}
	if servers[0].Args[2] != "postgresql://app:pg-pass-7f3a@db.internal/app" {
		t.Errorf("the child gets %q, want the expanded URL", servers[0].Args[2])
	}
	for _, c := range []struct {
		srv  Server
		want string
	}{
		{servers[0], "npx -y @modelcontextprotocol/server-postgres postgresql://app:${PGPASSWORD}@${HOST}/app"},
		{servers[1], "https://mcp.example.com/…"},
		// From the command line, after the shell expanded it.
		{Server{Command: "psql", Args: []string{"postgresql://app:pg-pass-7f3a@db/app", "-c", "select 1"}}, "psql postgresql://app:xxxxx@db/app -c select 1"},
		{Server{URL: "http://127.0.0.1:8931"}, "http://127.0.0.1:8931"},
		{Server{URL: "http://127.0.0.1:8931/"}, "http://127.0.0.1:8931/"},
	} {
		got := c.srv.Target()
		if got != c.want {
			t.Errorf("Target() = %q, want %q", got, c.want)
		}
		for _, secret := range []string{"pg-pass-7f3a", "tok-9c1d", "pw@"} {
			if strings.Contains(got, secret) {
				t.Errorf("Target() = %q shows %q", got, secret)
			}
		}
	}
}

// The example config in examples/bridge parses, with the modes it says.
func TestExampleConfig(t *testing.T) {
	data, err := os.ReadFile("../../examples/bridge/mcp.json")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": "/home/ann", "ORDERS_EXCHANGE_SECRET": "s3cret"}
	servers, err := ParseConfig(data, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]string{}
	for _, s := range servers {
		modes[s.Name] = s.Mode() + "/" + s.Fallback
	}
	if want := map[string]string{"files": "/", "linear": "connect/", "orders": "exchange/shared"}; !cmp.Equal(modes, want) {
		t.Errorf("modes/fallbacks = %v; want %v", modes, want)
	}
}
