// Package e2e drives the real thing: a gateway on a loopback port with a
// SQLite store, agents built with the core SDK, and the official go-sdk MCP
// client at every protocol version the gateway serves.
package e2e

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/postgres"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/testenv"
)

// versions are the MCP protocol versions every client-facing behaviour is
// tested at.
var versions = []string{"2025-06-18", "2025-11-25", "2026-07-28"}

// env is one running gateway with a project and keys.
type env struct {
	t         *testing.T
	gw        *gateway.Gateway
	store     store.Store
	url       string
	dataPath  string // the SQLite file; empty on PostgreSQL
	data      string // what --data would say: dataPath or the PostgreSQL URL
	cfg       gateway.Config
	project   store.Project
	agentKey  string
	clientKey string
}

type envOptions struct {
	grace         time.Duration
	heartbeat     time.Duration
	shutdownGrace time.Duration
	settings      *store.ProjectSettings
	config        func(*gateway.Config)         // last word on the config
	wrapStore     func(store.Store) store.Store // what the gateway gets instead of the store
	traces        trace.TracerProvider
	logs          io.Writer // if set, the gateway's text log goes here too
	pgURL         string    // "want": the store is a PostgreSQL schema
	pgURLOut      *string   // where its URL goes
}

// onPostgres runs the gateway on a new PostgreSQL schema, whatever
// SPACEFIX_E2E_STORE says, and reports the schema's URL to *url.
func onPostgres(url *string) func(*envOptions) {
	return func(o *envOptions) {
		o.pgURL = "want"
		o.pgURLOut = url
	}
}

// storeVar set to "postgres" runs every end-to-end test on a PostgreSQL
// store (a new schema of SPACEFIX_TEST_DATABASE_URL each) instead of a
// SQLite file.
const storeVar = "SPACEFIX_E2E_STORE"

func newEnv(t *testing.T, opts ...func(*envOptions)) *env {
	t.Helper()
	var o envOptions
	for _, f := range opts {
		f(&o)
	}
	ctx := context.Background()
	var (
		st       store.Store
		dataPath string
		err      error
	)
	var data string
	if o.pgURL != "" || os.Getenv(storeVar) == "postgres" {
		data = testenv.Postgres(t)
		if o.pgURLOut != nil {
			*o.pgURLOut = data
		}
		st, err = postgres.Open(ctx, data)
	} else {
		dataPath = filepath.Join(t.TempDir(), "spacefix.db")
		data = dataPath
		st, err = sqlite.Open(ctx, dataPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	if o.wrapStore != nil {
		st = o.wrapStore(st)
	}
	first, err := gateway.Bootstrap(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.Project(ctx, first.Project)
	if err != nil {
		t.Fatal(err)
	}
	if o.settings != nil {
		if err := st.UpdateProjectSettings(ctx, p.ID, *o.settings); err != nil {
			t.Fatal(err)
		}
		p.Settings = *o.settings
	}
	cfg := gateway.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.DataPath = data
	if dataPath == "" {
		// Every gateway of a PostgreSQL store needs the one key file; its
		// siblings (cluster_test.go) start with this cfg.
		cfg.SecretKeyFile = newSecretKeyFile(t)
	}
	cfg.Logger = testLogger(t)
	if o.logs != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(o.logs, logOutput()), nil))
	}
	cfg.Grace = o.grace
	if cfg.Grace == 0 {
		cfg.Grace = 200 * time.Millisecond // most tests want a gone tool to go quickly
	}
	cfg.ShutdownGrace = 5 * time.Second
	if o.shutdownGrace > 0 {
		cfg.ShutdownGrace = o.shutdownGrace
	}
	if o.heartbeat > 0 {
		cfg.Heartbeat = o.heartbeat
	}
	if o.config != nil {
		o.config(&cfg)
	}
	cfg.TracerProvider = o.traces
	g, err := gateway.New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("close gateway: %v", err)
		}
	})
	return &env{t: t, gw: g, store: st, url: g.URL(), dataPath: dataPath, data: data, cfg: cfg, project: p, agentKey: first.AgentKey, clientKey: first.ClientKey}
}

// newSecretKeyFile writes a key file for the gateways of one store, as an
// operator does for PostgreSQL (on SQLite the gateway makes its own beside
// the database file).
func newSecretKeyFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(path, []byte(secrets.NewKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func logOutput() io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return io.Discard
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newKey makes another key in the env's project.
func (e *env) newKey(k store.Key) (store.Key, string) {
	e.t.Helper()
	k.ProjectID = e.project.ID
	stored, secret, err := auth.CreateKey(context.Background(), e.store, k)
	if err != nil {
		e.t.Fatal(err)
	}
	return stored, secret
}

// agent runs a core agent built by setup until the test ends or stop is
// called, and waits until the gateway lists its first tool.
type runningAgent struct {
	agent *core.Agent
	stop  func()
}

func (e *env) startAgent(opts core.Options, setup func(a *core.Agent)) *runningAgent {
	e.t.Helper()
	if opts.APIKey == "" {
		opts.APIKey = e.agentKey
	}
	opts.URL = e.url
	if opts.Logger == nil {
		opts.Logger = testLogger(e.t)
	}
	a, err := core.New(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	setup(a)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	before := len(e.gw.Registry().All())
	go func() { done <- a.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				e.t.Errorf("agent Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			e.t.Errorf("agent Run did not return within 10s of its context ending")
		}
	}
	e.t.Cleanup(stop)
	waitFor(e.t, "agent to connect", func() bool { return len(e.gw.Registry().All()) > before })
	return &runningAgent{agent: a, stop: stop}
}

// bearer adds an Authorization header to every request.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// connect opens an MCP client session at protocol version v with key.
func (e *env) connect(v, key string, opts *mcp.ClientOptions) *mcp.ClientSession {
	e.t.Helper()
	cs, err := e.tryConnect(v, key, opts)
	if err != nil {
		e.t.Fatalf("connect at %s: %v", v, err)
	}
	e.t.Cleanup(func() { cs.Close() })
	return cs
}

func (e *env) tryConnect(v, key string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, opts)
	tr := &mcp.StreamableClientTransport{
		Endpoint:   e.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key: key, base: http.DefaultTransport}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: v})
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// call calls a tool and returns its result; a protocol error fails the test.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// text joins the text parts of a result.
func text(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// calls returns the call log after flushing it.
func (e *env) calls() []store.Call {
	e.t.Helper()
	ctx := context.Background()
	if err := e.gw.CallLog().Flush(ctx); err != nil {
		e.t.Fatal(err)
	}
	cs, err := e.store.Calls(ctx, store.CallFilter{ProjectID: e.project.ID, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return cs
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func forEachVersion(t *testing.T, f func(t *testing.T, v string)) {
	for _, v := range versions {
		t.Run(v, func(t *testing.T) { f(t, v) })
	}
}

// syncBuffer is a bytes.Buffer safe for the gateway's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
