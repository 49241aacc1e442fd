package bridge

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A per-person server in the config file: perPerson, fallback and
// tokenExchange, the client secret read from the variable it names.
func TestParseConfigPerPerson(t *testing.T) {
	env := map[string]string{"TX_SECRET": "tx-secret-41", "AS": "https://as.example.com"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	got, err := ParseConfig([]byte(`{"mcpServers": {
		"gh": {"url": "https://mcp.example.com/mcp", "perPerson": true, "fallback": "shared"},
		"jira": {"url": "https://jira.example.com/mcp", "tokenExchange": {"tokenEndpoint": "${AS}/token", "clientId": "bridge",
			"clientSecretEnv": "TX_SECRET", "audience": "jira", "scope": "read write"}},
		"local": {"url": "http://127.0.0.1:9000/mcp", "tokenExchange": {"tokenEndpoint": "http://localhost:9001/token", "clientId": "b", "clientSecretEnv": "TX_SECRET"}}
	}}`), lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := []Server{
		{Name: "gh", URL: "https://mcp.example.com/mcp", PerPerson: true, Fallback: "shared"},
		{Name: "jira", URL: "https://jira.example.com/mcp", TokenExchange: &TokenExchange{TokenEndpoint: "https://as.example.com/token", ClientID: "bridge",
			ClientSecretEnv: "TX_SECRET", ClientSecret: "tx-secret-41", Audience: "jira", Scope: "read write"}},
		{Name: "local", URL: "http://127.0.0.1:9000/mcp", TokenExchange: &TokenExchange{TokenEndpoint: "http://localhost:9001/token", ClientID: "b",
			ClientSecretEnv: "TX_SECRET", ClientSecret: "tx-secret-41"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("servers (-want +got):\n%s", d)
	}
	for i, mode := range []string{ModeConnect, ModeExchange, ModeExchange} {
		if got[i].Mode() != mode {
			t.Errorf("%s: Mode() = %q, want %q", got[i].Name, got[i].Mode(), mode)
		}
	}
}

// Each mistake in a per-person server is named with what to change, and
// no message shows the client secret.
func TestParseConfigPerPersonMistakes(t *testing.T) {
	env := map[string]string{"TX_SECRET": "tx-secret-41"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	te := func(fields string) string {
		return `{"mcpServers": {"a": {"url": "https://h/mcp", "tokenExchange": {` + fields + `}}}}`
	}
	for _, c := range []struct{ file, want string }{
		{`{"mcpServers": {"a": {"command": "x", "perPerson": true}}}`,
			`config: server "a": per person ("perPerson" or "tokenExchange") needs a remote "url"; a command runs with one account for everyone`},
		{`{"mcpServers": {"a": {"command": "x", "tokenExchange": {"tokenEndpoint": "https://as/token"}}}}`,
			`config: server "a": per person ("perPerson" or "tokenExchange") needs a remote "url"; a command runs with one account for everyone`},
		{`{"mcpServers": {"a": {"url": "https://me:pw@h/mcp", "perPerson": true}}}`,
			`config: server "a": url "https://h/…": a per-person URL carries no user or password (each person's own token is sent); remove the part before "@"`},
		{`{"mcpServers": {"a": {"url": "https://h/mcp", "fallback": "shared"}}}`,
			`config: server "a": "fallback" goes with "perPerson": true or "tokenExchange"; remove it, or make the server per person`},
		{`{"mcpServers": {"a": {"url": "https://h/mcp", "perPerson": true, "fallback": "everyone"}}}`,
			`config: server "a": fallback "everyone": use "shared" (calls without a person use the bridge's own sign-in) or leave it out`},
		{te(`"clientId": "b", "clientSecretEnv": "TX_SECRET"`),
			`config: server "a": tokenExchange needs "tokenEndpoint": the authorization server's token URL`},
		{te(`"tokenEndpoint": "http://as.example.com/token", "clientId": "b", "clientSecretEnv": "TX_SECRET"`),
			`config: server "a": tokenExchange.tokenEndpoint "http://as.example.com/…": use an https:// URL (http:// only on 127.0.0.1, ::1 or localhost)`},
		{te(`"tokenEndpoint": "token", "clientId": "b", "clientSecretEnv": "TX_SECRET"`),
			`config: server "a": tokenExchange.tokenEndpoint "(an unreadable URL)": use an https:// URL (http:// only on 127.0.0.1, ::1 or localhost)`},
		{te(`"tokenEndpoint": "https://as/token", "clientSecretEnv": "TX_SECRET"`),
			`config: server "a": tokenExchange needs "clientId": the bridge's client id at the authorization server`},
		{te(`"tokenEndpoint": "https://as/token", "clientId": "b"`),
			`config: server "a": tokenExchange needs "clientSecretEnv": the name of the environment variable that holds the client secret`},
		{te(`"tokenEndpoint": "https://as/token", "clientId": "b", "clientSecretEnv": "NOT_SET_HERE"`),
			`config: server "a": tokenExchange.clientSecretEnv: the environment variable NOT_SET_HERE is not set; set it to the client secret before starting the bridge`},
	} {
		_, err := ParseConfig([]byte(c.file), lookup)
		if err == nil || err.Error() != c.want {
			t.Errorf("ParseConfig(%s) =\n  %v\nwant\n  %q", c.file, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "tx-secret-41") {
			t.Errorf("an error shows the client secret: %v", err)
		}
	}
}

// The registration says the mode, connect mode's URL and the fallback.
func TestRegisteredPerPerson(t *testing.T) {
	for _, c := range []struct {
		srv  Server
		want string
	}{
		{Server{URL: "https://h/mcp"}, "<nil>"},
		{Server{URL: "https://h/mcp", PerPerson: true}, "&{connect https://h/mcp }"},
		{Server{URL: "https://h/mcp", PerPerson: true, Fallback: "shared"}, "&{connect https://h/mcp shared}"},
		{Server{URL: "https://h/mcp", TokenExchange: &TokenExchange{}}, "&{exchange  }"},
	} {
		if got := fmt.Sprint(c.srv.registered()); got != c.want {
			t.Errorf("registered() = %s, want %s", got, c.want)
		}
	}
}
