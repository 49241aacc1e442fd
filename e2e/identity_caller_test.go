package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/bridge"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
)

// Who is calling (issue 27): the handler learns the person, app, project,
// role and scopes of a call in the gateway's own words, and no path hands
// an agent or a bridged server the client's key or OAuth token.

// who is what the test agent's handlers report of core.CallFrom.
type who struct {
	KeyID, KeyName string
	Person         *core.Person
	App            *core.App
	Project, Role  string
	Scopes         []string
	IdentityToken  string
}

func whoOf(ctx context.Context) string {
	c, _ := core.CallFrom(ctx)
	b, _ := json.Marshal(who{c.KeyID, c.KeyName, c.Person, c.App, c.Project, c.Role, c.Scopes, c.IdentityToken})
	return string(b)
}

// whoAgent offers a tool, a resource, a prompt and a completion that each
// answer who called them.
func whoAgent(t *testing.T) func(a *core.Agent) {
	return func(a *core.Agent) {
		must(t, core.AddTool(a, "whoami", "Who is calling.", func(ctx context.Context, _ struct{}) (string, error) {
			return whoOf(ctx), nil
		}, core.ReadOnly()))
		must(t, a.Resource("who://me", core.ResourceOptions{Name: "me", MimeType: "application/json"}, func(ctx context.Context) (any, error) {
			return whoOf(ctx), nil
		}))
		must(t, a.Prompt("whoami_prompt", core.PromptOptions{Description: "Who is calling.", Args: []core.PromptArg{{
			Name: "x", Complete: func(ctx context.Context, _ string, _ map[string]string) ([]string, error) {
				return []string{whoOf(ctx)}, nil
			},
		}}}, func(ctx context.Context, _ map[string]string) (core.PromptResult, error) {
			return core.PromptResult{Messages: []core.PromptMessage{core.UserMessage(whoOf(ctx))}}, nil
		}))
	}
}

// askWho calls, reads, gets and completes on cs and returns what each
// handler saw, by path.
func askWho(t *testing.T, cs *mcp.ClientSession) map[string]who {
	t.Helper()
	ctx := context.Background()
	got := map[string]who{}
	decode := func(path, s string) {
		var w who
		if err := json.Unmarshal([]byte(s), &w); err != nil {
			t.Fatalf("%s: %v in %q", path, err, s)
		}
		got[path] = w
	}
	decode("tool", text(call(t, cs, "whoami", map[string]any{})))
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "who://me"})
	if err != nil || len(rr.Contents) != 1 {
		t.Fatalf("read who://me: %v %v", rr, err)
	}
	decode("read", rr.Contents[0].Text)
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "whoami_prompt"})
	if err != nil || len(pr.Messages) != 1 {
		t.Fatalf("get whoami_prompt: %v %v", pr, err)
	}
	decode("get", pr.Messages[0].Content.(*mcp.TextContent).Text)
	cr, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "whoami_prompt"},
		Argument: mcp.CompleteParamsArgument{Name: "x"}})
	if err != nil || len(cr.Completion.Values) != 1 {
		t.Fatalf("complete whoami_prompt: %v %v", cr, err)
	}
	decode("complete", cr.Completion.Values[0])
	return got
}

// tap is a TCP proxy in front of a gateway that keeps every byte the
// gateway sends back: what an agent or bridge connected through it
// receives, HTTP and WebSocket alike.
type tap struct {
	url string

	mu    sync.Mutex
	got   bytes.Buffer
	conns []net.Conn
}

func newTap(t *testing.T, upstream string) *tap {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{url: "http://" + ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		tp.mu.Lock()
		for _, c := range tp.conns {
			c.Close()
		}
		tp.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", u.Host)
			if err != nil {
				down.Close()
				continue
			}
			tp.mu.Lock()
			tp.conns = append(tp.conns, down, up)
			tp.mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(up, down); up.Close() }()
			go func() { defer wg.Done(); io.Copy(io.MultiWriter(down, tp), up); down.Close() }()
		}
	}()
	return tp
}

func (tp *tap) Write(p []byte) (int, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.got.Write(p)
}

// received is everything the gateway sent through the tap so far.
func (tp *tap) received() string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.got.String()
}

// through returns a copy of e whose agents and bridges connect through tp.
func (e *env) through(tp *tap) *env {
	c := *e
	c.url = tp.url
	return &c
}

// oauthMember is a person who is a member of e's project with role, and
// the tokens of an app they connected through the real OAuth flow
// (registration, consent page, PKCE, token exchange), for the gateway's
// public URL when it has one.
type oauthMember struct {
	user            store.User
	grantID         string
	access, refresh string
}

