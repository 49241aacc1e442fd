package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/spacefix/spacefix/internal/bridge"
)

const bridgeUsage = `Usage:
  spacefix bridge [--url GATEWAY] [--key AGENT_KEY] --name NAME [--env NAME[=value]]... -- COMMAND [ARGS...]
  spacefix bridge [--url GATEWAY] [--key AGENT_KEY] --name NAME --remote URL [--header "Name: value"]...
                  [--per-person [--fallback shared]]
  spacefix bridge [--url GATEWAY] [--key AGENT_KEY] --config FILE
  spacefix bridge login NAME (--remote URL [--header "Name: value"]... | --config FILE)

Runs an existing MCP server as a Spacefix agent: its tools and prompts appear
as NAME__<tool>. --url defaults to SPACEFIX_URL, --key to SPACEFIX_API_KEY.
The --config file is the mcpServers format MCP clients use; ${VAR} in it is
read from the environment; each server connects as its own agent (a
server's "apiKey" field, if any, overrides --key).

A command gets PATH, HOME, USER, LANG, TMPDIR, TERM, SHELL, LOGNAME (the
Windows equivalents there) of the bridge's environment, and what --env (in
a --config file, "env") names: never SPACEFIX_API_KEY or other secrets of
the shell. --env NAME passes the bridge's own NAME through.

--per-person makes the remote act as each caller's own account there: each
person connects their account once at the gateway (the gateway keeps and
refreshes their tokens), and each of their calls goes to the remote with
their own token, in a session of their own. Listing the remote's tools uses
one sign-in: run "spacefix bridge login NAME" once first. Calls that come
with an agent key (no person) are refused, unless --fallback shared lets
them use that sign-in. In a --config file: "perPerson": true and
"fallback": "shared"; "tokenExchange": {"tokenEndpoint", "clientId",
"clientSecretEnv", "audience", "scope"} instead exchanges each caller's
identity token for the remote's (RFC 8693).

"login" signs a person in to a remote server behind OAuth: it prints the URL
to open, takes the redirect on a loopback port, and keeps the tokens in
~/.config/spacefix/bridge/NAME.json (readable by you only), which the bridge
then uses and refreshes.
`

// envFlags collects repeated --env NAME=value or --env NAME (the bridge's
// own value) flags. Values are secrets: never shown.
type envFlags map[string]string

func (e envFlags) String() string { return fmt.Sprintf("%d variables", len(e)) }

func (e envFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if name == "" {
		return errors.New("want NAME=value or NAME")
	}
	if !ok {
		if value, ok = os.LookupEnv(name); !ok {
			return fmt.Errorf("%s is not set in the bridge's environment; write --env %s=value", name, name)
		}
	}
	e[name] = value
	return nil
}

// headerFlags collects repeated --header "Name: value" flags.
type headerFlags map[string]string

func (h headerFlags) String() string { return fmt.Sprintf("%d headers", len(h)) }

func (h headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return errors.New(`want "Name: value"`)
	}
	h[name] = strings.TrimSpace(value)
	return nil
}

func bridgeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "login" {
		return bridgeLogin(ctx, args[1:], stdout, stderr)
	}
	fs := newFlagSet("bridge", stderr)
	url := fs.String("url", "", "the gateway's URL (default SPACEFIX_URL, else http://127.0.0.1:8080)")
	key := fs.String("key", "", "the agent key (default SPACEFIX_API_KEY)")
	name := fs.String("name", "", "the bridged server's name: tools appear as NAME__<tool>")
	remote := fs.String("remote", "", "a remote MCP server's URL (Streamable HTTP, or legacy SSE)")
	config := fs.String("config", "", "an mcpServers JSON file: bridge every server in it")
	noPrefix := fs.Bool("no-prefix", false, "expose the server's tools under their own names, not NAME__<tool>")
	timeout := fs.Duration("timeout", 0, "how long the gateway waits for each tool, up to 2m (default: the project's call wait)")
	protocol := fs.String("protocol", "", `the MCP version offered to the server, "2026-07-28" or "2025-11-25" (default: 2026-07-28 for --remote, 2025-11-25 for a command)`)
	perPerson := fs.Bool("per-person", false, "with --remote: each caller acts as their own account at the remote (they connect it at the gateway)")
	fallback := fs.String("fallback", "", `with --per-person: "shared" lets calls without a person use the bridge's own sign-in (default: refused)`)
	headers := headerFlags{}
	fs.Var(headers, "header", `a header for --remote, "Name: value" (repeatable)`)
	env := envFlags{}
	fs.Var(env, "env", "a variable for the command's environment, NAME=value, or NAME to pass the bridge's own (repeatable)")
	if err := parseOnce(fs, args); err != nil {
		return err
	}
	switch {
	case len(env) > 0 && *config != "":
		return usageError{`bridge: --env goes with one server; in a --config file write "env": {"NAME": "${NAME}"}`}
	case len(env) > 0 && *remote != "":
		return usageError{"bridge: --env goes with a command, not --remote"}
	case (*perPerson || *fallback != "") && *config != "":
		return usageError{`bridge: --per-person and --fallback go with one server; in a --config file write "perPerson": true, "fallback": "shared"`}
	case *fallback != "" && !*perPerson:
		return usageError{"bridge: --fallback goes with --per-person"}
	}
	servers, err := bridgeServers(*name, *remote, *config, headers, fs.Args())
	if err != nil {
		return err
	}
	if len(env) > 0 {
		servers[0].Env = env
	}
	if *timeout != 0 {
		if *config != "" {
			return usageError{`bridge: --timeout goes with one server; in a --config file write "timeout": SECONDS`}
		}
		servers[0].Timeout = *timeout
		if err := servers[0].Validate(); err != nil {
			return usageError{"bridge: " + err.Error()}
		}
	}
	if *protocol != "" {
		if *config != "" {
			return usageError{`bridge: --protocol goes with one server; in a --config file write "protocol": "2026-07-28"`}
		}
		servers[0].Protocol = *protocol
		if err := servers[0].Validate(); err != nil {
			return usageError{"bridge: " + err.Error()}
		}
	}
	if *perPerson || *fallback != "" {
		servers[0].PerPerson, servers[0].Fallback = *perPerson, *fallback
		if err := servers[0].Validate(); err != nil {
			return usageError{"bridge: " + err.Error()}
		}
	}
	if *noPrefix {
		if *config != "" {
			return usageError{`bridge: --no-prefix goes with one server; in a --config file write "prefix": false`}
		}
		servers[0].Unprefixed = true
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	opts := bridge.Options{GatewayURL: *url, APIKey: *key, Logger: log}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var bridges []*bridge.Bridge
	for _, s := range servers {
		b, err := bridge.New(s, opts)
		if err != nil {
			return usageError{err.Error()}
		}
		bridges = append(bridges, b)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, b := range bridges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Run(ctx); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				cancel()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// The first signal drains (running calls finish); a second forces exit.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	select {
	case <-sigs:
		log.Info("bridge: stopping after the running calls; press Ctrl-C again to stop at once")
		cancel()
	case <-done:
		return first
	}
	select {
	case <-done:
		return first
	case <-sigs:
		return errors.New("stopped at once on a second signal; calls in flight were cut off")
	}
}

// bridgeServers turns the command line into the servers to bridge.
func bridgeServers(name, remote, config string, headers headerFlags, rest []string) ([]bridge.Server, error) {
	switch {
	case config != "":
		if name != "" || remote != "" || len(rest) > 0 || len(headers) > 0 {
			return nil, usageError{"bridge: --config takes no --name, --remote, --header or command"}
		}
		return bridge.LoadConfig(config)
	case name == "":
		return nil, usageError{"bridge: --name is required (or --config FILE)"}
	case remote != "" && len(rest) > 0:
		return nil, usageError{"bridge: give --remote URL or -- COMMAND, not both"}
	case remote == "" && len(rest) == 0:
		return nil, usageError{"bridge: give the server: -- COMMAND [ARGS...] or --remote URL"}
	case remote == "" && len(headers) > 0:
		return nil, usageError{"bridge: --header goes with --remote"}
	}
	s := bridge.Server{Name: name, URL: remote, Headers: headers}
	if len(rest) > 0 {
		s.Command, s.Args = rest[0], rest[1:]
	}
	if err := s.Validate(); err != nil {
		return nil, usageError{"bridge: " + err.Error()}
	}
	return []bridge.Server{s}, nil
}

// bridgeLogin runs `spacefix bridge login NAME`.
func bridgeLogin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bridge login", stderr)
	remote := fs.String("remote", "", "the remote MCP server's URL")
	config := fs.String("config", "", "an mcpServers JSON file that has the server NAME")
	headers := headerFlags{}
	fs.Var(headers, "header", `a header for --remote, "Name: value" (repeatable)`)
	clientID := fs.String("client-id", "", "the https URL of a Client ID Metadata Document for the bridge (default: dynamic client registration)")
	port := fs.Int("port", 0, "the loopback port the sign-in redirect comes to (default: any free port)")
	if len(args) > 0 && isHelp(args[0]) {
		return parseOnce(fs, []string{"--help"})
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usageError{"bridge login: give the server's name first: spacefix bridge login NAME --remote URL"}
	}
	name := args[0]
	if err := parseOnce(fs, args[1:]); err != nil {
		return err
	}
	var srv bridge.Server
	switch {
	case *config != "" && *remote == "":
		servers, err := bridge.LoadConfig(*config)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(servers, func(s bridge.Server) bool { return s.Name == name })
		if i < 0 {
			return usageError{fmt.Sprintf("bridge login: %s has no server %q", *config, name)}
		}
		srv = servers[i]
	case *remote != "" && *config == "":
		srv = bridge.Server{Name: name, URL: *remote, Headers: headers}
	default:
		return usageError{"bridge login: give --remote URL or --config FILE"}
	}
	b, err := bridge.New(srv, bridge.Options{Logger: slog.New(slog.NewTextHandler(stderr, nil))})
	if err != nil {
		return usageError{"bridge login: " + err.Error()}
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return b.Login(ctx, bridge.LoginOptions{Out: stdout, ClientIDMetadataURL: *clientID, Port: *port})
}
