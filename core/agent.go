package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/spacefix/spacefix/core/internal/agentproto"
	"github.com/spacefix/spacefix/core/internal/bridgehook"
)

// SDKVersion is this SDK's version, sent to the gateway as "go/<version>"
// and shown in the dashboard.
const SDKVersion = "0.1.0"

// DefaultURL is the gateway an agent connects to when neither
// [Options.URL] nor SPACEFIX_URL says otherwise.
const DefaultURL = "http://127.0.0.1:8080"

// Options configure an [Agent]. The zero value is usable when the
// environment variable SPACEFIX_API_KEY holds an agent key.
type Options struct {
	// APIKey is the agent key the gateway knows this agent by. Empty means
	// the environment variable SPACEFIX_API_KEY; when both are empty, [New]
	// fails. Create a key with `spacefix keys create --kind agent`.
	APIKey string
	// URL is the gateway's base URL, http:// or https:// (ws:// and wss://
	// are accepted too). Empty means the environment variable SPACEFIX_URL,
	// else DefaultURL (http://127.0.0.1:8080).
	URL string
	// Name is the agent's name, 1 to 64 characters from A-Z a-z 0-9 _ -,
	// shown in the dashboard and, with Namespace, put in front of tool
	// names. Empty leaves the agent unnamed (the dashboard shows its key).
	Name string
	// DisplayName is the name people read, for example in the dashboard and
	// in the prefix of a community agent's descriptions. Empty leaves it to
	// the gateway, which shows Name.
	DisplayName string
	// Author says who wrote the agent, for the same places. Empty means
	// unknown.
	Author string
	// Namespace exposes the tools as <Name with - turned to _>_<tool>
	// ("test-radar" + "run_tests" → "test_radar_run_tests"); it needs Name.
	// False exposes them as registered.
	Namespace bool
	// Instance names this replica ("eu-1", at most 64 characters) so that a
	// caller may pick it. Empty means an unnamed replica.
	Instance string
	// Version is the agent's own version, shown in the dashboard. Empty
	// means none.
	Version string
	// Logger receives connection failures, reconnects and recovered panics.
	// Nil means slog.Default().
	Logger *slog.Logger
	// HTTPClient makes the registration request and the WebSocket handshake;
	// its Timeout, if set, bounds each of them. Nil means http.DefaultClient.
	HTTPClient *http.Client
	// OnConnect, if set, is called each time the gateway welcomes a
	// connection, after which calls may arrive; it must not block. Nil
	// means nothing is called.
	OnConnect func()
}

// An Agent offers tools, resources and prompts to a Spacefix gateway. Make
// one with [New], register everything with [AddTool], [Agent.Resource] and
// [Agent.Prompt], then call [Agent.Run]. Its methods are safe for concurrent
// use.
type Agent struct {
	opts   Options            // resolved: APIKey and URL set
	bridge *agentproto.Bridge // set by core/bridging; nil: an ordinary agent
	// request sends a bridged agent's custom MCP requests
	// (agentproto.KindRequest) to its server; nil: refused.
	request     func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	registerURL string
	connectURL  string
	log         *slog.Logger
	client      *http.Client

	// enableMu orders set_enabled messages: held from a change of state
	// until its message is written.
	enableMu sync.Mutex

	mu        sync.Mutex
	started   bool // Run was called: no more registration
	tools     []*tool
	resources []*resource
	prompts   []*prompt
	sess      *session // the welcomed connection, or nil

	calls sync.WaitGroup // running handlers, across connections

	// testFinished, when set by tests, is told when a call ends and whether
	// its answer was sent.
	testFinished func(id string, sent bool)
}

// New returns an agent configured by opts. It fails when no API key is set
// or an option is invalid; it does not contact the gateway ([Agent.Run]
// does).
func New(opts Options) (*Agent, error) {
	return newAgent(opts, bridgehook.Config{})
}

func init() {
	bridgehook.New = func(opts any, c bridgehook.Config) (any, error) { return newAgent(opts.(Options), c) }
}

