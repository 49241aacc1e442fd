package main

import (
	"errors"
	"flag"
	"strings"
	"testing"
)

// A mistake on the command line is said once, naming the flag as the docs
// write it (--name), with what was probably meant; --help lists --name.
func TestFlagMistakes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tools", "list", "--projct", "x"}, "tools list: unknown flag --projct; did you mean --project? (see spacefix tools list --help)"},
		{[]string{"keys", "list", "-jsn"}, "keys list: unknown flag --jsn; did you mean --json? (see spacefix keys list --help)"},
		{[]string{"keys", "list", "--zzzzzz"}, "keys list: unknown flag --zzzzzz (see spacefix keys list --help)"},
		{[]string{"tools", "set", "x", "--cache", "soon"}, `tools set: invalid value "soon" for flag --cache: parse error (see spacefix tools set --help)`},
		{[]string{"tool", "list"}, `unknown command "tool"; did you mean "tools"?`},
		{[]string{"tools", "lst"}, `tools: unknown command "lst"; did you mean "list"?`},
		{[]string{"tools", "frobnicate"}, `tools: unknown command "frobnicate"; want list or set`},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"serve", "--upstream-allow-private", "10.0.0.0/8,intranet"}, `serve: --upstream-allow-private: "intranet" is not a CIDR range such as 10.20.0.0/16 or fd00::/8`},
		{[]string{"serve", "--upstream-allow-private", "169.254.0.0/16"}, `serve: --upstream-allow-private: 169.254.0.0/16 reaches into 169.254.0.0/16, which --upstream-allow-private cannot allow (loopback has --upstream-allow-loopback; link-local is never dialled)`},
	} {
		out, err := runCLI(t, c.args...)
		var ue usageError
		if !errors.As(err, &ue) || err.Error() != c.want {
			t.Errorf("%v: %v, want the usage error %q", c.args, err, c.want)
		}
		if out != "" {
			t.Errorf("%v printed more than the one error main prints:\n%s", c.args, out)
		}
	}
}

func TestFlagHelp(t *testing.T) {
	out, err := runCLI(t, "tools", "set", "--help")
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"Usage of spacefix tools set:", "  --cache SECONDS\n", "  --project name\n", `(default "default")`} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\n  -cache") {
		t.Errorf("--help shows the single-dash form:\n%s", out)
	}
}

func TestSuggest(t *testing.T) {
	names := []string{"project", "json", "url", "token", "data"}
	for typed, want := range map[string]string{"projct": "project", "jsno": "json", "proj": "project", "tokn": "token", "x": "", "database": ""} {
		if got := suggest(typed, names); got != want {
			t.Errorf("suggest(%q) = %q, want %q", typed, got, want)
		}
	}
}

// A later start prints keys lines that run as printed, one per kind: a
// SQLite path as it is (quoted when it must be), a PostgreSQL URL — shown
// with its password hidden — by the variable it came from.
func TestKeysHint(t *testing.T) {
	for _, c := range []struct {
		data    string
		fromEnv bool
		want    string
	}{
		{"spacefix.db", false, "Make keys with:\n" +
			"  spacefix keys create --data spacefix.db --project default --kind client\n" +
			"  spacefix keys create --data spacefix.db --project default --kind agent"},
		{"/var/lib/my data/s.db", false, "Make keys with:\n" +
			"  spacefix keys create --data '/var/lib/my data/s.db' --project default --kind client\n" +
			"  spacefix keys create --data '/var/lib/my data/s.db' --project default --kind agent"},
		{"postgres://spacefix:xxxxx@db:5432/spacefix", true, "Make keys with:\n" +
			`  spacefix keys create --data "$SPACEFIX_DATA" --project default --kind client` + "\n" +
			`  spacefix keys create --data "$SPACEFIX_DATA" --project default --kind agent`},
		{"postgres://spacefix:xxxxx@db:5432/spacefix", false, "Make keys with:\n" +
			`  spacefix keys create --data "$SPACEFIX_DATA" --project default --kind client` + "\n" +
			`  spacefix keys create --data "$SPACEFIX_DATA" --project default --kind agent` + "\n" +
			"  (first set SPACEFIX_DATA to the postgres:// URL you gave --data; this output hides its password)"},
	} {
		if got := keysHint(c.data, c.fromEnv); got != c.want {
			t.Errorf("keysHint(%q, %v) =\n%s\nwant\n%s", c.data, c.fromEnv, got, c.want)
		}
		if strings.Contains(keysHint(c.data, c.fromEnv), "xxxxx") {
			t.Errorf("keysHint(%q) prints the hidden password's stand-in, which cannot run", c.data)
		}
	}
}
