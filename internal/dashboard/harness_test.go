package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/dashboard"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/users"
)

// env is a dashboard over a real SQLite store and a real registry, served
// by httptest, with replicas added to the registry directly.
type env struct {
	t        *testing.T
	st       store.Store
	reg      *agents.Registry
	srv      *httptest.Server
	notified *notifier
	project  store.Project
	agentKey store.Key
}

// notifier records the saved-state changes published on the change path.
type notifier struct {
	mu    sync.Mutex
	ids   []int64
	kinds []changes.Change
}

func (n *notifier) hear(c changes.Change) {
	n.mu.Lock()
	n.ids = append(n.ids, c.Project)
	n.kinds = append(n.kinds, c)
	n.mu.Unlock()
}

// take returns and forgets the calls so far.
func (n *notifier) take() []int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	ids := n.ids
	n.ids, n.kinds = nil, nil
	return ids
}

func newEnv(t *testing.T) *env { t.Helper(); return newEnvWith(t, nil) }

// newEnvWith is newEnv with the last word on the dashboard's options.
func newEnvWith(t *testing.T, config func(*dashboard.Options)) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "spacefix.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := st.CreateProject(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := auth.CreateKey(ctx, st, store.Key{ProjectID: p.ID, Kind: store.KindAgent, Name: "orders service"})
	if err != nil {
		t.Fatal(err)
	}
	bus := changes.New(nil)
	e := &env{t: t, st: st, reg: agents.New(nil), notified: &notifier{}, project: p, agentKey: k}
	bus.Subscribe(e.notified.hear)
	stop, cancel := context.WithCancel(context.Background())
	opts := dashboard.Options{
		Store: st, Registry: e.reg, Changes: bus, Context: stop,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test",
	}
	if config != nil {
		config(&opts)
	}
	d := dashboard.New(opts)
	e.srv = httptest.NewServer(d)
	t.Cleanup(func() { cancel(); e.srv.Close() })
	return e
}

// connect adds a replica offering tools to the registry, as an agent
// connecting would.
func (e *env) connect(id, instance string, tools ...agentproto.Tool) *agents.Replica {
	e.t.Helper()
	rep := &agents.Replica{
		ID: id, ProjectID: e.project.ID, AgentKey: e.agentKey.ID, Instance: instance, Since: time.Now(),
		Reg: &agentproto.Registration{Protocol: agentproto.Version, Name: "orders", Version: "1.4.2", SDK: "go/0.1.0", Tools: tools},
	}
	e.reg.Add(rep, nil)
	return rep
}

// connectBridge adds a replica run by spacefix bridge.
func (e *env) connectBridge(id string, b *agentproto.Bridge, tools ...agentproto.Tool) *agents.Replica {
	e.t.Helper()
	rep := &agents.Replica{
		ID: id, ProjectID: e.project.ID, AgentKey: e.agentKey.ID, Since: time.Now(),
		Reg: &agentproto.Registration{Protocol: agentproto.Version, Name: "files", Version: b.ServerVersion, SDK: "go/0.1.0", Bridge: b, Tools: tools},
	}
	e.reg.Add(rep, nil)
	return rep
}

func tool(name, desc string, readOnly bool) agentproto.Tool {
	t := agentproto.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`)}
	if readOnly {
		yes := true
		t.Annotations = &agentproto.Annotations{ReadOnlyHint: &yes}
	}
	return t
}

// client is a browser: it keeps cookies and does not follow redirects.
type client struct {
	t    *testing.T
	e    *env
	http *http.Client
	// bearer, if set, is sent as an admin API token instead of cookies.
	bearer string
}

func (e *env) client() *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: e.t, e: e, http: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// admin returns a client signed in as a new admin, through the setup link.
func (e *env) admin() *client {
	e.t.Helper()
	path, err := users.SetupPath(context.Background(), e.st)
	if err != nil || path == "" {
		e.t.Fatalf("SetupPath = %q, %v", path, err)
	}
	c := e.client()
	res := c.form(path, url.Values{"email": {"ada@example.com"}, "password": {"correct horse battery"}, "confirm": {"correct horse battery"}})
	if res.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("setup: status %d, want 303", res.StatusCode)
	}
	return c
}

type response struct {
	*http.Response
	body []byte
}

func (r response) text() string { return string(r.body) }

func (c *client) do(req *http.Request) response {
	c.t.Helper()
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{res, b}
}

func (c *client) get(path string) response {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.e.srv.URL+path, nil)
	return c.do(req)
}

func (c *client) form(path string, v url.Values) response {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.e.srv.URL+path, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.do(req)
}

// call sends a JSON request to the API and decodes a 2xx answer into out.
func (c *client) call(method, path string, body, out any) response {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.e.srv.URL+path, rd)
	req.Header.Set("Content-Type", "application/json")
	res := c.do(req)
	if out != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(res.body, out); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, res.body, err)
		}
	}
	return res
}

// mustCall is call that fails the test on a status other than want.
func (c *client) mustCall(want int, method, path string, body, out any) response {
	c.t.Helper()
	res := c.call(method, path, body, out)
	if res.StatusCode != want {
		c.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, res.StatusCode, want, res.body)
	}
	return res
}

// apiError returns the "error" of an API answer.
func (r response) apiError() string {
	var e struct {
		Error string `json:"error"`
	}
	json.Unmarshal(r.body, &e)
	return e.Error
}
