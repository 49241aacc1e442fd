package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/core/bridging"
	"github.com/spacefix/spacefix/internal/agentproto"
)

// Server says what one bridge runs. Exactly one of Command and URL is set.
type Server struct {
	// Name is the agent's name and the prefix of the exposed names
	// (<Name>__<tool>): 1 to 64 characters from A-Z a-z 0-9 _ -, without
	// "__".
	Name string
	// Command and Args start a stdio server as a child process.
	Command string
	Args    []string
	// Written is the command line as a config file wrote it, ${VAR}
	// references unexpanded: what [Server.Target] shows. ParseConfig sets
	// it; empty means Command and Args.
	Written []string
	// Env is the child's environment beyond the small default set (see
	// childEnv): a child gets nothing else of the bridge's environment.
	// Values are secrets: never logged.
	Env map[string]string
	// URL is a remote server's Streamable HTTP endpoint; when it does not
	// speak Streamable HTTP the bridge tries the legacy SSE transport.
	URL string
	// Headers go with every request to URL. Values are secrets: never
	// logged.
	Headers map[string]string
	// APIKey is the agent key for this server's connection; empty means
	// the bridge's default (--key or SPACEFIX_API_KEY).
	APIKey string
	// Unprefixed exposes the server's tools and prompts under their own
	// names instead of <Name>__<tool> (names the gateway's ordinary rules
	// refuse, such as ones containing "__", are then left out). For a
	// project that replaces the server and keeps its clients' names.
	Unprefixed bool
	// Timeout is how long the gateway waits for each of the server's tools,
	// up to 120 s. Zero means the project's call wait (30 s by default).
	Timeout time.Duration
	// Protocol is the MCP version the bridge offers the server:
	// "2026-07-28" (the server's input requests reach the client under
	// their own ids; a server that does not speak it gets 2025-11-25) or
	// "2025-11-25" (the server asks with requests on the session, which
	// the bridge relays). Empty means 2026-07-28 for a remote server and
	// 2025-11-25 for a stdio child: a child is one connection, so one
	// protocol for all its tools, and a server that speaks both may have
	// tools that still ask with requests, which 2026-07-28 forbids.
	Protocol string

	// PerPerson makes a remote act as each caller's own account at the
	// server ("connect" mode): the gateway runs each person's sign-in at
	// the remote and sends the person's token with each of their calls;
	// the bridge keeps one session with the server per person. Listing the
	// server's tools uses the bridge's own `bridge login` sign-in.
	PerPerson bool
	// Fallback is "shared" when calls that come with an agent key rather
	// than a person use the bridge's own sign-in; "" refuses them. Only
	// with PerPerson or TokenExchange.
	Fallback string
	// TokenExchange, when set, makes a remote act as each caller's own
	// account by exchanging the call's identity token for a token of the
	// server's (RFC 8693): "exchange" mode, per person like PerPerson.
	TokenExchange *TokenExchange
}

// TokenExchange says where and as which client the bridge exchanges a
// caller's identity token (the gateway-signed JWT) for an access token of
// the remote server (RFC 8693).
type TokenExchange struct {
	// TokenEndpoint is the authorization server's token URL: https, or
	// http on a loopback host.
	TokenEndpoint string
	// ClientID and the secret authenticate the bridge there
	// (client_secret_basic).
	ClientID string
	// ClientSecretEnv names the environment variable that holds the client
	// secret; ParseConfig reads it into ClientSecret.
	ClientSecretEnv string
	// ClientSecret is the secret itself: never logged.
	ClientSecret string
	// Audience and Scope, optional, go into each exchange request.
	Audience string
	Scope    string
}

// Per-person modes of a server (see [Server.Mode]).
const (
	ModeShared   = ""
	ModeConnect  = agentproto.PerPersonConnect
	ModeExchange = agentproto.PerPersonExchange
)

// Mode is how s's remote is used: [ModeShared] (one account for every
// caller), [ModeConnect] or [ModeExchange].
func (s Server) Mode() string {
	switch {
	case s.TokenExchange != nil:
		return ModeExchange
	case s.PerPerson:
		return ModeConnect
	}
	return ModeShared
}

// registered is what the registration says of s's per-person mode (the
// gateway's part: who may call, and where connect mode's people connect);
// nil for a shared server.
func (s Server) registered() *bridging.PerPerson {
	mode := s.Mode()
	if mode == ModeShared {
		return nil
	}
	pp := &bridging.PerPerson{Mode: mode, Fallback: s.Fallback}
	if mode == ModeConnect {
		pp.URL = s.URL
	}
	return pp
}

// MCP versions the bridge offers a server (see [Server.Protocol]).
const (
	modernVersion = "2026-07-28"
	legacyVersion = "2025-11-25"
)