func newOAuthMember(t *testing.T, e *env, email string, role store.Role) oauthMember {
	t.Helper()
	p := newUser(t, e, email, false)
	u, _, err := e.store.UserByEmail(context.Background(), email)
	must(t, err)
	_, err = e.store.SetMember(context.Background(), store.Member{ProjectID: e.project.ID, UserID: u.ID, Role: role})
	must(t, err)
	resource := e.url + "/mcp"
	if e.cfg.PublicURL != "" {
		resource = e.cfg.PublicURL + "/mcp"
	}
	clientID := register(t, e)
	code := handCode(t, e, p, clientID, url.Values{"resource": {resource}})
	st, tok := tokenRequest(t, e, url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {code},
		"code_verifier": {handVerifier}, "redirect_uri": {oauthRedirect}, "resource": {resource}})
	if st != http.StatusOK {
		t.Fatalf("exchange = %d %v", st, tok)
	}
	m := oauthMember{user: u, access: tok["access_token"].(string), refresh: tok["refresh_token"].(string)}
	grants, err := e.store.OAuthGrants(context.Background(), e.project.ID)
	must(t, err)
	for _, g := range grants {
		if g.UserID == u.ID {
			m.grantID = g.ID
		}
	}
	if m.grantID == "" || m.access == "" || m.refresh == "" {
		t.Fatalf("no grant or tokens for %s: %v", email, tok)
	}
	return m
}

// wantPerson is what every handler sees of m's calls through the "hand"
// app (handFlow registers it).
func (m oauthMember) want(t *testing.T, e *env) who {
	g, err := e.store.OAuthGrant(context.Background(), m.grantID)
	must(t, err)
	u, err := e.store.UserByID(context.Background(), m.user.ID)
	must(t, err)
	return who{KeyID: m.grantID, KeyName: "hand",
		Person:  &core.Person{ID: strconv.FormatInt(m.user.ID, 10), Email: m.user.Email, Name: u.Name},
		App:     &core.App{ID: g.ClientID, Name: "hand"},
		Project: e.project.Name, Role: "editor", Scopes: []string{"mcp:read", "mcp:write"}}
}

// noSecrets fails the test when got holds any of the secrets.
func noSecrets(t *testing.T, where, got string, secrets map[string]string) {
	t.Helper()
	for name, s := range secrets {
		if strings.Contains(got, s) {
			t.Errorf("%s received the client's %s", where, name)
		}
	}
}

// TestIdentityCaller: a person who signed in through OAuth and a client
// key each call a tool, read a resource, get a prompt and complete an
// argument at every protocol version; the Go handler sees the person,
// app, project, role and scopes, or for the key, the key and no person.
// Everything the agent received is searched for the client's secrets.
func TestIdentityCaller(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp := newTap(t, e.url)
	e.through(tp).startAgent(core.Options{}, whoAgent(t))
	ada := newOAuthMember(t, e, "ada@example.com", store.RoleEditor)
	must(t, e.store.SetUserName(context.Background(), ada.user.ID, "Ada Lovelace")) // as on the dashboard's Your accounts
	wantAda := ada.want(t, e)
	if wantAda.Person.Name != "Ada Lovelace" {
		t.Fatalf("want %+v", wantAda.Person)
	}
	keys, err := e.store.Keys(context.Background(), e.project.ID)
	must(t, err)
	var wantKey who
	for _, k := range keys {
		if k.Kind == store.KindClient {
			wantKey = who{KeyID: k.ID, KeyName: k.Name, Project: e.project.Name, Scopes: []string{"mcp:read", "mcp:write"}}
		}
	}
	_, roSecret := e.newKey(store.Key{Kind: store.KindClient, Name: "reader", ReadOnly: true})

	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			for path, got := range askWho(t, e.connect(v, ada.access, nil)) {
				if diff := cmp.Diff(wantAda, got); diff != "" {
					t.Errorf("%s with an OAuth token (-want +got):\n%s", path, diff)
				}
			}
			for path, got := range askWho(t, e.connect(v, e.clientKey, nil)) {
				if diff := cmp.Diff(wantKey, got); diff != "" {
					t.Errorf("%s with a client key (-want +got):\n%s", path, diff)
				}
			}
		})
	}
	ro := askWho(t, e.connect("2026-07-28", roSecret, nil))
	if got := ro["tool"]; got.Person != nil || strings.Join(got.Scopes, " ") != "mcp:read" || got.KeyName != "reader" {
		t.Errorf("a read-only key's call: %+v; want key reader, no person, scopes [mcp:read]", got)
	}

	got := tp.received()
	if !strings.Contains(got, "ada@example.com") {
		t.Fatalf("the tap did not see the calls in plain text; it cannot tell whether a secret went through")
	}
	noSecrets(t, "the agent", got, map[string]string{"access token": ada.access, "refresh token": ada.refresh,
		"key": e.clientKey, "read-only key": roSecret})
}

