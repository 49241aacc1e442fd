package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite" // the raw read of the front's SQLite file

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/bridge"
	"github.com/spacefix/spacefix/internal/dashboard"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/users"
)

// upstreamStore is the remote gateway's store. It counts the refresh
// grants the remote's token endpoint honours, and on request gives the
// next access token a life of one second while the token response still
// says an hour: a token the remote drops early, as one revoked would be.
type upstreamStore struct {
	store.Store
	refreshes atomic.Int32
	codes     atomic.Int32 // authorization codes the token endpoint was given, good or spent
	shortNext atomic.Int32 // how many of the next access tokens live one second
}

func (s *upstreamStore) UseOAuthToken(ctx context.Context, hash []byte) (store.OAuthToken, error) {
	tok, err := s.Store.UseOAuthToken(ctx, hash)
	if err == nil && tok.Kind == store.OAuthRefresh {
		s.refreshes.Add(1)
	}
	if tok.Kind == store.OAuthCode {
		s.codes.Add(1)
	}
	return tok, err
}

func (s *upstreamStore) CreateOAuthToken(ctx context.Context, tok store.OAuthToken, hash []byte) error {
	for n := s.shortNext.Load(); n > 0 && tok.Kind == store.OAuthAccess; n = s.shortNext.Load() {
		if s.shortNext.CompareAndSwap(n, n-1) {
			tok.ExpiresAt = time.Now().Add(time.Second)
			break
		}
	}
	return s.Store.CreateOAuthToken(ctx, tok, hash)
}

// ppWorld is the judged scenario: a remote MCP server behind a
// real OAuth authorization server on loopback (a second gateway, "up",
// whose agent's whoami answers the calling person's email), and the
// gateway people call through ("front"), where `spacefix bridge --remote
// <up>/mcp --per-person` registers it.
type ppWorld struct {
	t         *testing.T
	up        *env
	upSt      *upstreamStore
	front     *env
	bridge    *runningBridge
	keyID     string // the front's agent key, the bridged remote's
	tool      string // the bridged whoami, as the front lists it
	host      string // the remote's host, as the front's sentences name it
	frontLogs *syncBuffer
	ops       *person       // the remote's operator, whose sign-in lists its tools
	srv       bridge.Server // the bridged remote
}

// ppSetup varies the world: the front's configuration (beyond
// per-person remotes on loopback), the bridged server's, and the front's
// env options (its store).
type ppSetup struct {
	config func(*gateway.Config)
	server func(*bridge.Server)
	env    []func(*envOptions)
	// noBridge: the test signs in and starts the bridge itself.
	noBridge bool
}

// newPPWorld starts the remote with its agent, the front and the
// per-person bridge, whose shared sign-in for listing the remote's tools
// is an operator's (ops@example.com) `spacefix bridge login`.
func newPPWorld(t *testing.T, setup ppSetup) *ppWorld {
	t.Helper()
	opts, more := setup.env, setup.config
	w := &ppWorld{t: t, upSt: &upstreamStore{}, frontLogs: &syncBuffer{}}
	w.up = newEnv(t, func(o *envOptions) {
		o.wrapStore = func(s store.Store) store.Store { w.upSt.Store = s; return w.upSt }
	})
	w.up.startAgent(core.Options{}, func(a *core.Agent) {
		email := func(ctx context.Context) string {
			if c, ok := core.CallFrom(ctx); ok && c.Person != nil {
				return c.Person.Email
			}
			return "nobody"
		}
		must(t, core.AddTool(a, "whoami", "The calling person's email.", func(ctx context.Context, _ struct{}) (string, error) {
			return email(ctx), nil
		}, core.ReadOnly()))
		must(t, a.Resource("who://me", core.ResourceOptions{Name: "me", MimeType: "text/plain"}, func(ctx context.Context) (any, error) {
			return email(ctx), nil
		}))
		must(t, a.Prompt("whoami_prompt", core.PromptOptions{Description: "The calling person's email.", Args: []core.PromptArg{{
			Name: "x", Complete: func(ctx context.Context, _ string, _ map[string]string) ([]string, error) {
				return []string{email(ctx)}, nil
			},
		}}}, func(ctx context.Context, _ map[string]string) (core.PromptResult, error) {
			return core.PromptResult{Messages: []core.PromptMessage{core.UserMessage(email(ctx))}}, nil
		}))
	})
	opts = append(opts, func(o *envOptions) { o.logs = w.frontLogs }, withConfig(func(c *gateway.Config) {
		c.UpstreamAllowLoopback = true
		if more != nil {
			more(c)
		}
	}))
	w.front = newEnv(t, opts...)
	w.keyID = w.front.agentKeyID()
	w.tool = "up__whoami"
	u, _ := url.Parse(w.up.url)
	w.host = u.Host

	w.ops = newPPUser(t, w.up, "ops@example.com")
	w.srv = bridge.Server{Name: "up", URL: w.up.url + "/mcp", PerPerson: true}
	if setup.server != nil {
		setup.server(&w.srv)
	}
	if setup.noBridge {
		return w
	}
	w.bridge = w.startBridge(w.srv, w.front.agentKey)
	return w
}

