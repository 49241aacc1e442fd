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
		{[]string{"--name", "fs", "--header", "nocolon", "--remote", "http://h"}, `invalid value "nocolon" for flag -header: want "Name: value"`},
		{[]string{"--name", "fs", "--timeout", "3m", "--", "x"}, `bridge: server "fs": timeout 3m0s: use at most 2m0s`},
		{[]string{"--name", "fs", "--env", "SPACEFIX_TEST_SURELY_UNSET", "--", "x"}, `invalid value "SPACEFIX_TEST_SURELY_UNSET" for flag -env: SPACEFIX_TEST_SURELY_UNSET is not set in the bridge's environment; write --env SPACEFIX_TEST_SURELY_UNSET=value`},
		{[]string{"--name", "fs", "--env", "A=b", "--remote", "http://h"}, "bridge: --env goes with a command, not --remote"},
		{[]string{"--config", "f.json", "--env", "A=b"}, `bridge: --env goes with one server; in a --config file write "env": {"NAME": "${NAME}"}`},
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