// TestIdentityCallerBridge: a bridged MCP server behind `spacefix bridge`
// is called by a person through OAuth and by a client key; neither the
// bridge nor the server receives the client's token or key. The server
// is a Streamable HTTP one, so every header and body it gets is kept.
func TestIdentityCallerBridge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var (
		mu   sync.Mutex
		seen bytes.Buffer
	)
	srv := mcp.NewServer(&mcp.Implementation{Name: "recorder", Version: "1"}, nil)
	type textIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo the text."},
		func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dump, _ := httputil.DumpRequest(r, true)
		mu.Lock()
		seen.Write(dump)
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	tp := newTap(t, e.url)
	e.through(tp).startBridge(bridge.Server{Name: "rec", URL: ts.URL}, bridge.Options{})
	ada := newOAuthMember(t, e, "ada@example.com", store.RoleEditor)

	for _, v := range versions {
		for name, secret := range map[string]string{"oauth": ada.access, "key": e.clientKey} {
			cs := e.connect(v, secret, nil)
			marker := "marker-" + name + "-" + v
			if got := text(callEventuallyWith(t, cs, "rec__echo", map[string]any{"text": marker})); got != marker {
				t.Errorf("%s %s: rec__echo = %q", v, name, got)
			}
		}
	}

	mu.Lock()
	atServer := seen.String()
	mu.Unlock()
	if !strings.Contains(atServer, "marker-oauth-2026-07-28") || !strings.Contains(tp.received(), "marker-key-2025-06-18") {
		t.Fatalf("the calls were not seen in plain text; the test cannot tell whether a secret went through")
	}
	secrets := map[string]string{"access token": ada.access, "refresh token": ada.refresh, "key": e.clientKey}
	noSecrets(t, "the bridged server", atServer, secrets)
	noSecrets(t, "the bridge", tp.received(), secrets)
}

// TestIdentityCallerCluster: an agent connected to gateway A is called
// through gateway B, which relays the call over the bus; the handler sees
// the same person as on one gateway, and nothing the agent received holds
// the client's token or key.
func TestIdentityCallerCluster(t *testing.T) {
	t.Parallel()
	bus := startNATS(t)
	a := newEnv(t, withConfig(func(c *gateway.Config) {
		c.Bus, c.BusHeartbeat = bus, 250*time.Millisecond
		c.PublicURL, c.AllowedHosts = "https://mcp.example.com", []string{"*"} // one token for both gateways
	}))
	b := a.sibling()
	a.url, b.url = "http://"+a.gw.Addr(), "http://"+b.gw.Addr()
	tp := newTap(t, a.url)
	a.through(tp).startAgent(core.Options{}, whoAgent(t))
	ada := newOAuthMember(t, a, "ada@example.com", store.RoleEditor)
	wantAda := ada.want(t, a)

	cs := b.connect("2025-11-25", ada.access, nil)
	waitFor(t, "B to list the tools of the agent on A", func() bool { return len(toolNames(t, cs)) > 0 })
	for path, got := range askWho(t, cs) {
		if diff := cmp.Diff(wantAda, got); diff != "" {
			t.Errorf("%s through B with an OAuth token (-want +got):\n%s", path, diff)
		}
	}
	kcs := b.connect("2026-07-28", b.clientKey, nil)
	if got := askWho(t, kcs)["tool"]; got.Person != nil || got.App != nil || got.Project != a.project.Name {
		t.Errorf("tool through B with a client key: %+v; want no person, no app, project %s", got, a.project.Name)
	}
	if calls := b.calls(); len(calls) == 0 {
		t.Errorf("B logged no call: the calls did not go through B")
	}
	got := tp.received()
	if !strings.Contains(got, "ada@example.com") {
		t.Fatalf("the tap did not see the calls in plain text; it cannot tell whether a secret went through")
	}
	noSecrets(t, "the agent behind the relay", got, map[string]string{"access token": ada.access, "refresh token": ada.refresh, "key": b.clientKey})
}