// startBridge signs srv in as ops and runs its bridge with agentKey,
// connected to the front itself (not its public URL).
func (w *ppWorld) startBridge(srv bridge.Server, agentKey string) *runningBridge {
	w.t.Helper()
	dir := w.t.TempDir()
	w.login(srv, dir)
	direct := *w.front
	direct.url, direct.agentKey = "http://"+w.front.gw.Addr(), agentKey
	return direct.startBridge(srv, bridge.Options{TokenDir: dir})
}

// login is `spacefix bridge login <srv>` by the remote's operator, ops,
// with the tokens kept in dir.
func (w *ppWorld) login(srv bridge.Server, dir string) {
	w.t.Helper()
	b, err := bridge.New(srv, bridge.Options{GatewayURL: w.front.url, APIKey: w.front.agentKey, TokenDir: dir})
	must(w.t, err)
	loginThrough(w.t, b, w.up.url+"/oauth/authorize?", func(authURL string) (string, error) {
		back, err := w.ops.consent(authURL, "approve")
		if err != nil {
			return "", err
		}
		return back.String(), nil
	}, io.Discard)
}

// newPPUser is a person who is an editor of e's project, signed in to
// its dashboard.
func newPPUser(t *testing.T, e *env, email string) *person {
	t.Helper()
	p := newUser(t, e, email, false)
	u, _, err := e.store.UserByEmail(context.Background(), email)
	must(t, err)
	_, err = e.store.SetMember(context.Background(), store.Member{ProjectID: e.project.ID, UserID: u.ID, Role: store.RoleEditor})
	must(t, err)
	return p
}

// ppPerson is someone in the front's project: signed in to its dashboard,
// with an OAuth token of an MCP client at the front, and (unless they
// have none) an account at the remote.
type ppPerson struct {
	email string
	id    int64   // the front's user id
	front *person // the browser's session at the front
	up    *person // the browser's session at the remote; nil: no account there
	token string  // the MCP client's OAuth access token at the front
}

// person adds name@example.com to the front, and to the remote when
// onUp.
func (w *ppWorld) person(name string, onUp bool) *ppPerson {
	w.t.Helper()
	email := name + "@example.com"
	m := newOAuthMember(w.t, w.front, email, store.RoleEditor)
	session, _, err := users.NewSession(context.Background(), w.front.store, m.user.ID)
	must(w.t, err)
	p := &ppPerson{email: email, id: m.user.ID, token: m.access, front: &person{t: w.t, e: w.front, session: session}}
	p.front.access.Store("write")
	if onUp {
		p.up = newPPUser(w.t, w.up, email)
	}
	return p
}

