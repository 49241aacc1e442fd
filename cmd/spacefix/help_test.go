package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/leaktest"
)

// TestMain lets a test run this package's main as the binary: with
// SPACEFIX_TEST_MAIN=1 the test binary is spacefix, so exit codes and what
// main itself prints can be checked.
func TestMain(m *testing.M) {
	if os.Getenv("SPACEFIX_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(leaktest.Run(m)) // fails the package when goroutines outlive its tests
}

// runMain runs spacefix with args as a process and returns its stdout,
// stderr and exit code.
func runMain(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "SPACEFIX_TEST_MAIN=1", "SPACEFIX_DATA=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run spacefix %v: %v", args, err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

const keysHelp = `Usage:
  spacefix keys create --kind agent [--project NAME] [--name LABEL] [--json]
  spacefix keys create --kind client [--project NAME] [--read-only] [--tools a,b] [--name LABEL] [--json]
  spacefix keys list [--project NAME] [--json]
  spacefix keys set ID --identity-audience AUDIENCE [--project NAME] [--url URL --token TOKEN]
  spacefix keys revoke ID [--project NAME]

Agent keys connect agents; client keys connect MCP clients. Every command
works on the store (--data); keys set with --url or --token goes through a
running gateway's admin API instead.

Run 'spacefix keys COMMAND --help' for a command's flags.
`

// Help is there the ways people ask for it, with exit code 0; a mistake is
// said once, by us, with exit code 2.
func TestHelpAndVersion(t *testing.T) {
	version, _, _ := runMain(t, "version")
	for _, c := range []struct {
		args           []string
		stdout, stderr string
		code           int
	}{
		{[]string{"keys", "--help"}, keysHelp, "", 0},
		{[]string{"keys", "-h"}, keysHelp, "", 0},
		{[]string{"help", "keys"}, keysHelp, "", 0},
		{[]string{"--version"}, version, "", 0},
		{[]string{"serve", "--adr", "127.0.0.1:0"}, "", "spacefix: serve: unknown flag --adr; did you mean --addr? (see spacefix serve --help)\nRun 'spacefix help' for usage.\n", 2},
		{[]string{"bridge", "--nme", "x"}, "", "spacefix: bridge: unknown flag --nme; did you mean --name? (see spacefix bridge --help)\nRun 'spacefix help' for usage.\n", 2},
		{[]string{"keys"}, "", "spacefix: keys: want create, list, set or revoke (see spacefix keys --help)\nRun 'spacefix help' for usage.\n", 2},
	} {
		stdout, stderr, code := runMain(t, c.args...)
		if diff := cmp.Diff(c.stdout, stdout); diff != "" {
			t.Errorf("spacefix %s: stdout (-want +got):\n%s", strings.Join(c.args, " "), diff)
		}
		if diff := cmp.Diff(c.stderr, stderr); diff != "" {
			t.Errorf("spacefix %s: stderr (-want +got):\n%s", strings.Join(c.args, " "), diff)
		}
		if code != c.code {
			t.Errorf("spacefix %s: exit code %d, want %d", strings.Join(c.args, " "), code, c.code)
		}
	}
	if !strings.HasPrefix(version, "spacefix ") {
		t.Errorf("spacefix version printed %q", version)
	}
}

// Every command group prints its usage for --help, and `spacefix help
// GROUP COMMAND` prints that command's flags.
func TestGroupHelp(t *testing.T) {
	for group := range groupUsage {
		out, err := runCLI(t, group, "--help")
		if !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(out, "Usage:\n  spacefix "+group+" ") ||
			!strings.HasSuffix(out, "\nRun 'spacefix "+group+" COMMAND --help' for a command's flags.\n") {
			t.Errorf("spacefix %s --help: %v\n%s", group, err, out)
		}
	}
	out, err := runCLI(t, "help", "keys", "create")
	if !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(out, "Usage of spacefix keys create:\n") {
		t.Errorf("spacefix help keys create: %v\n%s", err, out)
	}
}

// Every help writes flags --name, a number default bare, a string default
// quoted, and no zero default beside the usage's own.
func TestHelpFlagsForm(t *testing.T) {
	for _, c := range []struct {
		args      []string
		want, bad []string
	}{
		{[]string{"bridge", "--help"}, []string{"\nFlags:\n", "  --config string\n"}, []string{"\n  -config"}},
		{[]string{"bridge", "login", "--help"}, []string{"  --port int\n"}, []string{"\n  -port"}},
		{[]string{"bench", "--help"}, []string{"(default 1)\n", "(default 10s)\n", `(default "{}")`}, []string{`(default "1")`, "\n  -tool"}},
		{[]string{"audit", "list", "--help"}, []string{"(default 50)\n"}, []string{`(default "50")`}},
		{[]string{"settings", "set", "--help"}, []string{"whole minutes from 1m to 24h (default 1h)\n"}, []string{`(default "0s")`, `(default "0")`}},
	} {
		out, err := runCLI(t, c.args...)
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%v: %v", c.args, err)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v lacks %q:\n%s", c.args, w, out)
			}
		}
		for _, b := range c.bad {
			if strings.Contains(out, b) {
				t.Errorf("%v shows %q:\n%s", c.args, b, out)
			}
		}
	}
}

// keys set goes through the admin API with --url and --token, as tools
// set does; keys set and keys revoke take --project, and refuse a key of
// another project.
func TestKeysSetOverAPI(t *testing.T) {
	data, url, token, st := adminGateway(t)
	if _, err := runCLI(t, "projects", "create", "shop", "--data", data); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "keys", "create", "--data", data, "--kind", "agent", "--json")
	var k struct{ ID string }
	if err != nil || json.Unmarshal([]byte(out), &k) != nil {
		t.Fatalf("keys create: %v %s", err, out)
	}
	out, err = runCLI(t, "keys", "set", k.ID, "--identity-audience", "https://orders.example.com", "--url", url, "--token", token, "--data", "/nonexistent/s.db")
	if want := k.ID + `: every call carries an identity token for audience "https://orders.example.com". Running gateways apply it within a second.` + "\n"; err != nil || out != want {
		t.Errorf("keys set over the API = %v %q, want %q", err, out, want)
	}
	if got, _ := st.Key(t.Context(), k.ID); got.IdentityAudience != "https://orders.example.com" {
		t.Errorf("stored audience %q after keys set over the API", got.IdentityAudience)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "set", k.ID, "--identity-audience", "x", "--url", url, "--token", token, "--project", "shop"}, `Project "shop" has no key "` + k.ID + `"`},
		{[]string{"keys", "set", k.ID, "--identity-audience", "x", "--data", data, "--project", "shop"}, `project "shop" has no key "` + k.ID + `"; see spacefix keys list --project shop`},
		{[]string{"keys", "revoke", k.ID, "--data", data, "--project", "shop"}, `project "shop" has no key "` + k.ID + `"; see spacefix keys list --project shop`},
	} {
		if _, err := runCLI(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	if out, err := runCLI(t, "keys", "revoke", k.ID, "--data", data, "--project", "default"); err != nil || !strings.HasPrefix(out, "Revoked "+k.ID) {
		t.Errorf("keys revoke --project default: %v %s", err, out)
	}
}
