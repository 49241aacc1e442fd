package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/store"
)

// nodeWhoami is the Node agent the test runs: one tool that answers what
// its handler's call says of the caller.
const nodeWhoami = `import { pathToFileURL } from 'node:url';
const { Agent, defineTool } = await import(pathToFileURL(process.env.SPACEFIX_SDK).href);
const whoami = defineTool({
  name: 'node_whoami',
  description: 'Who is calling.',
  inputSchema: { type: 'object' },
  annotations: { readOnlyHint: true },
  handler: async (_args, call) => JSON.stringify({
    person: call.person ?? null, app: call.app ?? null, project: call.project, role: call.role,
    scopes: call.scopes, identityToken: call.identityToken ?? '',
  }),
});
const agent = new Agent({ name: 'nodeid' });
agent.register([whoami]);
await agent.connect();
`

// nodeSeen is what node_whoami answers.
type nodeSeen struct {
	Person *struct {
		ID    string `json:"id"`
		Email string `json:"email"`
	} `json:"person"`
	App *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"app"`
	Project       string   `json:"project"`
	Role          string   `json:"role"`
	Scopes        []string `json:"scopes"`
	IdentityToken string   `json:"identityToken"`
}

// A person who signed in through OAuth calls a tool of a Node agent (the
// Node SDK, built from this repository): the handler's call names the
// person, the app, the project, the person's role and the scopes, and the
// identity token it carries verifies against the gateway's JWKS with
// go-jose. A client key's call names no person.
func TestIdentityNodeHandler(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH") // buildNodeSDK says the same under SPACEFIX_REQUIRE_ALL
	}
	sdk := buildNodeSDK(t)
	e := newEnv(t)
	script := filepath.Join(t.TempDir(), "whoami.mjs")
	must(t, os.WriteFile(script, []byte(nodeWhoami), 0o600))
	cmd := exec.Command("node", script)
	cmd.Env = append(os.Environ(), "SPACEFIX_SDK="+sdk, "SPACEFIX_URL="+e.url, "SPACEFIX_API_KEY="+e.agentKey)
	cmd.Stdout, cmd.Stderr = logOutput(), logOutput()
	must(t, cmd.Start())
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	waitFor(t, "the Node agent to connect", func() bool { return len(e.gw.Registry().All()) > 0 })
	setAudience(t, e, e.agentKeyID(), idAudience)

	person := newUser(t, e, "grace@example.com", false)
	u, _, err := e.store.UserByEmail(context.Background(), "grace@example.com")
	must(t, err)
	_, err = e.store.SetMember(context.Background(), store.Member{ProjectID: e.project.ID, UserID: u.ID, Role: store.RoleEditor})
	must(t, err)
	cs, err := person.oauthClient("2025-11-25")
	if err != nil {
		t.Fatalf("connect with OAuth: %v", err)
	}
	waitFor(t, "the person's client to list node_whoami", func() bool { return slices.Contains(toolNames(t, cs), "node_whoami") })
	var seen nodeSeen
	must(t, json.Unmarshal([]byte(text(call(t, cs, "node_whoami", map[string]any{}))), &seen))
	if seen.Person == nil || seen.Person.ID != strconv.FormatInt(u.ID, 10) || seen.Person.Email != "grace@example.com" {
		t.Errorf("the Node handler saw person %+v; want grace (%d)", seen.Person, u.ID)
	}
	if seen.App == nil || seen.App.ID == "" || seen.App.Name == "" {
		t.Errorf("the Node handler saw app %+v; want the OAuth client", seen.App)
	}
	if seen.Project != e.project.Name || seen.Role != "editor" {
		t.Errorf("the Node handler saw project %q, role %q; want %q and editor", seen.Project, seen.Role, e.project.Name)
	}
	if diff := cmp.Diff([]string{"mcp:read", "mcp:write"}, seen.Scopes); diff != "" {
		t.Errorf("the Node handler saw scopes (-want +got):\n%s", diff)
	}
	set, _ := jwksOf(t, e.url)
	c := mustVerify(t, set, seen.IdentityToken, e.url)
	if c.Subject != seen.Person.ID || c.Email != "grace@example.com" || c.ClientID != seen.App.ID {
		t.Errorf("the Node handler's identity token = %+v; want grace's", c)
	}

	keyCS := e.connect("2026-07-28", e.clientKey, nil)
	var ks nodeSeen
	must(t, json.Unmarshal([]byte(text(call(t, keyCS, "node_whoami", map[string]any{}))), &ks))
	if ks.Person != nil || ks.App != nil || !strings.HasPrefix(mustVerify(t, set, ks.IdentityToken, e.url).Subject, "key:") {
		t.Errorf("a client key's call to the Node handler: person %+v, app %+v; want none, and a key's token", ks.Person, ks.App)
	}
}
