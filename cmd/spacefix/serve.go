package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/spacefix/spacefix/internal/egress"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/quickstart"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/tracing"
)

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := gateway.DefaultConfig()
	cfg.Version = currentBuild().Version
	fs := newFlagSet("serve", stderr)
	fs.StringVar(&cfg.Addr, "addr", envOr("SPACEFIX_ADDR", cfg.Addr), "listen `address` (env SPACEFIX_ADDR)")
	fs.StringVar(&cfg.PublicURL, "public-url", os.Getenv("SPACEFIX_PUBLIC_URL"), "base `URL` clients reach the gateway at, if not http://ADDR (env SPACEFIX_PUBLIC_URL)")
	fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", cfg.ShutdownGrace, "how long calls in flight may finish on shutdown")
	fs.DurationVar(&cfg.LogRetention, "log-retention", envDuration("SPACEFIX_LOG_RETENTION", cfg.LogRetention), "how long call log records are kept (env SPACEFIX_LOG_RETENTION)")
	fs.DurationVar(&cfg.AuditRetention, "audit-retention", envDuration("SPACEFIX_AUDIT_RETENTION", cfg.AuditRetention), "how long audit log entries are kept, at least 24h (env SPACEFIX_AUDIT_RETENTION)")
	fs.DurationVar(&cfg.SessionIdle, "session-idle", envDuration("SPACEFIX_SESSION_IDLE", cfg.SessionIdle), "close an MCP session after this long without a request (env SPACEFIX_SESSION_IDLE)")
	fs.DurationVar(&cfg.KeepAlive, "keepalive", envDuration("SPACEFIX_KEEPALIVE", cfg.KeepAlive), "how often MCP sessions holding a GET stream are pinged; 3 misses close one (env SPACEFIX_KEEPALIVE)")
	fs.IntVar(&cfg.MaxConns, "max-conns", envInt("SPACEFIX_MAX_CONNS", cfg.MaxConns), "most open connections, agents' included; more wait to be accepted; default from the file limit (env SPACEFIX_MAX_CONNS)")
	fs.IntVar(&cfg.MaxConnsPerAddr, "max-conns-per-addr", envInt("SPACEFIX_MAX_CONNS_PER_ADDR", cfg.MaxConnsPerAddr), "most open HTTP connections from one client address (IPv6: one /64); more are refused; 0 means an eighth of --max-conns, 16 to 1000 (env SPACEFIX_MAX_CONNS_PER_ADDR)")
	proxies := fs.String("trusted-proxies", os.Getenv("SPACEFIX_TRUSTED_PROXIES"), "comma-separated `CIDRs` of proxies whose X-Forwarded-For/-Proto and Forwarded headers are believed, for example 127.0.0.1/32 (env SPACEFIX_TRUSTED_PROXIES)")
	fs.IntVar(&cfg.MaxSessionsPerKey, "max-sessions-per-key", envInt("SPACEFIX_MAX_SESSIONS_PER_KEY", cfg.MaxSessionsPerKey), "most MCP sessions per client key; a new one closes the idlest (env SPACEFIX_MAX_SESSIONS_PER_KEY)")
	fs.IntVar(&cfg.MaxInFlightPerKey, "max-inflight-per-key", envInt("SPACEFIX_MAX_INFLIGHT_PER_KEY", cfg.MaxInFlightPerKey), "most MCP requests in flight per client key; more get 429 (env SPACEFIX_MAX_INFLIGHT_PER_KEY)")
	fs.DurationVar(&cfg.BodyTimeout, "body-timeout", envDuration("SPACEFIX_BODY_TIMEOUT", cfg.BodyTimeout), "how long a client may take to send a request body (env SPACEFIX_BODY_TIMEOUT)")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", envDuration("SPACEFIX_WRITE_TIMEOUT", cfg.WriteTimeout), "how long one write of a response may take (env SPACEFIX_WRITE_TIMEOUT)")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", envDuration("SPACEFIX_IDLE_TIMEOUT", cfg.IdleTimeout), "close a keep-alive connection idle this long (env SPACEFIX_IDLE_TIMEOUT)")
	fs.DurationVar(&cfg.HeaderTimeout, "header-timeout", envDuration("SPACEFIX_HEADER_TIMEOUT", cfg.HeaderTimeout), "close a connection that has not sent a request's headers within this long (env SPACEFIX_HEADER_TIMEOUT)")
	hosts := fs.String("allowed-hosts", os.Getenv("SPACEFIX_ALLOWED_HOSTS"), "comma-separated `hosts` requests may name in Host; default the listen and public-url hosts, plus localhost names on loopback; * allows any (env SPACEFIX_ALLOWED_HOSTS)")
	fs.StringVar(&cfg.Bus, "bus", os.Getenv("SPACEFIX_BUS"), "NATS `servers` (nats://host:port[,…]) that join the gateways sharing --data, so they share agents and calls (env SPACEFIX_BUS)")
	fs.StringVar(&cfg.AdvertiseAddr, "advertise-addr", os.Getenv("SPACEFIX_ADVERTISE_ADDR"), "`host:port` the other gateways reach this one at, with --bus; default the listen address (env SPACEFIX_ADVERTISE_ADDR)")
	oauthOn := fs.Bool("oauth", os.Getenv("SPACEFIX_OAUTH") != "false", "be an OAuth 2.1 authorization server, so MCP clients can sign in instead of pasting a client key; --oauth=false turns it off (env SPACEFIX_OAUTH)")
	fs.BoolVar(&cfg.OAuthDPoPNonce, "oauth-dpop-nonce", os.Getenv("SPACEFIX_OAUTH_DPOP_NONCE") == "true", "make DPoP proofs carry a nonce the gateway hands out, at /oauth/token and /mcp (env SPACEFIX_OAUTH_DPOP_NONCE=true)")
	fs.BoolVar(&cfg.OAuthPrivateClientIDs, "oauth-private-client-ids", os.Getenv("SPACEFIX_OAUTH_PRIVATE_CLIENT_IDS") == "true", "DEVELOPMENT ONLY: fetch OAuth client metadata documents from loopback and private addresses (env SPACEFIX_OAUTH_PRIVATE_CLIENT_IDS=true)")
	fs.BoolVar(&cfg.UpstreamAllowLoopback, "upstream-allow-loopback", os.Getenv("SPACEFIX_UPSTREAM_ALLOW_LOOPBACK") == "true", "let the gateway reach per-person bridged remotes and their authorization servers on loopback addresses, for tests and single-machine setups (env SPACEFIX_UPSTREAM_ALLOW_LOOPBACK=true)")
	allowPrivate := fs.String("upstream-allow-private", os.Getenv("SPACEFIX_UPSTREAM_ALLOW_PRIVATE"), "comma-separated `CIDR` ranges of private addresses (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10, fc00::/7) where the gateway may reach any per-person remote's metadata and authorization server; without it only a remote that is itself at a private address may use them (env SPACEFIX_UPSTREAM_ALLOW_PRIVATE)")
	fs.StringVar(&cfg.SecretKeyFile, "secret-key-file", os.Getenv("SPACEFIX_SECRET_KEY_FILE"), "`file` of the key that encrypts people's upstream tokens and the identity signing keys; default secret.key beside a SQLite file (made at first start); needed with PostgreSQL, the same file on every gateway (env SPACEFIX_SECRET_KEY_FILE)")
	data := dataFlag(fs)
	logger := obsFlags(fs, &cfg)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg.DataPath = *data
	var err error // also of the logger, below
	if cfg.UpstreamAllowPrivate, err = egress.ParsePrefixes(*allowPrivate); err != nil {
		return usageError{fmt.Sprintf("serve: --upstream-allow-private: %v", err)}
	}
	cfg.NoOAuth = !*oauthOn
	if cfg.Bus != "" && !strings.HasPrefix(cfg.Bus, "nats://") && !strings.HasPrefix(cfg.Bus, "tls://") {
		return usageError{fmt.Sprintf("serve: --bus takes NATS server URLs, nats://HOST:PORT[,nats://…], not %q", cfg.Bus)}
	}
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			cfg.AllowedHosts = append(cfg.AllowedHosts, h)
		}
	}
	for _, p := range strings.Split(*proxies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			cfg.TrustedProxies = append(cfg.TrustedProxies, p)
		}
	}
	if cfg.Logger, err = logger(stderr); err != nil {
		return err
	}
	setGC()

	tp, err := tracing.FromEnv(ctx, cfg.Version)
	if err != nil {
		return err
	}
	if tp != nil {
		cfg.TracerProvider = tp
		cfg.Logger.Info("exporting traces over OTLP/HTTP", "endpoint", tracing.Endpoint())
		// After the gateway: its last spans end during its shutdown.
		defer flushTraces(tp, cfg.Logger)
	}

	st, err := openStore(ctx, cfg.DataPath)
	if err != nil {
		return err
	}
	g, err := gateway.New(cfg, st)
	if err != nil {
		st.Close()
		return err
	}
	if err := g.Start(); err != nil {
		g.Close()
		return err
	}
	// The first project and its keys are made only once the gateway
	// listens: a start that fails (the port is busy) leaves the store
	// empty, so the next start still prints the keys, which are shown once.
	first, err := gateway.Bootstrap(ctx, st)
	if err != nil {
		g.Close()
		return err
	}
	// The admin commands (tools, settings) find this gateway through the
	// store when neither --url nor SPACEFIX_URL says where it is.
	if err := st.SetMeta(ctx, store.MetaServeURL, "http://"+g.Addr()); err != nil {
		cfg.Logger.Warn("could not record the address in the store; the admin commands will need --url", "err", err)
	}
	setup, err := g.SetupURL(ctx)
	if err != nil {
		cfg.Logger.Warn("could not make the dashboard's setup link", "err", err)
	}
	printStart(stdout, g.URL(), dataName(cfg.DataPath), first, setup, cfg.PublicURL != "")

	// The first signal drains; a second one forces exit.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	select {
	case <-sigs:
	case <-ctx.Done():
	}
	cfg.Logger.Info("shutting down; press Ctrl-C again to stop at once")
	done := make(chan error, 1)
	go func() { done <- g.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("shutdown: %w", err)
		}
		cfg.Logger.Info("stopped")
		return nil
	case <-sigs:
		return errors.New("stopped at once on a second signal; calls in flight were cut off")
	}
}