// browse GETs u as a browser signed in with session would, without
// following redirects: the status, the Location and the page.
func browse(t *testing.T, u, session string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if session != "" {
		req.AddCookie(&http.Cookie{Name: dashboard.SessionCookieName(u), Value: session})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := noRedirects.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(page)
}

// connectURL is the front's connect page for the bridged remote.
func (w *ppWorld) connectURL() string { return w.front.url + "/connect/" + w.keyID }

// connectAccount connects p's remote account in the browser: the front's
// connect page sends the browser to the remote's authorization page, p
// allows it there, and the remote sends the browser back to the front's
// callback (beforeCallback, if set, runs first), which says the account
// is connected.
func (w *ppWorld) connectAccount(p *ppPerson, beforeCallback func()) {
	t := w.t
	t.Helper()
	back := w.authorize(p, "approve")
	if beforeCallback != nil {
		beforeCallback()
	}
	status, _, page := browse(t, back.String(), p.front.session)
	if want := "Your " + w.host + " account is connected. Go back to your MCP client and call the tool again."; status != http.StatusOK || !strings.Contains(page, want) {
		t.Fatalf("the callback page for %s = %d; want 200 saying %q\n%s", p.email, status, want, page)
	}
}

// authorize is connecting's first half: the front's connect page sends
// p's browser to the remote's authorization page, where p decides
// ("approve" or "deny"); it returns where the remote sends the browser
// back to: the front's callback.
func (w *ppWorld) authorize(p *ppPerson, decision string) *url.URL {
	t := w.t
	t.Helper()
	via := w.front
	status, loc, page := browse(t, w.connectURL(), p.front.session)
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, w.up.url+"/oauth/authorize?") {
		t.Fatalf("GET /connect as %s = %d to %q; want 303 to the remote's authorization page\n%s", p.email, status, loc, page)
	}
	authURL, _ := url.Parse(loc)
	q := authURL.Query()
	if q.Get("redirect_uri") != via.url+"/upstream/callback" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
		q.Get("resource") != w.up.url+"/mcp" || q.Get("state") == "" {
		t.Errorf("authorization request %s; want redirect_uri %s/upstream/callback, PKCE S256, resource %s/mcp and a state", loc, via.url, w.up.url)
	}
	back, err := p.up.consent(loc, decision)
	must(t, err)
	if !strings.HasPrefix(back.String(), via.url+"/upstream/callback?") || back.Query().Get("state") == "" {
		t.Fatalf("the remote sent %s's browser to %s; want %s/upstream/callback with the state", p.email, back, via.url)
	}
	return back
}

// urlElicitation is a client that declares elicitation.url.
var urlElicitation = &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{
	Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}},
}}

// session opens an MCP client session at the front with p's OAuth token
// at protocol version v.
func (w *ppWorld) session(p *ppPerson, v string, opts *mcp.ClientOptions) *mcp.ClientSession {
	w.t.Helper()
	return w.front.connect(v, p.token, opts)
}

// whoami calls the bridged whoami on cs and returns what the remote
// said, failing the test on an error of any kind.
func (w *ppWorld) whoami(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	r := call(t, cs, w.tool, map[string]any{})
	if r.IsError {
		t.Fatalf("%s: an error result: %s", w.tool, text(r))
	}
	return text(r)
}

// linkSentence is the tool error a person without an account gets from a
// client that cannot show a URL elicitation.
func (w *ppWorld) linkSentence() string {
	return fmt.Sprintf("Connect your %s account to use %s: open %s, sign in there, then call %s again.", w.host, w.tool, w.connectURL(), w.tool)
}

// refusal is the sentence a call with a key (no person) gets.
func (w *ppWorld) refusal() string { return w.refusalOf(w.tool) }

// refusalOf is the refusal of a key's call, read or get of name.
func (w *ppWorld) refusalOf(name string) string {
	return fmt.Sprintf(`%s acts on %s as each person's own account, and this call comes with an agent key, not a person. Call it through an MCP client signed in with OAuth, or ask the bridge's operator to set "fallback": "shared".`, name, w.host)
}

// readWho reads the bridged who://me and gets the bridged whoami prompt
// on cs: what each said, or the error.
func readWho(cs *mcp.ClientSession) (read, got string, readErr, getErr error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rr, readErr := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "who://me"})
	if readErr == nil && len(rr.Contents) == 1 {
		read = rr.Contents[0].Text
	}
	pr, getErr := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "up__whoami_prompt"})
	if getErr == nil && len(pr.Messages) == 1 {
		if tc, ok := pr.Messages[0].Content.(*mcp.TextContent); ok {
			got = tc.Text
		}
	}
	return read, got, readErr, getErr
}

// completeWho completes the bridged whoami prompt's argument on cs: the
// one value the remote offered, or the error.
func completeWho(cs *mcp.ClientSession) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cr, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "up__whoami_prompt"},
		Argument: mcp.CompleteParamsArgument{Name: "x"}})
	if err != nil || len(cr.Completion.Values) != 1 {
		return "", err
	}
	return cr.Completion.Values[0], nil
}

// rpcMessage is the message of a JSON-RPC error ("" for another error).
func rpcMessage(err error) string {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Message
	}
	return ""
}

