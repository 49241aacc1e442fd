package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/store"
)

func TestKeysSetIdentityAudience(t *testing.T) { eachStore(t, testKeysSetIdentityAudience) }

func testKeysSetIdentityAudience(t *testing.T, data string) {
	if _, err := runCLI(t, "projects", "create", "shop", "--data", data); err != nil {
		t.Fatal(err)
	}
	newKey := func(kind string) string {
		out, err := runCLI(t, "keys", "create", "--data", data, "--project", "shop", "--kind", kind, "--json")
		var k struct{ ID string }
		if err != nil || json.Unmarshal([]byte(out), &k) != nil {
			t.Fatalf("keys create: %v %s", err, out)
		}
		return k.ID
	}
	agent, client := newKey("agent"), newKey("client")

	out, err := runCLI(t, "keys", "set", agent, "--identity-audience", "https://orders.example.com", "--data", data)
	if want := agent + `: every call carries an identity token for audience "https://orders.example.com". Running gateways apply it within a second.` + "\n"; err != nil || out != want {
		t.Errorf("keys set = %v %q, want %q", err, out, want)
	}
	if out, _ := runCLI(t, "keys", "list", "--data", data, "--json"); !strings.Contains(out, `"identityAudience":"https://orders.example.com"`) {
		t.Errorf("keys list --json lacks the audience: %s", out)
	}
	if out, err := runCLI(t, "keys", "set", agent, "--identity-audience", "https://orders.example.com", "--data", data); err != nil || !strings.HasSuffix(out, "; nothing changed.\n") {
		t.Errorf("keys set again = %v %q; want nothing changed", err, out)
	}
	if out, err := runCLI(t, "keys", "set", "--data", data, agent, "--identity-audience", ""); err != nil || out != agent+": no identity tokens. Running gateways apply it within a second.\n" {
		t.Errorf("keys set '' = %v %q", err, out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "set", agent}, "keys set: nothing to set; pass --identity-audience AUDIENCE"},
		{[]string{"keys", "set", "--identity-audience", "x"}, "keys set: want one agent key ID"},
		{[]string{"keys", "set", "key_nope", "--identity-audience", "x"}, `no key "key_nope"; see spacefix keys list`},
		{[]string{"keys", "set", client, "--identity-audience", "x"}, client + " is a client key; identity tokens go to agents"},
		{[]string{"keys", "set", agent, "--identity-audience", "orders backend"}, "the identity audience may not contain spaces"},
	} {
		if _, err := runCLI(t, append(c.args, "--data", data)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}

	// Each change is in the audit log, as key.identity.
	st, err := openStore(t.Context(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := st.Project(t.Context(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	es, err := st.Audit(t.Context(), store.AuditFilter{ProjectID: p.ID, Action: "key.identity"})
	if err != nil || len(es) != 2 {
		t.Fatalf("key.identity entries = %+v, %v; want 2 (on, off)", es, err)
	}
	if es[1].Actor != store.ActorCLI || es[1].Target != agent || string(es[1].Before) != `{"identityAudience":""}` || string(es[1].After) != `{"identityAudience":"https://orders.example.com"}` {
		t.Errorf("first key.identity = %+v", es[1])
	}
}

func TestKeysHintRuns(t *testing.T) { eachStore(t, testKeysHintRuns) }

// The keys lines a later start prints run as printed in a shell: each one
// makes a key of its kind.
func testKeysHintRuns(t *testing.T, data string) {
	env := []string{"SPACEFIX_DATA=" + data}
	if !strings.Contains(data, "://") {
		dir := filepath.Join(t.TempDir(), "my data")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		data, env = filepath.Join(dir, "s.db"), nil
	}
	if _, err := runCLI(t, "projects", "create", "default", "--data", data); err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, line := range strings.Split(keysHint(dataName(data), env != nil), "\n") {
		if !strings.HasPrefix(line, "  spacefix ") {
			continue
		}
		out, err := runPrinted(t, line, env)
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		made = append(made, strings.SplitN(out, " key ", 2)[0])
	}
	if want := []string{"Created client", "Created agent"}; !slices.Equal(made, want) {
		t.Errorf("the printed lines made %q, want %q", made, want)
	}
}

// runPrinted runs a printed `spacefix …` line with bash, with env added,
// as the CLI: bash splits it into arguments as a person's shell would.
func runPrinted(t *testing.T, line string, env []string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "-c", `spacefix() { printf '%s\0' "$@"; }; `+line)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash -c %q: %v", line, err)
	}
	args := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	return runCLI(t, args...)
}