// newAgent is [New] with what only a bridge sets (see core/bridging).
func newAgent(opts Options, x bridgehook.Config) (*Agent, error) {
	if opts.APIKey == "" {
		opts.APIKey = os.Getenv("SPACEFIX_API_KEY")
	}
	if opts.APIKey == "" {
		return nil, errors.New("core: no API key: set Options.APIKey or SPACEFIX_API_KEY to an agent key; create one with `spacefix keys create --kind agent`")
	}
	if opts.URL == "" {
		opts.URL = os.Getenv("SPACEFIX_URL")
	}
	if opts.URL == "" {
		opts.URL = DefaultURL
	}
	registerURL, connectURL, err := gatewayURLs(opts.URL)
	if err != nil {
		return nil, err
	}
	if opts.Name != "" && !agentproto.ValidName(opts.Name) {
		return nil, fmt.Errorf("core: invalid agent name %q: use 1 to 64 characters from A-Z a-z 0-9 _ -", opts.Name)
	}
	if x.Bridge != nil && (opts.Name == "" || strings.Contains(opts.Name, agentproto.BridgeSeparator) || opts.Namespace) {
		return nil, fmt.Errorf("core: a bridge needs Options.Name without %q and no Namespace: its names are <name>__<tool>", agentproto.BridgeSeparator)
	}
	if opts.Namespace && opts.Name == "" {
		return nil, errors.New("core: Options.Namespace needs Options.Name: tools are exposed as <name>_<tool>")
	}
	if len(opts.Instance) > agentproto.MaxNameLen {
		return nil, fmt.Errorf("core: instance name %q is longer than %d characters", opts.Instance, agentproto.MaxNameLen)
	}
	a := &Agent{
		opts:        opts,
		bridge:      x.Bridge,
		request:     x.Request,
		registerURL: registerURL,
		connectURL:  connectURL,
		log:         opts.Logger,
		client:      opts.HTTPClient,
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.client == nil {
		a.client = http.DefaultClient
	}
	return a, nil
}

// gatewayURLs returns the registration URL (http or https) and the
// WebSocket URL (ws or wss) of the gateway at base.
func gatewayURLs(base string) (register, connect string, err error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", "", fmt.Errorf("core: gateway URL %q: %v", base, err)
	}
	var httpScheme, wsScheme string
	switch strings.ToLower(u.Scheme) {
	case "http", "ws":
		httpScheme, wsScheme = "http", "ws"
	case "https", "wss":
		httpScheme, wsScheme = "https", "wss"
	default:
		return "", "", fmt.Errorf("core: gateway URL %q: use http:// or https://", base)
	}
	if u.Host == "" {
		return "", "", fmt.Errorf("core: gateway URL %q has no host", base)
	}
	u.RawQuery, u.Fragment = "", ""
	u.Scheme = httpScheme
	register = u.JoinPath(agentproto.RegisterPath).String()
	u.Scheme = wsScheme
	connect = u.JoinPath(agentproto.ConnectPath).String()
	return register, connect, nil
}

// SetEnabled switches the tool registered as name on or off in this
// replica: the gateway lists a tool while at least one replica of the key
// has it on, and sends its calls only to those. Other replicas of the same
// key keep their own setting.
// Before Run it decides how the tool is registered; while connected it
// tells the gateway at once, even when the setting did not change, so the
// gateway hears this replica's state whatever it knew before. The setting
// is remembered across reconnects: a reconnecting replica registers with
// it. An unknown name is an error.
func (a *Agent) SetEnabled(name string, on bool) error {
	a.enableMu.Lock()
	defer a.enableMu.Unlock()
	a.mu.Lock()
	t := a.toolNamed(name)
	if t == nil {
		a.mu.Unlock()
		return fmt.Errorf("core: set enabled %q: no tool of that name is registered", name)
	}
	t.disabled = !on
	s := a.sess
	a.mu.Unlock()
	if s != nil {
		s.sendSetEnabled(name, on)
	}
	return nil
}

// SetPromptEnabled switches one of the agent's prompts off or back on at
// run time, as [Agent.SetEnabled] does for tools: the prompt is listed while
// at least one live replica has it on, and clients get
// notifications/prompts/list_changed when the listing changes.
func (a *Agent) SetPromptEnabled(name string, on bool) error {
	a.mu.Lock()
	var p *prompt
	for _, x := range a.prompts {
		if x.def.Name == name {
			p = x
		}
	}
	if p == nil {
		a.mu.Unlock()
		return fmt.Errorf("core: set prompt enabled %q: no prompt of that name is registered", name)
	}
	p.def.Disabled = !on
	s := a.sess
	a.mu.Unlock()
	if s != nil {
		s.send(agentproto.Message{Type: agentproto.TypeSetEnabled, Kind: agentproto.KindPrompt, Name: name, Enabled: &on})
	}
	return nil
}

