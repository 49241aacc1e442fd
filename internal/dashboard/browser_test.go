package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/testenv"
)

// The browser tests drive Debian's chromium through the dashboard of a real
// gateway with real core agents. Set SPACEFIX_SCREENSHOTS=1 to also write
// the screenshots in docs/screenshots.

// chromium finds a Chromium binary, or skips the test (fails it when
// SPACEFIX_REQUIRE_ALL=1).
func chromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("browser tests are slow; skipped with -short")
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Unavailable(t, "no chromium binary on PATH; install it with: apt-get install -y chromium")
	return ""
}

// browser starts a headless Chromium with a fresh profile and returns a
// chromedp context for one tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1360, 900),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // start the browser now
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// gw is a running gateway with the dashboard, a project and keys.
type gw struct {
	t         *testing.T
	g         *gateway.Gateway
	st        store.Store
	project   store.Project
	agentKey  string
	clientKey string
	token     string // an admin API token, made on first use
}

func startGateway(t *testing.T) *gw { t.Helper(); return startGatewayWith(t, nil) }

// startGatewayWith is startGateway with the last word on the config.
func startGatewayWith(t *testing.T, config func(*gateway.Config)) *gw {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "spacefix.db"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := gateway.Bootstrap(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateway.DefaultConfig()
	cfg.Addr, cfg.Grace, cfg.ShutdownGrace, cfg.Version = "127.0.0.1:0", 200*time.Millisecond, 2*time.Second, "test"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if config != nil {
		config(&cfg)
	}
	g, err := gateway.New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	p, err := st.Project(ctx, first.Project)
	if err != nil {
		t.Fatal(err)
	}
	return &gw{t: t, g: g, st: st, project: p, agentKey: first.AgentKey, clientKey: first.ClientKey}
}

// agent runs a core agent until the test ends or stop is called, and
// waits until its replica is connected.
func (w *gw) agent(instance string, setup func(a *core.Agent) error) (stop func()) {
	w.t.Helper()
	a, err := core.New(core.Options{APIKey: w.agentKey, URL: w.g.URL(), Name: "orders", Instance: instance, Version: "1.4.2",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		w.t.Fatal(err)
	}
	if err := setup(a); err != nil {
		w.t.Fatal(err)
	}
	before := len(w.g.Registry().Replicas(w.project.ID))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	stop = func() { cancel(); <-done }
	w.t.Cleanup(stop)
	w.waitFor("agent to connect", func() bool { return len(w.g.Registry().Replicas(w.project.ID)) > before })
	return stop
}

func (w *gw) waitFor(what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type orderIn struct {
	ID string `json:"id" desc:"The order id, for example \"1042\""`
}

type searchIn struct {
	Customer string `json:"customer" desc:"Customer handle, for example \"ada\""`
	Limit    int    `json:"limit,omitempty" min:"1" max:"50"`
}

type createIn struct {
	RequestID string `json:"requestId"`
	Customer  string `json:"customer"`
	Total     int    `json:"total"`
}

// orderTools registers the seed guide's tools; getOrderDesc lets a test
// change one definition.
func orderTools(getOrderDesc string) func(a *core.Agent) error {
	return func(a *core.Agent) error {
		err := core.AddTool(a, "get_order", getOrderDesc,
			func(ctx context.Context, in orderIn) (map[string]any, error) {
				if in.ID != "1042" {
					return nil, fmt.Errorf("no order with id %s: ask the user to confirm the id", in.ID)
				}
				return map[string]any{"id": "1042", "customer": "ada", "status": "open"}, nil
			}, core.ReadOnly())
		if err != nil {
			return err
		}
		err = core.AddTool(a, "search_orders", "List orders for a customer, newest first. Returns an empty list when nothing matches.",
			func(ctx context.Context, in searchIn) ([]string, error) { return []string{"1042"}, nil }, core.ReadOnly())
		if err != nil {
			return err
		}
		return core.AddTool(a, "create_order", "Create an order. Always pass the same requestId when retrying.",
			func(ctx context.Context, in createIn) (string, error) { return "created", nil })
	}
}

const getOrderV1 = "Look up one order by its id. Returns the order, or an error if no order has that id."

// bearer adds an Authorization header to every request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpClient opens an MCP session with the gateway's client key.
func (w *gw) mcpClient() *mcp.ClientSession {
	w.t.Helper()
	return w.mcpClientWith(w.clientKey)
}

// mcpClientWith opens an MCP session with a client key.
func (w *gw) mcpClientWith(key string) *mcp.ClientSession {
	w.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "browser-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: w.g.URL() + "/mcp", HTTPClient: &http.Client{Transport: bearer{key}},
	}, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { cs.Close() })
	return cs
}

// signUp opens the setup link and creates the first admin.
func (w *gw) signUp(ctx context.Context) {
	w.t.Helper()
	setup, err := w.g.SetupURL(context.Background())
	if err != nil || setup == "" {
		w.t.Fatalf("SetupURL = %q, %v", setup, err)
	}
	run(w.t, ctx,
		chromedp.Navigate(setup),
		chromedp.SetValue(chromedp.CSS(`input[name=email]`), "ada@example.com"),
		chromedp.SetValue(chromedp.CSS(`input[name=password]`), "correct horse battery"),
		chromedp.SetValue(chromedp.CSS(`input[name=confirm]`), "correct horse battery"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.cards .card.project`)),
	)
}

func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// liveTailOpen is true once the Logs page's live tail (app.js's source)
// has its stream open: the gateway has then taken the newest call it
// tails after, so a call made from now on shows as a new row.
const liveTailOpen = `source !== null && source.readyState === EventSource.OPEN`

// until evaluates a JS expression in the page until it is true. Errors
// count as false: the page may be reloading.
func until(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var lastErr error
	for time.Now().Before(deadline) {
		evalCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok, err := chromedp.Run(evalCtx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("browser: timed out waiting for %s (last error: %v)", what, lastErr)
}

// screenshot writes the whole page to docs/screenshots/name.png when
// SPACEFIX_SCREENSHOTS=1.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	shoot(t, ctx, name, chromedp.FullScreenshot(100))
}

// screenshotView is screenshot of the visible part only, for long pages.
func screenshotView(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	shoot(t, ctx, name, chromedp.CaptureScreenshot())
}

func shoot(t *testing.T, ctx context.Context, name string, capture chromedp.Action[[]byte]) {
	t.Helper()
	if os.Getenv("SPACEFIX_SCREENSHOTS") != "1" {
		return
	}
	png, err := chromedp.Run(ctx, capture)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "..", "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// rowHasPill is a JS expression: the row of a tool shows a pill.
func rowHasPill(tool, pill string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('tr[data-tool=%q] .pill')].some(p => p.textContent === %q)`, tool, pill)
}

func (w *gw) url(path string) string { return w.g.URL() + path }

func newClientKey(t *testing.T, st store.Store, p store.Project, k store.Key) string {
	t.Helper()
	k.ProjectID, k.Kind = p.ID, store.KindClient
	_, secret, err := auth.CreateKey(context.Background(), st, k)
	if err != nil {
		t.Fatal(err)
	}
	return secret
}