// wantElicitation checks that a call ended with JSON-RPC error -32042
// carrying one URL elicitation that opens the connect page.
func (w *ppWorld) wantElicitation(t *testing.T, res *mcp.CallToolResult, err error) {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != mcp.CodeURLElicitationRequired {
		t.Errorf("a call without an account, from a client with elicitation.url = %v, %v; want JSON-RPC error -32042", res, err)
		return
	}
	var data struct {
		Elicitations []struct {
			Mode, ElicitationID, URL, Message string
		} `json:"elicitations"`
	}
	if err := json.Unmarshal(je.Data, &data); err != nil || len(data.Elicitations) != 1 {
		t.Errorf("the -32042 error's data = %s (%v); want one elicitation", je.Data, err)
		return
	}
	el := data.Elicitations[0]
	if want := "Connect your " + w.host + " account to use " + w.tool + "."; el.Mode != "url" || el.URL != w.connectURL() || el.Message != want || el.ElicitationID == "" {
		t.Errorf("the elicitation = %+v; want mode url, url %s, message %q and an id", el, w.connectURL(), want)
	}
}

// account is p's stored upstream account at the front.
func (w *ppWorld) account(p *ppPerson) store.UpstreamAccount {
	w.t.Helper()
	a, err := w.front.store.UpstreamAccount(context.Background(), w.keyID, p.id)
	if err != nil {
		w.t.Fatalf("%s's upstream account: %v", p.email, err)
	}
	return a
}

// expireSoon makes the front believe p's upstream token expires in ten
// seconds, so that the next call refreshes it first.
func (w *ppWorld) expireSoon(p *ppPerson) store.UpstreamAccount {
	w.t.Helper()
	a := w.account(p)
	a.ExpiresAt = time.Now().Add(10 * time.Second)
	ok, err := w.front.store.UpdateUpstreamAccount(context.Background(), a)
	if err != nil || !ok {
		w.t.Fatalf("update %s's account: %v %v", p.email, ok, err)
	}
	return a
}

// dropToken has the remote drop p's token early: the next refresh (made
// now, by a call on cs) gets a token that lives one second, and the
// front, told an hour, keeps it. It returns that token once the remote
// refuses it.
func (w *ppWorld) dropToken(t *testing.T, cs *mcp.ClientSession, p *ppPerson) string {
	t.Helper()
	w.upSt.shortNext.Store(1)
	w.expireSoon(p)
	if got := w.whoami(t, cs); got != p.email {
		t.Errorf("%s's whoami = %q", p.email, got)
	}
	dropped := w.accessToken(w.box(), p)
	waitFor(t, "the remote to refuse "+p.email+"'s short-lived token", func() bool { return mcpStatus(t, w.up, dropped) == 401 })
	return dropped
}

// box opens the front's secret key file: the one configured, else the
// one the gateway made beside its SQLite file.
func (w *ppWorld) box() *secrets.Box {
	w.t.Helper()
	path := w.front.cfg.SecretKeyFile
	if path == "" {
		path = filepath.Join(filepath.Dir(w.front.dataPath), gateway.DefaultSecretKeyFile)
	}
	b, err := secrets.Load(path)
	if err != nil {
		w.t.Fatalf("the front's secret key file: %v", err)
	}
	return b
}

// accessToken opens p's stored upstream access token with the front's key.
func (w *ppWorld) accessToken(box *secrets.Box, p *ppPerson) string {
	w.t.Helper()
	plain, err := box.Open(w.account(p).Access, fmt.Sprintf("upstream-access:%s:%d", w.keyID, p.id))
	if err != nil {
		w.t.Fatalf("open %s's access token with the key: %v", p.email, err)
	}
	return string(plain)
}