// offered is the version the bridge offers s.
func (s Server) offered() string {
	switch {
	case s.Protocol != "":
		return s.Protocol
	case s.Command != "":
		return legacyVersion
	}
	return modernVersion
}

// Validate names the field at fault, for the person who wrote it.
func (s Server) Validate() error {
	switch {
	case s.Name == "" || !agentproto.ValidName(s.Name) || strings.Contains(s.Name, agentproto.BridgeSeparator):
		return fmt.Errorf("server name %q: use 1 to %d characters from A-Z a-z 0-9 _ - without %q", s.Name, agentproto.MaxNameLen, agentproto.BridgeSeparator)
	case s.Command == "" && s.URL == "":
		return fmt.Errorf("server %q: give a command (stdio) or a url (remote)", s.Name)
	case s.Command != "" && s.URL != "":
		return fmt.Errorf("server %q: give a command or a url, not both", s.Name)
	case s.Protocol != "" && s.Protocol != modernVersion && s.Protocol != legacyVersion:
		return fmt.Errorf("server %q: protocol %q: use %q or %q", s.Name, s.Protocol, modernVersion, legacyVersion)
	case s.Timeout < 0 || s.Timeout > core.MaxTimeout:
		return fmt.Errorf("server %q: timeout %v: use at most %v", s.Name, s.Timeout, core.MaxTimeout)
	case s.URL != "":
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("server %q: url %q: use an http:// or https:// URL", s.Name, redactURL(s.URL))
		}
	}
	return s.validatePerPerson()
}

// validatePerPerson checks PerPerson, Fallback and TokenExchange.
func (s Server) validatePerPerson() error {
	mode := s.Mode()
	switch {
	case s.Fallback != "" && s.Fallback != agentproto.FallbackShared:
		return fmt.Errorf("server %q: fallback %q: use \"shared\" (calls without a person use the bridge's own sign-in) or leave it out", s.Name, s.Fallback)
	case mode == ModeShared && s.Fallback != "":
		return fmt.Errorf("server %q: \"fallback\" goes with \"perPerson\": true or \"tokenExchange\"; remove it, or make the server per person", s.Name)
	case mode == ModeShared:
		return nil
	case s.URL == "":
		return fmt.Errorf("server %q: per person (\"perPerson\" or \"tokenExchange\") needs a remote \"url\"; a command runs with one account for everyone", s.Name)
	}
	if u, _ := url.Parse(s.URL); u.User != nil {
		return fmt.Errorf("server %q: url %q: a per-person URL carries no user or password (each person's own token is sent); remove the part before \"@\"", s.Name, redactURL(s.URL))
	}
	te := s.TokenExchange
	if te == nil {
		return nil
	}
	if te.TokenEndpoint == "" {
		return fmt.Errorf("server %q: tokenExchange needs \"tokenEndpoint\": the authorization server's token URL", s.Name)
	}
	if u, err := url.Parse(te.TokenEndpoint); err != nil || u.Host == "" || u.User != nil || !(u.Scheme == "https" || u.Scheme == "http" && loopbackHost(u.Hostname())) {
		return fmt.Errorf("server %q: tokenExchange.tokenEndpoint %q: use an https:// URL (http:// only on 127.0.0.1, ::1 or localhost)", s.Name, redactURL(te.TokenEndpoint))
	}
	switch {
	case te.ClientID == "":
		return fmt.Errorf("server %q: tokenExchange needs \"clientId\": the bridge's client id at the authorization server", s.Name)
	case te.ClientSecretEnv == "" && te.ClientSecret == "":
		return fmt.Errorf("server %q: tokenExchange needs \"clientSecretEnv\": the name of the environment variable that holds the client secret", s.Name)
	case te.ClientSecret == "":
		return fmt.Errorf("server %q: tokenExchange.clientSecretEnv: the environment variable %s is not set; set it to the client secret before starting the bridge", s.Name, te.ClientSecretEnv)
	}
	return nil
}

// loopbackHost reports whether host is 127.0.0.1 (any of 127/8), ::1 or
// localhost.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Transport is how the bridge reaches s: "stdio" or "streamable-http" (the
// SSE fallback is decided when connecting).
func (s Server) Transport() string {
	if s.Command != "" {
		return "stdio"
	}
	return "streamable-http"
}

// Target is what people may read about s: it goes into the registration,
// across the bus, onto every viewer's Agents page and into the log. For a
// command, the command line as written (${VAR} unexpanded, a password in
// a URL argument masked); for a remote, scheme://host/… (see
// [redactURL]). Env and header values never appear.
func (s Server) Target() string {
	if s.Command == "" {
		return redactURL(s.URL)
	}
	words := s.Written
	if len(words) == 0 {
		words = append([]string{s.Command}, s.Args...)
	}
	shown := make([]string, len(words))
	for i, w := range words {
		shown[i] = maskPassword(w)
	}
	return strings.Join(shown, " ")
}