// SetResourceEnabled switches one of the agent's resources (or resource
// templates, by their template) off or back on at run time, as
// [Agent.SetEnabled] does for tools; clients get
// notifications/resources/list_changed when the listing changes.
func (a *Agent) SetResourceEnabled(uri string, on bool) error {
	a.mu.Lock()
	var r *resource
	for _, x := range a.resources {
		if x.def.URI == uri {
			r = x
		}
	}
	if r == nil {
		a.mu.Unlock()
		return fmt.Errorf("core: set resource enabled %q: no resource or template with that URI is registered", uri)
	}
	r.def.Disabled = !on
	s := a.sess
	a.mu.Unlock()
	if s != nil {
		s.send(agentproto.Message{Type: agentproto.TypeSetEnabled, Kind: agentproto.KindResource, Name: uri, Enabled: &on})
	}
	return nil
}

// toolNamed returns the tool registered as name, or nil. a.mu is held.
func (a *Agent) toolNamed(name string) *tool {
	for _, t := range a.tools {
		if t.def.Name == name {
			return t
		}
	}
	return nil
}

// checkName returns why this agent may not register a tool or prompt
// called name, or nil.
func (a *Agent) checkName(kind, name string) error {
	if a.bridge != nil && !a.bridge.Unprefixed {
		return agentproto.CheckBridgedName(kind, a.opts.Name, name)
	}
	return agentproto.CheckToolName(kind, name)
}

// checkOpen returns an error when registration is over because Run started.
// a.mu is held.
func (a *Agent) checkOpen(what string) error {
	if a.started {
		return fmt.Errorf("core: %s: the agent is already running; register everything before Run", what)
	}
	return nil
}

// registration snapshots what the agent offers, and which tools are
// disabled in that snapshot.
func (a *Agent) registration() (agentproto.Registration, map[string]bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	reg := agentproto.Registration{
		Protocol:    agentproto.Version,
		SDK:         "go/" + SDKVersion,
		Name:        a.opts.Name,
		Namespace:   a.opts.Namespace,
		Instance:    a.opts.Instance,
		Version:     a.opts.Version,
		DisplayName: a.opts.DisplayName,
		Author:      a.opts.Author,
		Tools:       make([]agentproto.Tool, 0, len(a.tools)),
	}
	if a.bridge != nil {
		b := *a.bridge
		reg.Bridge = &b
	}
	disabled := make(map[string]bool, len(a.tools))
	for _, t := range a.tools {
		def := t.def
		def.Disabled = t.disabled
		reg.Tools = append(reg.Tools, def)
		disabled[def.Name] = t.disabled
	}
	for _, r := range a.resources {
		reg.Resources = append(reg.Resources, r.def)
	}
	for _, p := range a.prompts {
		reg.Prompts = append(reg.Prompts, p.def)
	}
	return reg, disabled
}

// attach makes s the connection SetEnabled talks to, and tells the gateway
// of every change made since the registration snapshot was taken.
func (a *Agent) attach(s *session, registered map[string]bool) {
	a.enableMu.Lock()
	defer a.enableMu.Unlock()
	a.mu.Lock()
	a.sess = s
	type change struct {
		name string
		on   bool
	}
	var changes []change
	for _, t := range a.tools {
		if t.disabled != registered[t.def.Name] {
			changes = append(changes, change{t.def.Name, !t.disabled})
		}
	}
	a.mu.Unlock()
	for _, c := range changes {
		s.sendSetEnabled(c.name, c.on)
	}
}

// detach forgets s as the current connection.
func (a *Agent) detach(s *session) {
	a.enableMu.Lock()
	defer a.enableMu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sess == s {
		a.sess = nil
	}
}

// lookup returns the handler for a call of kind and name, or nil.
func (a *Agent) lookup(kind, name string) *handler {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch kind {
	case agentproto.KindTool:
		if t := a.toolNamed(name); t != nil {
			return t.h
		}
	case agentproto.KindResource:
		for _, r := range a.resources {
			if r.def.URI == name {
				return r.h
			}
		}
	case agentproto.KindPrompt:
		for _, p := range a.prompts {
			if p.def.Name == name {
				return p.h
			}
		}
	case agentproto.KindRequest:
		if send := a.request; send != nil {
			return &handler{run: func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
				return send(ctx, name, params)
			}}
		}
	case agentproto.KindComplete:
		for _, p := range a.prompts {
			if p.def.Name == name {
				return p.complete
			}
		}
		for _, r := range a.resources {
			if r.def.URI == name && r.complete != nil {
				return r.complete
			}
		}
	}
	return nil
}
