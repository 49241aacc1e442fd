package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
)

// Help is asked for in the ways people try: `spacefix keys --help`,
// `spacefix keys help`, `spacefix help keys` (all print the group's usage
// and exit 0), `spacefix help keys create` (that command's flags).

// helpText is the usage a command prints above its flags, by flag set name.
var helpText = map[string]string{
	"bench":        benchUsage,
	"bridge":       bridgeUsage,
	"bridge login": bridgeUsage,
}

// groupUsage is what `spacefix GROUP --help` prints, by group.
var groupUsage = map[string]string{
	"keys": `Usage:
  spacefix keys create --kind agent [--project NAME] [--name LABEL] [--json]
  spacefix keys create --kind client [--project NAME] [--read-only] [--tools a,b] [--name LABEL] [--json]
  spacefix keys list [--project NAME] [--json]
  spacefix keys set ID --identity-audience AUDIENCE [--project NAME] [--url URL --token TOKEN]
  spacefix keys revoke ID [--project NAME]

Agent keys connect agents; client keys connect MCP clients. Every command
works on the store (--data); keys set with --url or --token goes through a
running gateway's admin API instead.
`,
	"projects": `Usage:
  spacefix projects create NAME [--json]
  spacefix projects list [--json]
`,
	"tokens": `Usage:
  spacefix tokens create [--name LABEL] [--project NAME --role viewer|editor|owner] [--json]
  spacefix tokens list [--project NAME] [--json]
  spacefix tokens revoke ID

API tokens for scripts and CI: an instance admin token, or with --project
and --role a token for one project.
`,
	"audit": `Usage:
  spacefix audit list [--project NAME] [--action ACTION] [--actor ACTOR] [--limit N] [--before ID] [--json]
`,
	"users": `Usage:
  spacefix users list
  spacefix users setup-link [--url URL]
`,
	"gateways": `Usage:
  spacefix gateways list [--json]
`,
	"identity": `Usage:
  spacefix identity rotate [--secret-key-file FILE]
  spacefix identity reset [--secret-key-file FILE]

rotate signs identity assertions with a new key now; reset makes new signing
keys when the secret key file that sealed them is lost.
`,
	"tools": `Usage:
  spacefix tools list [--project NAME] [--url URL] [--token TOKEN] [--json]
  spacefix tools set TOOL [--description TEXT] [--cache SECONDS] [--access follow|read|write] [--disabled] [--approve|--reject] [--project NAME] [--url URL] [--token TOKEN]
`,
	"policy": `Usage:
  spacefix policy show [--project NAME] [--url URL] [--token TOKEN] [--json]
  spacefix policy set FILE [--project NAME] [--url URL] [--token TOKEN] [--json]
  spacefix policy test --tool NAME [--args JSON] [--result JSON] --as-key KEY_ID|--as-person EMAIL [--file DRAFT] [--project NAME] [--url URL] [--token TOKEN] [--json]
  spacefix policy history [--limit N] [--project NAME] [--url URL] [--token TOKEN] [--json]
  spacefix policy interceptors [--project NAME] [--url URL] [--token TOKEN] [--json]

A project's policy is an ordered list of rules on who may list and call
which tools with which arguments, and the interceptor servers its calls
pass through (docs/policy.md). set saves FILE (JSON or YAML; - reads
stdin) as the next version, which every gateway applies within a second;
only owners may. test says what the saved policy, or the draft in --file,
decides for one caller listing and calling one tool (and, with --result,
for a sample of its result). history lists the
saved versions, newest first, with when and by whom. interceptors says
what the gateway at --url found at each interceptor server of the saved
policy: listed, with the interceptors it offers (type, hooks, priority,
mode), or why it could not be listed; each gateway lists them on its
own. Interceptor header values are never shown.
`,
	"settings": `Usage:
  spacefix settings show [--project NAME] [--url URL] [--token TOKEN] [--json]
  spacefix settings set [--call-wait SECONDS] [--client-access read|readwrite] … [--project NAME] [--url URL] [--token TOKEN]
`,
}

// groupHelp is the answer to `spacefix GROUP --help`: run prints the
// group's usage on stdout and main exits 0, as for any --help.
type groupHelp struct{ group string }

func (h groupHelp) Error() string { return h.group + ": help" }

func (h groupHelp) Is(target error) bool { return target == flag.ErrHelp }

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return slices.Contains([]string{"help", "-h", "-help", "--help"}, arg)
}

// printHelp prints what err asks for, if it is a groupHelp, and says
// whether it was one.
func printHelp(w io.Writer, err error) bool {
	var h groupHelp
	if !errors.As(err, &h) {
		return false
	}
	fmt.Fprintf(w, "%s\nRun 'spacefix %s COMMAND --help' for a command's flags.\n", groupUsage[h.group], h.group)
	return true
}

// helpArgs is the command line `spacefix help COMMAND [SUBCOMMAND]` stands
// for: the command named, asked for --help.
func helpArgs(named []string) []string {
	return append(slices.Clone(named), "--help")
}
