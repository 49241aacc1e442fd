package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// The bridge's command line: what is missing or contradictory is a usage
// error that says what to write.
func TestBridgeUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--", "npx", "x"}, "bridge: --name is required (or --config FILE)"},
		{[]string{"--name", "fs"}, "bridge: give the server: -- COMMAND [ARGS...] or --remote URL"},
		{[]string{"--name", "fs", "--remote", "http://h/mcp", "--", "x"}, "bridge: give --remote URL or -- COMMAND, not both"},
		{[]string{"--name", "fs", "--header", "A: b", "--", "x"}, "bridge: --header goes with --remote"},
		{[]string{"--name", "a__b", "--", "x"}, `bridge: server name "a__b": use 1 to 64 characters from A-Z a-z 0-9 _ - without "__"`},
		{[]string{"--config", "f.json", "--name", "x"}, "bridge: --config takes no --name, --remote, --header or command"},
		{[]string{"--name", "fs", "--header", "nocolon", "--remote", "http://h"}, `invalid value "nocolon" for flag --header: want "Name: value"`},
		{[]string{"--name", "fs", "--timeout", "3m", "--", "x"}, `bridge: server "fs": timeout 3m0s: use at most 2m0s`},
		{[]string{"--name", "fs", "--env", "SPACEFIX_TEST_SURELY_UNSET", "--", "x"}, `invalid value "SPACEFIX_TEST_SURELY_UNSET" for flag --env: SPACEFIX_TEST_SURELY_UNSET is not set in the bridge's environment; write --env SPACEFIX_TEST_SURELY_UNSET=value`},
		{[]string{"--name", "fs", "--env", "A=b", "--remote", "http://h"}, "bridge: --env goes with a command, not --remote"},
		{[]string{"--config", "f.json", "--env", "A=b"}, `bridge: --env goes with one server; in a --config file write "env": {"NAME": "${NAME}"}`},
		{[]string{"--name", "fs", "--per-person", "--", "x"}, `bridge: server "fs": per person ("perPerson" or "tokenExchange") needs a remote "url"; a command runs with one account for everyone`},
		{[]string{"--name", "gh", "--fallback", "shared", "--remote", "https://h/mcp"}, "bridge: --fallback goes with --per-person"},
		{[]string{"--name", "gh", "--per-person", "--fallback", "all", "--remote", "https://h/mcp"}, `bridge: server "gh": fallback "all": use "shared" (calls without a person use the bridge's own sign-in) or leave it out`},
		{[]string{"--name", "gh", "--per-person", "--remote", "https://me:pw@h/mcp"}, `bridge: server "gh": url "https://h/…": a per-person URL carries no user or password (each person's own token is sent); remove the part before "@"`},
		{[]string{"--config", "f.json", "--per-person"}, `bridge: --per-person and --fallback go with one server; in a --config file write "perPerson": true, "fallback": "shared"`},
		{[]string{"login"}, "bridge login: give the server's name first: spacefix bridge login NAME --remote URL"},
		{[]string{"login", "gh"}, "bridge login: give --remote URL or --config FILE"},
		{[]string{"login", "gh", "--", "npx", "x"}, "bridge login: give --remote URL or --config FILE"},
	} {
		err := run(context.Background(), append([]string{"bridge"}, c.args...), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("bridge %q = %v, want %q", c.args, err, c.want)
		}
	}
}
