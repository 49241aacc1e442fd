// Command spacefix is the Spacefix gateway and its administration CLI.
//
//	spacefix serve [--addr HOST:PORT] [--data FILE|postgres://…] [--bus nats://HOST:PORT[,…]] [--advertise-addr HOST:PORT]
//	spacefix keys create --project NAME --kind agent|client [--read-only] [--tools a,b] [--name LABEL] [--json]
//	spacefix keys list [--project NAME] [--json]
//	spacefix keys set ID --identity-audience AUDIENCE [--project NAME] [--url URL --token TOKEN]
//	spacefix keys revoke ID [--project NAME]
//	spacefix projects create NAME
//	spacefix projects list [--json]
//	spacefix tokens create|list|revoke, spacefix users list|setup-link, spacefix gateways list, spacefix identity rotate|reset
//	spacefix tools list|set, spacefix settings show|set, spacefix policy show|set|test|history|interceptors (over the admin API: --url or the address serve recorded in --data, --token)
//	spacefix bridge [--url GATEWAY] [--key KEY] --name NAME -- COMMAND [ARGS…] | --remote URL [--header "N: v"]… | --config FILE
//	spacefix bench [--url GATEWAY] [--key CLIENT_KEY] --tool NAME [--args JSON] [--calls N | --duration D] [--concurrency C] [--json]
//	spacefix backup --out FILE [--data FILE]
//	spacefix version (or --version)
//	spacefix help [COMMAND [SUBCOMMAND]], or --help after any command
//
// Every command takes --data (env SPACEFIX_DATA, default ./spacefix.db) and is
// safe to run while serve runs on the same file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "spacefix:", err)
		fmt.Fprintln(os.Stderr, "Run 'spacefix help' for usage.")
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "spacefix:", err)
		os.Exit(1)
	}
}

const usage = `Spacefix: an MCP gateway for tools that live in your own services.

Usage:
  spacefix serve     [--addr HOST:PORT] [--data FILE]   run the gateway
  spacefix keys      create|list|set|revoke             manage agent and client keys
  spacefix projects  create|list                        manage projects
  spacefix tokens    create|list|revoke                 API tokens for scripts and CI (instance, or --project and --role)
  spacefix audit     list [--project NAME]              who changed what, when and from where
  spacefix users     list|setup-link                    dashboard users
  spacefix gateways  list                               the gateways running on the store
  spacefix identity  rotate                             sign identity assertions with a new key now
  spacefix identity  reset                              new signing keys, when the secret key file that sealed them is lost
  spacefix idp       add|list|remove                    identity providers whose ID-JAGs sign people in (enterprise sign-in)
  spacefix tools     list|set                           per-tool controls, over the admin API
  spacefix settings  show|set                           project settings, over the admin API
  spacefix policy    show|set FILE|test --tool NAME     the project's rules for who may call what, over the admin API
  spacefix policy    history|interceptors               its saved versions; what the gateway found at its interceptor servers
  spacefix bridge    --name N -- COMMAND | --remote URL | --config FILE
                                                        run existing MCP servers as agents
  spacefix bridge    login NAME --remote URL            sign in to a remote server behind OAuth
  spacefix bench     --tool NAME [--args JSON]          call a tool through a gateway: p50/p99, calls/s, errors
  spacefix backup    --out FILE [--data FILE]           copy a running gateway's SQLite store
  spacefix version                                      print the version

Run 'spacefix COMMAND --help' for a command's flags.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	err := runCommand(ctx, args, stdout, stderr)
	if printHelp(stdout, err) {
		return flag.ErrHelp
	}
	return err
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return nil
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "keys":
		return keys(ctx, args[1:], stdout)
	case "projects":
		return projects(ctx, args[1:], stdout)
	case "tokens":
		return tokens(ctx, args[1:], stdout)
	case "audit":
		return auditCmd(ctx, args[1:], stdout)
	case "tools":
		return tools(ctx, args[1:], stdout)
	case "settings":
		return settings(ctx, args[1:], stdout)
	case "policy":
		return policyCmd(ctx, args[1:], stdout)
	case "users":
		return usersCmd(ctx, args[1:], stdout)
	case "gateways":
		return gatewaysCmd(ctx, args[1:], stdout)
	case "identity":
		return identityCmd(ctx, args[1:], stdout)
	case "idp":
		return idpCmd(ctx, args[1:], stdout)
	case "bridge":
		return bridgeCmd(ctx, args[1:], stdout, stderr)
	case "bench":
		return benchCmd(ctx, args[1:], stdout, stderr)
	case "backup":
		return backupCmd(ctx, args[1:], stdout)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, currentBuild())
		return nil
	case "help", "-h", "-help", "--help":
		if args[0] == "help" && len(args) > 1 {
			return runCommand(ctx, helpArgs(args[1:]), stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return unknownCommand("", args[0], commands, "")
	}
}

// commands are the names run knows, for suggestions.
var commands = []string{"serve", "keys", "projects", "tokens", "audit", "tools", "settings", "policy", "users", "gateways", "identity", "idp", "bridge", "bench", "backup", "version", "help"}

// command is one subcommand of a command group, such as "keys create".
type command struct {
	name string
	run  func(ctx context.Context, args []string, stdout io.Writer) error
}

// dispatch runs the subcommand args[0] of group.
func dispatch(ctx context.Context, group string, args []string, stdout io.Writer, cmds ...command) error {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.name
	}
	name, err := subcommand(group, args, names...)
	if err != nil {
		return err
	}
	return cmds[slices.Index(names, name)].run(ctx, args[1:], stdout)
}

// subcommand returns args[0] if it is one of names, or the usage error that
// lists them.
func subcommand(group string, args []string, names ...string) (string, error) {
	want := names[0]
	if n := len(names); n > 1 {
		want = strings.Join(names[:n-1], ", ") + " or " + names[n-1]
	}
	switch {
	case len(args) == 0:
		return "", usageError{fmt.Sprintf("%s: want %s (see spacefix %s --help)", group, want, group)}
	case isHelp(args[0]):
		return "", groupHelp{group}
	case !slices.Contains(names, args[0]):
		return "", unknownCommand(group, args[0], names, want)
	}
	return args[0], nil
}