// shownCommand is the command as Target shows it.
func (s Server) shownCommand() string {
	if len(s.Written) > 0 {
		return maskPassword(s.Written[0])
	}
	return maskPassword(s.Command)
}

// maskPassword masks the password of an argument that is a URL with one
// (postgresql://app:pw@db/app), as a shell may have expanded it before
// the bridge saw it; any other argument is returned as it is.
func maskPassword(arg string) string {
	if !strings.Contains(arg, "://") {
		return arg
	}
	u, err := url.Parse(arg)
	if err != nil || u.User == nil {
		return arg
	}
	if _, ok := u.User.Password(); !ok {
		return arg
	}
	return u.Redacted()
}

// configFile is the mcpServers format MCP clients use.
type configFile struct {
	MCPServers map[string]struct {
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		APIKey  string            `json:"apiKey"`  // a Spacefix extension: this server's agent key
		Prefix  *bool             `json:"prefix"`  // a Spacefix extension: false exposes names as they are
		Timeout float64           `json:"timeout"` // a Spacefix extension: seconds the gateway waits for a tool
		// Protocol, a Spacefix extension, is the MCP version offered to
		// the server (Server.Protocol).
		Protocol string `json:"protocol"`
		// PerPerson, Fallback and TokenExchange, Spacefix extensions, make
		// a remote act as each caller's own account (Server.PerPerson).
		PerPerson     bool   `json:"perPerson"`
		Fallback      string `json:"fallback"`
		TokenExchange *struct {
			TokenEndpoint   string `json:"tokenEndpoint"`
			ClientID        string `json:"clientId"`
			ClientSecretEnv string `json:"clientSecretEnv"`
			Audience        string `json:"audience"`
			Scope           string `json:"scope"`
		} `json:"tokenExchange"`
	} `json:"mcpServers"`
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// ParseConfig reads an mcpServers file: {"mcpServers": {"name": {"command",
// "args", "env"} | {"url", "headers"}}}. ${VAR} in any string is replaced
// by lookup(VAR) (the bridge's environment); a variable that is not set is
// an error naming it, never its neighbours' values. Servers come back
// sorted by name.
func ParseConfig(data []byte, lookup func(string) (string, bool)) ([]Server, error) {
	var f configFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(f.MCPServers) == 0 {
		return nil, errors.New(`config: no servers: write {"mcpServers": {"name": {"command": …} | {"url": …}}}`)
	}
	var missing []string
	expand := func(s string) string {
		return varRef.ReplaceAllStringFunc(s, func(m string) string {
			name := m[2 : len(m)-1]
			v, ok := lookup(name)
			if !ok {
				missing = append(missing, name)
			}
			return v
		})
	}
	var out []Server
	for name, c := range f.MCPServers {
		s := Server{Name: name, Command: expand(c.Command), URL: expand(c.URL), APIKey: expand(c.APIKey),
			Unprefixed: c.Prefix != nil && !*c.Prefix, Timeout: time.Duration(c.Timeout * float64(time.Second)), Protocol: c.Protocol}
		for _, a := range c.Args {
			s.Args = append(s.Args, expand(a))
		}
		if s.Command != "" {
			s.Written = append([]string{c.Command}, c.Args...)
		}
		if len(c.Env) > 0 {
			s.Env = map[string]string{}
			for k, v := range c.Env {
				s.Env[k] = expand(v)
			}
		}
		if len(c.Headers) > 0 {
			s.Headers = map[string]string{}
			for k, v := range c.Headers {
				s.Headers[k] = expand(v)
			}
		}
		s.PerPerson, s.Fallback = c.PerPerson, c.Fallback
		if te := c.TokenExchange; te != nil {
			s.TokenExchange = &TokenExchange{TokenEndpoint: expand(te.TokenEndpoint), ClientID: expand(te.ClientID),
				ClientSecretEnv: te.ClientSecretEnv, Audience: expand(te.Audience), Scope: expand(te.Scope)}
			if te.ClientSecretEnv != "" {
				s.TokenExchange.ClientSecret, _ = lookup(te.ClientSecretEnv)
			}
		}
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		out = append(out, s)
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("config: environment variables not set: %s", strings.Join(slices.Compact(missing), ", "))
	}
	slices.SortFunc(out, func(a, b Server) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// LoadConfig reads the mcpServers file at path with the process's
// environment.
func LoadConfig(path string) ([]Server, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(data, os.LookupEnv)
}