// flushTraces sends the spans still queued and stops the exporter, within
// a fresh timeout: the serve context has ended by now.
func flushTraces(tp *sdktrace.TracerProvider, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("traces not all sent at shutdown", "err", err)
	}
}

func printStart(w io.Writer, base, data string, first *gateway.FirstStart, setupURL string, public bool) {
	mcpURL := base + "/mcp"
	fmt.Fprintf(w, "Spacefix is running.\n\n  MCP endpoint  %s\n  Dashboard     %s/\n  Store         %s\n\n", mcpURL, base, data)
	if setupURL != "" {
		fmt.Fprintf(w, "Set up the dashboard (one-time link; the first person to use it becomes admin):\n  %s\n\n", setupURL)
	}
	if first == nil {
		fmt.Fprintln(w, keysHint(data, os.Getenv("SPACEFIX_DATA") != ""))
		return
	}
	auth := "Bearer " + first.ClientKey
	fmt.Fprintf(w, `This was the first start: project %q and two keys were created.
Save the keys now. They are stored hashed and cannot be shown again.

  Agent key   %s
  Client key  %s

Run the example agent, in another terminal of this repository:
  SPACEFIX_API_KEY=%s SPACEFIX_URL=%s go run ./examples/orders

Connect Claude Code:
  %s

%s
Or look around with the MCP Inspector (Node.js 20 or later):
  %s
  %s
`, first.Project, first.AgentKey, first.ClientKey, first.AgentKey, base,
		quickstart.ClaudeAdd("spacefix", mcpURL, auth), remoteConnectors(base, public),
		quickstart.InspectorList(mcpURL, auth), quickstart.InspectorCall(mcpURL, auth))
}