// rawAccountRow reads p's row of upstream_accounts from the front's
// SQLite file with database/sql, every column as text.
func (w *ppWorld) rawAccountRow(p *ppPerson) map[string]string {
	t := w.t
	t.Helper()
	if _, err := os.Stat(w.front.dataPath); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+w.front.dataPath+"?mode=ro&_pragma=busy_timeout(5000)")
	must(t, err)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT * FROM upstream_accounts`)
	must(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	must(t, err)
	var found map[string]string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		must(t, rows.Scan(ptrs...))
		row := map[string]string{}
		for i, c := range cols {
			switch v := vals[i].(type) {
			case []byte:
				row[c] = string(v)
			case nil:
				row[c] = ""
			default:
				row[c] = fmt.Sprint(v)
			}
		}
		if row["user_id"] == fmt.Sprint(p.id) && row["agent_key_id"] == w.keyID {
			found = row
		}
	}
	must(t, rows.Err())
	if found == nil {
		t.Fatalf("no row of upstream_accounts for %s (columns %v)", p.email, cols)
	}
	return found
}

// writeKeyFile writes a new secret key file (mode 0600) for the test.
func writeKeyFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret.key")
	must(t, os.WriteFile(path, []byte("# a test's key\n"+secrets.NewKey()+"\n"), 0o600))
	return path
}

// switchLB is the front's public address in front of two gateways: a
// reverse proxy that sends every request to the gateway the test chose
// last, and counts the MCP requests each one got.
type switchLB struct {
	url    string
	target atomic.Pointer[url.URL]
	mu     sync.Mutex
	mcp    map[string]int // by the gateway's address
}

func newSwitchLB(t *testing.T) *switchLB {
	lb := &switchLB{mcp: map[string]int{}}
	srv := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u := lb.target.Load()
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
			if pr.In.URL.Path == "/mcp" {
				lb.mu.Lock()
				lb.mcp[u.Host]++
				lb.mu.Unlock()
			}
		},
		FlushInterval: -1,
	})
	t.Cleanup(srv.Close)
	lb.url = srv.URL
	return lb
}

// to sends what follows to the gateway of e.
func (lb *switchLB) to(e *env) { lb.target.Store(&url.URL{Scheme: "http", Host: e.gw.Addr()}) }

// mcpRequests is how many MCP requests the gateway of e got.
func (lb *switchLB) mcpRequests(e *env) int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.mcp[e.gw.Addr()]
}

// siblingWith starts another gateway on e's store and bus, as sibling
// does, with its configuration changed by change (a rotated key file)
// and its log kept in logs.
func (e *env) siblingWith(change func(*gateway.Config), logs *syncBuffer) *env {
	t := e.t
	t.Helper()
	cfg := e.cfg
	change(&cfg)
	cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, logOutput()), nil))
	g, err := gateway.New(cfg, e.openStore())
	must(t, err)
	must(t, g.Start())
	t.Cleanup(func() { g.Close() })
	s := *e
	s.gw, s.url, s.cfg = g, g.URL(), cfg
	return &s
}

// newPPCluster is the world with two front gateways, A (w.front, where
// the bridge is connected) and B, on PostgreSQL and NATS behind one
// public address, lb, which sends requests to A for now.
func newPPCluster(t *testing.T) (w *ppWorld, a, b *env, lb *switchLB) {
	t.Helper()
	var pg string
	bus := startNATS(t)
	keyFile := writeKeyFile(t)
	lb = newSwitchLB(t)
	w = newPPWorld(t, ppSetup{config: func(c *gateway.Config) {
		c.Bus, c.BusHeartbeat = bus, 250*time.Millisecond
		c.SecretKeyFile = keyFile
		c.PublicURL, c.AllowedHosts = lb.url, []string{"*"}
	}, env: []func(*envOptions){onPostgres(&pg)}})
	a = w.front
	b = a.sibling()
	lb.to(a)
	waitFor(t, "B to list the bridged whoami on A", func() bool {
		_, ok := b.gw.Registry().Snapshot(b.project.ID).Tools[w.tool]
		return ok
	})
	return w, a, b, lb
}

// restartFront stops the front and starts it again on the same address,
// store and configuration (the bridge reconnects by itself); its log
// goes to logs too.
func (w *ppWorld) restartFront(logs *syncBuffer) {
	t := w.t
	t.Helper()
	must(t, w.front.gw.Close())
	cfg := w.front.cfg
	cfg.Addr = w.front.gw.Addr()
	cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, w.frontLogs, logOutput()), nil))
	st := w.front.openStore()
	g, err := gateway.New(cfg, st)
	must(t, err)
	must(t, g.Start())
	t.Cleanup(func() { g.Close() })
	f := *w.front
	f.gw, f.store, f.cfg = g, st, cfg
	w.front = &f
}

// direct is e as reached at its own address rather than the public one.
func (e *env) direct() *env {
	d := *e
	d.url = "http://" + e.gw.Addr()
	return &d
}