// remoteConnectors says how Claude's and ChatGPT's remote connectors reach
// the gateway. They connect from their own servers, so without a public
// URL the address printed above (loopback, as a rule) is not one for them.
func remoteConnectors(base string, public bool) string {
	if public {
		return `Connect Claude or ChatGPT (remote connector) or any MCP client that signs in
with OAuth: give it the MCP endpoint above and sign in with your dashboard
account.
`
	}
	host := strings.TrimPrefix(base, "http://")
	return fmt.Sprintf(`Connect Claude or ChatGPT (remote connector): they connect from their own
servers, which cannot reach %s. Start the gateway with
--public-url https://HOST, an https URL that reaches it (a tunnel or a proxy),
give them https://HOST/mcp and sign in with your dashboard account. An MCP
client on this machine that signs in with OAuth can use the endpoint above.
`, host)
}

// Shared flag helpers.

func newFlagSet(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	// The flag package prints the whole usage around every mistake;
	// parseOnce says a mistake once, and prints the flags for --help.
	fs.Usage = func() {}
	return fs
}

func dataFlag(fs *flag.FlagSet) *string {
	return fs.String("data", envOr("SPACEFIX_DATA", "spacefix.db"), "the store: a SQLite `file`, or a postgres:// URL (env SPACEFIX_DATA)")
}

// parse parses flags, turning mistakes into usage errors. No positional
// arguments are allowed.
func parse(fs *flag.FlagSet, args []string) error {
	rest, err := parseArgs(fs, args)
	if err == nil && len(rest) > 0 {
		err = usageError{fmt.Sprintf("%s: unexpected argument %q", fs.Name(), rest[0])}
	}
	return err
}

// parseArgs parses flags wherever they stand among the arguments and returns
// the positional ones. -h yields flag.ErrHelp, which main treats as success.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseOnce(fs, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseOnce is fs.Parse with the flag package kept quiet: a mistake
// becomes one usage error, which main prints, and --help prints the flags
// in the --name form.
func parseOnce(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		printFlags(out, fs)
		return err
	case err != nil:
		return flagError(fs, err)
	}
	return nil
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// keysHint is what a later start prints about making keys: one line per
// kind, each of which runs as printed (a "client|agent" would be read as a
// pipe). data is the store as shown (a PostgreSQL URL with its password
// hidden), so a URL is named by the variable it came from, or the reader is
// told to set it.
func keysHint(data string, fromEnv bool) string {
	arg := shellQuote(data)
	if strings.Contains(data, "://") {
		arg = `"$SPACEFIX_DATA"`
	}
	text := "Make keys with:"
	for _, kind := range []string{store.KindClient, store.KindAgent} {
		text += fmt.Sprintf("\n  spacefix keys create --data %s --project default --kind %s", arg, kind)
	}
	if strings.Contains(data, "://") && !fromEnv {
		text += "\n  (first set SPACEFIX_DATA to the postgres:// URL you gave --data; this output hides its password)"
	}
	return text
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
