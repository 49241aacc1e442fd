package upstream_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/egress"
	"github.com/spacefix/spacefix/internal/leaktest"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/teststores"
	"github.com/spacefix/spacefix/internal/upstream"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

var quiet = slog.New(slog.DiscardHandler)

// These tests run the service against a real store (SQLite, and PostgreSQL
// when SPACEFIX_TEST_DATABASE_URL is set) and a small loopback remote: an
// MCP endpoint behind OAuth, its protected resource metadata, and its
// authorization server (metadata, dynamic registration of confidential
// clients, an authorization endpoint that approves at once, PKCE S256 and
// the resource checked at the token endpoint, refreshes included, refresh
// tokens that rotate).

// each runs fn on every store.
func each(t *testing.T, fn func(t *testing.T, st store.Store)) {
	for name, open := range teststores.Openers() {
		t.Run(name, func(t *testing.T) { fn(t, open(t)) })
	}
}

// syncBuffer is a log both a test and the service's goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// remote is the loopback MCP server behind OAuth.
type remote struct {
	srv  *httptest.Server
	base string

	mu         sync.Mutex
	issParam   bool
	accessLife int               // seconds, of the tokens a code gets
	renewLife  int               // seconds, of the tokens a refresh gets
	noRefresh  bool              // tokens come without refresh tokens
	clients    map[string]string // id → secret
	codes      map[string]codeGrant
	access     map[string]string // access token → subject
	refresh    map[string]string // refresh token → subject
	n          int
	registered int
	refreshes  int // successful refreshes
	refreshAsk int // refresh requests
	// slowRefresh, when set, is how long each refresh request takes, so
	// that refreshes from two gateways overlap.
	slowRefresh time.Duration
	// used holds the codes and refresh tokens already spent: a second use revokes
	// every token of its subject, as an authorization server that takes
	// reuse as theft does (the OAuth 2.1 rule; Spacefix's own does).
	used map[string]string
}

type codeGrant struct{ challenge, client, redirect, resource, subject string }

func newRemote(t *testing.T) *remote {
	r := &remote{accessLife: 3600, renewLife: 3600, clients: map[string]string{}, codes: map[string]codeGrant{},
		access: map[string]string{}, refresh: map[string]string{}, used: map[string]string{}}
	mux := http.NewServeMux()
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	r.base = r.srv.URL
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, req *http.Request) {
		tok, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		r.mu.Lock()
		who, ok := r.access[tok]
		r.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata=%q, scope="mcp"`, r.base+"/.well-known/oauth-protected-resource/mcp"))
			http.Error(w, "sign in", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, who)
	})
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"resource": r.base + "/mcp", "authorization_servers": []string{r.base}, "scopes_supported": []string{"mcp"}})
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		iss := r.issParam
		r.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer": r.base, "authorization_endpoint": r.base + "/authorize", "token_endpoint": r.base + "/token",
			"registration_endpoint": r.base + "/register", "code_challenge_methods_supported": []string{"S256"},
			"response_types_supported": []string{"code"}, "grant_types_supported": []string{"authorization_code", "refresh_token"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
			"scopes_supported":                      []string{"mcp", "offline_access"}, "authorization_response_iss_parameter_supported": iss,
		})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, req *http.Request) {
		var m struct {
			RedirectURIs []string `json:"redirect_uris"`
		}
		json.NewDecoder(req.Body).Decode(&m)
		r.mu.Lock()
		r.n++
		r.registered++
		id, secret := fmt.Sprintf("client-%d", r.n), fmt.Sprintf("secret-%d", r.n)
		r.clients[id] = secret
		r.mu.Unlock()
		writeJSON(w, http.StatusCreated, map[string]any{"client_id": id, "client_secret": secret, "redirect_uris": m.RedirectURIs,
			"token_endpoint_auth_method": "client_secret_basic"})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, ok := r.clients[q.Get("client_id")]; !ok || q.Get("code_challenge_method") != "S256" || q.Get("resource") != r.base+"/mcp" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		r.n++
		code := fmt.Sprintf("code-%d", r.n)
		r.codes[code] = codeGrant{challenge: q.Get("code_challenge"), client: q.Get("client_id"), redirect: q.Get("redirect_uri"),
			resource: q.Get("resource"), subject: q.Get("login_hint")}
		back := url.Values{"code": {code}, "state": {q.Get("state")}}
		if r.issParam {
			back.Set("iss", r.base)
		}
		http.Redirect(w, req, q.Get("redirect_uri")+"?"+back.Encode(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", r.token)
	return r
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (r *remote) token(w http.ResponseWriter, req *http.Request) {
	req.ParseForm()
	id, secret, ok := req.BasicAuth()
	if !ok {
		id, secret = req.PostForm.Get("client_id"), req.PostForm.Get("client_secret")
	}
	if req.PostForm.Get("grant_type") == "refresh_token" {
		r.wait()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if want, ok := r.clients[id]; !ok || want != secret {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	var who string
	life := r.accessLife
	switch req.PostForm.Get("grant_type") {
	case "authorization_code":
		if thief, reused := r.used[req.PostForm.Get("code")]; reused {
			r.revoke(thief) // a code used twice was stolen (RFC 6749 4.1.2)
		}
		g, ok := r.codes[req.PostForm.Get("code")]
		sum := sha256.Sum256([]byte(req.PostForm.Get("code_verifier")))
		if !ok || g.client != id || g.challenge != base64.RawURLEncoding.EncodeToString(sum[:]) ||
			req.PostForm.Get("resource") != g.resource || req.PostForm.Get("redirect_uri") != g.redirect {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "code-secret-detail"})
			return
		}
		delete(r.codes, req.PostForm.Get("code"))
		r.used[req.PostForm.Get("code")] = g.subject
		who = g.subject
	case "refresh_token":
		rt := req.PostForm.Get("refresh_token")
		if got := req.PostForm.Get("resource"); got != r.base+"/mcp" {
			// The MCP spec wants the resource in every token request.
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_target", "error_description": "resource " + got + " is not the grant's"})
			return
		}
		if thief, reused := r.used[rt]; reused {
			r.revoke(thief)
		}
		if who, ok = r.refresh[rt]; !ok {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "refresh token " + rt + " unknown"})
			return
		}
		delete(r.refresh, rt) // refresh tokens rotate
		r.used[rt] = who
		r.refreshes++
		life = r.renewLife
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	r.n++
	at, rt := fmt.Sprintf("at-%d", r.n), fmt.Sprintf("rt-%d", r.n)
	r.access[at] = who
	answer := map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": life, "scope": "mcp offline_access"}
	if !r.noRefresh {
		r.refresh[rt] = who
		answer["refresh_token"] = rt
	}
	writeJSON(w, http.StatusOK, answer)
}

// wait holds a refresh request while a race is set up.
// revoke ends every token of subject; r.mu is held.
func (r *remote) revoke(subject string) {
	for tok, sub := range r.access {
		if sub == subject {
			delete(r.access, tok)
		}
	}
	for tok, sub := range r.refresh {
		if sub == subject {
			delete(r.refresh, tok)
		}
	}
}

func (r *remote) wait() {
	r.mu.Lock()
	r.refreshAsk++
	d := r.slowRefresh
	r.mu.Unlock()
	time.Sleep(d) // the authorization server's own pace, not a wait for the test
}

func (r *remote) set(f func(r *remote)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

func (r *remote) count(f func(r *remote) int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return f(r)
}

// who asks the remote who a token is, as the bridge's call would.
func (r *remote) who(t *testing.T, token string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.base+"/mcp", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	return string(body)
}

// fixture is a project with a bridged agent key and two people.
type fixture struct {
	st       store.Store
	project  int64
	agentKey string
	ann, bob int64
}

func newFixture(t *testing.T, st store.Store) fixture {
	t.Helper()
	ctx := t.Context()
	p, err := st.CreateProject(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("agent-secret"))
	k, err := st.CreateKey(ctx, store.Key{ID: "key_linear", ProjectID: p.ID, Kind: store.KindAgent}, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{st: st, project: p.ID, agentKey: k.ID}
	for _, email := range []string{"ann@example.com", "bob@example.com"} {
		u, err := st.CreateUser(ctx, store.User{Email: email}, "$argon2id$"+email)
		if err != nil {
			t.Fatal(err)
		}
		if f.ann == 0 {
			f.ann = u.ID
		} else {
			f.bob = u.ID
		}
	}
	return f
}

// keyFile writes a secret key file with keys (first seals) and loads it.
func keyFile(t *testing.T, keys ...string) *secrets.Box {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(path, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := secrets.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	d  time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.d)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.d += d
	c.mu.Unlock()
}

const public = "https://gw.example"

func newService(st store.Store, box *secrets.Box, c *clock) *upstream.Service {
	o := upstream.Options{Store: st, Box: box, PublicURL: func() string { return public }, Egress: egress.Policy{AllowLoopback: true}, Log: quiet}
	if c != nil {
		o.Now = c.now
	}
	return upstream.New(o)
}

// browse is the person's browser at the upstream: it opens the
// authorization URL (signing in as subject) and returns the callback's
// query the upstream sends back.
func browse(t *testing.T, authURL, subject string) url.Values {
	t.Helper()
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("login_hint", subject)
	u.RawQuery = q.Encode()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize answered %d; want a redirect back", resp.StatusCode)
	}
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Scheme + "://" + back.Host + back.Path; got != public+"/upstream/callback" {
		t.Fatalf("redirected to %s; want the gateway's callback", got)
	}
	return back.Query()
}

// connect runs the whole flow for user as subject upstream.
func connect(t *testing.T, svc *upstream.Service, f fixture, r *remote, user int64, subject string) store.UpstreamAccount {
	t.Helper()
	authURL, err := svc.Begin(t.Context(), f.project, f.agentKey, user, r.base+"/mcp", "/me")
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	back := browse(t, authURL, subject)
	done, err := svc.Complete(t.Context(), user, back.Get("state"), back.Get("code"), back.Get("iss"))
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if done.ReturnTo != "/me" || done.Again {
		t.Errorf("returnTo = %q, again %v; want /me, connected now", done.ReturnTo, done.Again)
	}
	return done.Account
}

// TestCompleteTwice: the callback opened again (a reload) finds the
// account connected and does not spend the code a second time, which the
// authorization server would take for a stolen code and end the grant.
func TestCompleteTwice(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		f := newFixture(t, st)
		svc := newService(st, keyFile(t, secrets.NewKey()), nil)
		authURL, err := svc.Begin(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp", "/me")
		if err != nil {
			t.Fatal(err)
		}
		back := browse(t, authURL, "ann-upstream")
		for i := range 2 {
			done, err := svc.Complete(t.Context(), f.ann, back.Get("state"), back.Get("code"), back.Get("iss"))
			if err != nil || done.ReturnTo != "/me" || done.Again != (i == 1) {
				t.Fatalf("Complete #%d = %q, again %v, %v; want /me, connected, again the second time", i+1, done.ReturnTo, done.Again, err)
			}
		}
		tok, err := svc.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp")
		if err != nil || r.who(t, tok) != "ann-upstream" {
			t.Errorf("ann's token after the callback twice is %s at the remote (%v); want ann-upstream", r.who(t, tok), err)
		}
	})
}

// TestBeginAuthorizeURL: Begin discovers the remote's authorization
// server from its 401, registers one client (kept for the next person),
// and sends the browser there with PKCE S256, the resource and a state.
func TestBeginAuthorizeURL(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		f := newFixture(t, st)
		svc := newService(st, keyFile(t, secrets.NewKey()), nil)
		authURL, err := svc.Begin(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp", "")
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(authURL)
		q := u.Query()
		if got := u.Scheme + "://" + u.Host + u.Path; got != r.base+"/authorize" {
			t.Errorf("authorization endpoint %s; want %s/authorize", got, r.base)
		}
		for k, want := range map[string]string{"response_type": "code", "code_challenge_method": "S256", "resource": r.base + "/mcp",
			"redirect_uri": public + "/upstream/callback", "client_id": "client-1", "scope": "mcp offline_access"} {
			if q.Get(k) != want {
				t.Errorf("%s = %q; want %q", k, q.Get(k), want)
			}
		}
		if len(q.Get("code_challenge")) != 43 || len(q.Get("state")) < 100 {
			t.Errorf("code_challenge %q, state %q; want a S256 challenge and a sealed state", q.Get("code_challenge"), q.Get("state"))
		}
		if _, err := svc.Begin(t.Context(), f.project, f.agentKey, f.bob, r.base+"/mcp", ""); err != nil {
			t.Fatal(err)
		}
		if n := r.count(func(r *remote) int { return r.registered }); n != 1 {
			t.Errorf("%d client registrations for two people; want 1 (the client is kept)", n)
		}
		cs, _ := st.UpstreamClients(t.Context())
		if len(cs) != 1 || cs[0].ClientID != "client-1" || cs[0].Resource != r.base+"/mcp" || cs[0].RedirectURI != public+"/upstream/callback" ||
			strings.Contains(string(cs[0].Secret), "secret-1") || len(cs[0].Secret) == 0 {
			t.Errorf("kept clients = %+v; want client-1 with its secret sealed", cs)
		}
	})
}

// TestCompleteStoresSealedTokens: the callback's code becomes an account
// whose tokens the store holds sealed; Token hands out the person's own
// access token, and the remote knows them by it.
func TestCompleteStoresSealedTokens(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		r.set(func(r *remote) { r.issParam = true })
		f := newFixture(t, st)
		box := keyFile(t, secrets.NewKey())
		svc := newService(st, box, nil)
		a := connect(t, svc, f, r, f.ann, "ann-upstream")
		connect(t, svc, f, r, f.bob, "bob-upstream")

		raw, err := st.UpstreamAccount(t.Context(), f.agentKey, f.ann)
		if err != nil {
			t.Fatal(err)
		}
		if a.Version != raw.Version || a.Resource != r.base+"/mcp" || a.ClientID != "client-1" || a.Scope != "mcp offline_access" || a.ProjectID != f.project {
			t.Errorf("Complete returned %+v; stored %+v", a, raw)
		}
		if strings.Contains(string(raw.Access), "at-") || strings.Contains(string(raw.Refresh), "rt-") {
			t.Errorf("the store holds a token in the clear")
		}
		ctxAccess := fmt.Sprintf("upstream-access:%s:%d", f.agentKey, f.ann)
		plain, err := box.Open(raw.Access, ctxAccess)
		if err != nil || !strings.HasPrefix(string(plain), "at-") {
			t.Errorf("open the access token under %q = %q, %v", ctxAccess, plain, err)
		}
		if _, err := box.Open(raw.Access, fmt.Sprintf("upstream-access:%s:%d", f.agentKey, f.bob)); err == nil {
			t.Errorf("ann's sealed token opens as bob's")
		}
		if rt, err := box.Open(raw.Refresh, fmt.Sprintf("upstream-refresh:%s:%d", f.agentKey, f.ann)); err != nil || !strings.HasPrefix(string(rt), "rt-") {
			t.Errorf("open the refresh token = %q, %v", rt, err)
		}
		for user, want := range map[int64]string{f.ann: "ann-upstream", f.bob: "bob-upstream"} {
			tok, err := svc.Token(t.Context(), f.project, f.agentKey, user, r.base+"/mcp")
			if err != nil {
				t.Fatal(err)
			}
			if got := r.who(t, tok); got != want {
				t.Errorf("user %d's token is %s at the remote; want %s", user, got, want)
			}
		}
		if _, err := svc.Token(t.Context(), f.project+1, f.agentKey, f.ann, r.base+"/mcp"); !errors.Is(err, upstream.ErrNotConnected) {
			t.Errorf("Token in another project = %v; want ErrNotConnected", err)
		}
		list, err := svc.Accounts(t.Context(), store.UpstreamFilter{AgentKeyID: f.agentKey})
		if err != nil || len(list) != 2 || list[0].UserID != f.ann || list[1].UserID != f.bob || list[0].Resource != r.base+"/mcp" {
			t.Errorf("Accounts = %+v, %v", list, err)
		}
		if ok, err := svc.Disconnect(t.Context(), f.agentKey, f.bob); !ok || err != nil {
			t.Errorf("Disconnect = %v, %v; want true", ok, err)
		}
		if ok, _ := svc.Disconnect(t.Context(), f.agentKey, f.bob); ok {
			t.Errorf("a second Disconnect found an account")
		}
		if _, err := svc.Token(t.Context(), f.project, f.agentKey, f.bob, r.base+"/mcp"); !errors.Is(err, upstream.ErrNotConnected) {
			t.Errorf("Token after Disconnect = %v; want ErrNotConnected", err)
		}
		if got := svc.ConnectURL(f.agentKey); got != public+"/connect/key_linear" {
			t.Errorf("ConnectURL = %q", got)
		}
	})
}

// TestCompleteRefusesBadState: a state of another person, an expired one,
// one not made here, and an answer from another issuer are refused, each
// with a sentence that says why, and nothing is stored.
func TestCompleteRefusesBadState(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		r.set(func(r *remote) { r.issParam = true })
		f := newFixture(t, st)
		c := &clock{}
		svc := newService(st, keyFile(t, secrets.NewKey()), c)
		host := strings.TrimPrefix(r.base, "http://")
		begin := func() url.Values {
			authURL, err := svc.Begin(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp", "")
			if err != nil {
				t.Fatal(err)
			}
			return browse(t, authURL, "ann-upstream")
		}
		back := begin()
		_, err := svc.Complete(t.Context(), f.bob, back.Get("state"), back.Get("code"), back.Get("iss"))
		if want := "the connect link is not valid: another person started it; sign in as yourself and start connecting your " + host + " account again"; err == nil || err.Error() != want {
			t.Errorf("bob completing ann's = %v;\nwant %s", err, want)
		}
		if !errors.Is(err, upstream.ErrState) {
			t.Errorf("%v is not ErrState", err)
		}
		_, err = svc.Complete(t.Context(), f.ann, back.Get("state"), back.Get("code"), "https://evil.example")
		if want := "the answer came from another authorization server than the one of " + host; err == nil || err.Error() != want {
			t.Errorf("another iss = %v; want %s", err, want)
		}
		_, err = svc.Complete(t.Context(), f.ann, back.Get("state"), back.Get("code"), "")
		if want := "the authorization server of " + host + " sends its issuer with each answer, and this answer has none"; err == nil || err.Error() != want {
			t.Errorf("no iss = %v; want %s", err, want)
		}
		other := newService(st, keyFile(t, secrets.NewKey()), nil)
		_, err = other.Complete(t.Context(), f.ann, back.Get("state"), back.Get("code"), back.Get("iss"))
		if want := "the connect link is not valid: it was not made by this gateway (or with another secret key); start connecting again"; err == nil || err.Error() != want {
			t.Errorf("a state sealed elsewhere = %v; want %s", err, want)
		}
		c.advance(10*time.Minute + time.Second)
		_, err = svc.Complete(t.Context(), f.ann, back.Get("state"), back.Get("code"), back.Get("iss"))
		if want := "the connect link is not valid: it expired (a connect link lasts 10 minutes); start connecting your " + host + " account again"; err == nil || err.Error() != want {
			t.Errorf("an expired state = %v; want %s", err, want)
		}
		if list, _ := st.UpstreamAccounts(t.Context(), store.UpstreamFilter{}); len(list) != 0 {
			t.Errorf("accounts stored after refusals: %d", len(list))
		}
		// A code the upstream refuses: the message names the host and the
		// OAuth error only, never the answer's text.
		back = begin()
		_, err = svc.Complete(t.Context(), f.ann, back.Get("state"), "code-forged", back.Get("iss"))
		if want := "the authorization server of " + host + " refused: invalid_grant"; err == nil || err.Error() != want {
			t.Errorf("a forged code = %v; want %s", err, want)
		}
	})
}

// TestTokenRefreshesOnce: a token that expires within a minute is
// refreshed before it is handed out, once for 20 callers at the same time,
// and all of them get the new token.
func TestTokenRefreshesOnce(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		r.set(func(r *remote) { r.accessLife = 30 })
		f := newFixture(t, st)
		box := keyFile(t, secrets.NewKey())
		svc := newService(st, box, nil)
		connect(t, svc, f, r, f.ann, "ann-upstream")
		before, _ := st.UpstreamAccount(t.Context(), f.agentKey, f.ann) // expires in 30 s: within the minute
		old, err := box.Open(before.Access, fmt.Sprintf("upstream-access:%s:%d", f.agentKey, f.ann))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		got := make([]string, 20)
		errs := make([]error, 20)
		for i := range got {
			wg.Go(func() { got[i], errs[i] = svc.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp") })
		}
		wg.Wait()
		for i := range got {
			if errs[i] != nil || got[i] != got[0] {
				t.Fatalf("caller %d got %q, %v; caller 0 %q", i, got[i], errs[i], got[0])
			}
		}
		if got[0] == string(old) || r.who(t, got[0]) != "ann-upstream" {
			t.Errorf("the token after the refresh %q (before %q) is %s at the remote", got[0], old, r.who(t, got[0]))
		}
		if n := r.count(func(r *remote) int { return r.refreshes }); n != 1 {
			t.Errorf("%d refreshes for 20 callers; want 1", n)
		}
		after, _ := st.UpstreamAccount(t.Context(), f.agentKey, f.ann)
		if after.Version != before.Version+2 || time.Until(after.ExpiresAt) < 30*time.Minute {
			t.Errorf("version %d → %d, expires in %s; want the claim and one refresh, good for an hour", before.Version, after.Version, time.Until(after.ExpiresAt))
		}
	})
}

// TestTwoGatewaysRefreshAtOnce: two gateways on one store refresh one
// account at the same moment; only one asks the authorization server
// (whose refresh tokens rotate, and a second use of one revokes the grant:
// two asking lost the account), and both hand out its token.
func TestTwoGatewaysRefreshAtOnce(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		r.set(func(r *remote) { r.accessLife = 30 })
		f := newFixture(t, st)
		box := keyFile(t, secrets.NewKey())
		a, b := newService(st, box, nil), newService(st, box, nil)
		connect(t, a, f, r, f.ann, "ann-upstream")
		before, _ := st.UpstreamAccount(t.Context(), f.agentKey, f.ann)
		r.set(func(r *remote) { r.slowRefresh = 300 * time.Millisecond })
		var ta, tb string
		var ea, eb error
		var wg sync.WaitGroup
		wg.Go(func() { ta, ea = a.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp") })
		wg.Go(func() { tb, eb = b.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp") })
		wg.Wait()
		if ea != nil || eb != nil || ta != tb {
			t.Fatalf("gateway A got %q, %v; B %q, %v; want one token", ta, ea, tb, eb)
		}
		if who := r.who(t, ta); who != "ann-upstream" {
			t.Errorf("the token is %s at the remote", who)
		}
		if n := r.count(func(r *remote) int { return r.refreshes }); n != 1 {
			t.Errorf("%d refreshes honoured; want 1", n)
		}
		if n := r.count(func(r *remote) int { return r.refreshAsk }); n != 1 {
			t.Errorf("%d refresh requests; want 1", n)
		}
		after, _ := st.UpstreamAccount(t.Context(), f.agentKey, f.ann)
		if after.Version != before.Version+2 {
			t.Errorf("version %d → %d; want the claim and the refreshed tokens", before.Version, after.Version)
		}
	})
}

// TestPrunedClientRegistersAnew: the first person to open the connect
// link gave up; a day later the authorization server has deleted the
// client nobody used. The next person's connect registers a new client
// instead of sending them to the server's "unknown client" page.
func TestPrunedClientRegistersAnew(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		f := newFixture(t, st)
		c := &clock{}
		svc := newService(st, keyFile(t, secrets.NewKey()), c)
		if _, err := svc.Begin(t.Context(), f.project, f.agentKey, f.bob, r.base+"/mcp", ""); err != nil {
			t.Fatal(err)
		}
		c.advance(24 * time.Hour)
		r.set(func(r *remote) { clear(r.clients) }) // pruned at the remote
		connect(t, svc, f, r, f.ann, "ann-upstream")
		if n := r.count(func(r *remote) int { return r.registered }); n != 2 {
			t.Errorf("%d registrations; want 2 (the pruned client registered anew)", n)
		}
		// A client that holds an account is kept, however old.
		c.advance(24 * time.Hour)
		if _, err := svc.Begin(t.Context(), f.project, f.agentKey, f.bob, r.base+"/mcp", ""); err != nil {
			t.Fatal(err)
		}
		if n := r.count(func(r *remote) int { return r.registered }); n != 2 {
			t.Errorf("%d registrations after a connect by a client in use; want 2", n)
		}
	})
}

// TestInvalidClientReconnects: a refresh answered invalid_client (the
// server deleted the gateway's client) drops the account, and the next
// connect registers anew.
func TestInvalidClientReconnects(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		r.set(func(r *remote) { r.accessLife = 30 })
		f := newFixture(t, st)
		svc := newService(st, keyFile(t, secrets.NewKey()), nil)
		connect(t, svc, f, r, f.ann, "ann-upstream")
		r.set(func(r *remote) { clear(r.clients) })
		if _, err := svc.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp"); !errors.Is(err, upstream.ErrReconnect) {
			t.Fatalf("Token with the client gone = %v; want ErrReconnect", err)
		}
		connect(t, svc, f, r, f.ann, "ann-upstream")
		tok, err := svc.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp")
		if err != nil || r.who(t, tok) != "ann-upstream" {
			t.Errorf("ann's token after connecting again is %s at the remote (%v)", r.who(t, tok), err)
		}
		if n := r.count(func(r *remote) int { return r.registered }); n != 2 {
			t.Errorf("%d registrations; want 2", n)
		}
	})
}

// TestInvalidGrantReconnects: when the upstream refuses the refresh token
// the account is deleted and the person is told to connect again.
func TestInvalidGrantReconnects(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		r.set(func(r *remote) { r.accessLife = 30 })
		f := newFixture(t, st)
		var log syncBuffer
		svc := upstream.New(upstream.Options{Store: st, Box: keyFile(t, secrets.NewKey()), PublicURL: func() string { return public },
			Egress: egress.Policy{AllowLoopback: true}, Log: slog.New(slog.NewTextHandler(&log, nil))})
		connect(t, svc, f, r, f.ann, "ann-upstream")
		r.set(func(r *remote) { clear(r.refresh) }) // an administrator signed ann out upstream
		defer func() {
			// The refusal's description echoes the refresh token: the log
			// says the code only.
			if l := log.String(); strings.Contains(l, "at-") || strings.Contains(l, "rt-") || strings.Contains(l, "secret-") ||
				!strings.Contains(l, "upstream: account dropped; the person must connect again") {
				t.Errorf("the log holds a token or a secret, or not the drop:\n%s", l)
			}
		}()
		_, err := svc.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp")
		host := strings.TrimPrefix(r.base, "http://")
		if want := "the upstream account needs connecting again: the authorization server of " + host + " refused: invalid_grant"; !errors.Is(err, upstream.ErrReconnect) || err.Error() != want {
			t.Errorf("Token = %v;\nwant %s", err, want)
		}
		if _, err := st.UpstreamAccount(t.Context(), f.agentKey, f.ann); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the account after invalid_grant: %v; want it gone", err)
		}
		if _, err := svc.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp"); !errors.Is(err, upstream.ErrNotConnected) {
			t.Errorf("Token then = %v; want ErrNotConnected", err)
		}
	})
}

// TestRefreshAfter401: Refresh with the token the remote refused gets a
// new one; with a token already replaced it hands out the current one
// without refreshing.
func TestRefreshAfter401(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		f := newFixture(t, st)
		svc := newService(st, keyFile(t, secrets.NewKey()), nil)
		connect(t, svc, f, r, f.ann, "ann-upstream")
		stale, _ := svc.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp")
		fresh, err := svc.Refresh(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp", stale)
		if err != nil || fresh == stale || r.who(t, fresh) != "ann-upstream" {
			t.Fatalf("Refresh = %q, %v (stale %q)", fresh, err, stale)
		}
		again, err := svc.Refresh(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp", stale)
		if err != nil || again != fresh {
			t.Errorf("Refresh with an old stale token = %q, %v; want the current %q", again, err, fresh)
		}
		if n := r.count(func(r *remote) int { return r.refreshes }); n != 1 {
			t.Errorf("%d refreshes; want 1", n)
		}
	})
}

// TestResealAfterRotation: with a new key first in the key file, Reseal
// seals the access and refresh tokens and the client secret again; then
// the old key can go and everything still opens.
func TestResealAfterRotation(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		f := newFixture(t, st)
		k1, k2 := secrets.NewKey(), secrets.NewKey()
		connect(t, newService(st, keyFile(t, k1), nil), f, r, f.ann, "ann-upstream")

		// Bob's account was sealed with a key the file no longer has: it
		// stays as it is, and the others are sealed again all the same.
		lost := keyFile(t, secrets.NewKey())
		bob := store.UpstreamAccount{ProjectID: f.project, AgentKeyID: f.agentKey, UserID: f.bob, Resource: r.base + "/mcp",
			Access: lost.Seal([]byte("at-lost"), fmt.Sprintf("upstream-access:%s:%d", f.agentKey, f.bob)), ClientID: "client-1"}
		if err := st.PutUpstreamAccount(t.Context(), bob); err != nil {
			t.Fatal(err)
		}
		rotated := newService(st, keyFile(t, k2, k1), nil)
		n, err := rotated.Reseal(t.Context())
		if want := fmt.Sprintf("reseal: 1 sealed values open with no key of the secret key file, and stay as they are (the first: reseal the %s account of user %d: %v)",
			strings.TrimPrefix(r.base, "http://"), f.bob, secrets.ErrOpen); n != 3 || err == nil || err.Error() != want {
			t.Errorf("Reseal = %d, %v;\nwant 3 (access, refresh, client secret), %s", n, err, want)
		}
		if _, err := rotated.Disconnect(t.Context(), f.agentKey, f.bob); err != nil {
			t.Fatal(err)
		}
		if n, err := rotated.Reseal(t.Context()); n != 0 || err != nil {
			t.Errorf("Reseal again = %d, %v; want 0", n, err)
		}
		onlyNew := newService(st, keyFile(t, k2), nil)
		stale, err := onlyNew.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp")
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := onlyNew.Refresh(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp", stale) // opens the refresh token and client secret
		if err != nil || r.who(t, fresh) != "ann-upstream" {
			t.Errorf("Refresh with the new key only = %q, %v", fresh, err)
		}
	})
}

// TestDialRule: the gateway never dials link-local (cloud metadata),
// unspecified or multicast addresses, nor loopback ones unless allowed.
func TestDialRule(t *testing.T) {
	st := teststores.SQLite(t)
	f := newFixture(t, st)
	r := newRemote(t)
	box := keyFile(t, secrets.NewKey())
	strict := upstream.New(upstream.Options{Store: st, Box: box, PublicURL: func() string { return public }, Log: quiet})
	loose := newService(st, box, nil)
	for _, c := range []struct {
		svc      *upstream.Service
		resource string
		want     string
	}{
		{strict, r.base + "/mcp", "the upstream address 127.0.0.1 is loopback; the gateway dials one only with --upstream-allow-loopback"},
		{loose, "http://169.254.169.254/mcp", "the upstream address 169.254.169.254 is link-local; the gateway never dials one"},
		{strict, "http://169.254.169.254/latest/meta-data", "the upstream address 169.254.169.254 is link-local; the gateway never dials one"},
		{loose, "http://0.0.0.0:80/mcp", "the upstream address 0.0.0.0 is unspecified; the gateway never dials one"},
		{loose, "http://224.0.0.1:80/mcp", "the upstream address 224.0.0.1 is multicast; the gateway never dials one"},
	} {
		_, err := c.svc.Begin(t.Context(), f.project, f.agentKey, f.ann, c.resource, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Begin(%s) = %v; want it refused: %s", c.resource, err, c.want)
		}
	}
	if _, err := loose.Begin(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp", ""); err != nil {
		t.Errorf("Begin on loopback with AllowLoopback = %v", err)
	}
}

// TestNoRefreshToken: an account without a refresh token serves its token
// while it lasts; when the remote refuses it the person must connect
// again.
func TestNoRefreshToken(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		r.set(func(r *remote) { r.noRefresh = true })
		f := newFixture(t, st)
		svc := newService(st, keyFile(t, secrets.NewKey()), nil)
		a := connect(t, svc, f, r, f.ann, "ann-upstream")
		if a.Refresh != nil {
			t.Errorf("a refresh token was stored: %d bytes", len(a.Refresh))
		}
		tok, err := svc.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp")
		if err != nil || r.who(t, tok) != "ann-upstream" {
			t.Fatalf("Token = %q, %v", tok, err)
		}
		_, err = svc.Refresh(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp", tok)
		if want := "the upstream account needs connecting again: the remote refused the token and there is no refresh token"; !errors.Is(err, upstream.ErrReconnect) || err.Error() != want {
			t.Errorf("Refresh = %v; want %s", err, want)
		}
		if list, _ := svc.Accounts(t.Context(), store.UpstreamFilter{UserID: f.ann}); len(list) != 0 {
			t.Errorf("accounts left: %+v", list)
		}
	})
}

// TestBeginOnAnOpenRemote: a remote that does not ask for a sign-in has no
// account to connect, and Begin says so.
func TestBeginOnAnOpenRemote(t *testing.T) {
	st := teststores.SQLite(t)
	f := newFixture(t, st)
	open := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "{}") }))
	defer open.Close()
	svc := newService(st, keyFile(t, secrets.NewKey()), nil)
	_, err := svc.Begin(t.Context(), f.project, f.agentKey, f.ann, open.URL+"/mcp", "")
	if want := strings.TrimPrefix(open.URL, "http://") + " did not ask for a sign-in: there is no account to connect"; err == nil || err.Error() != want {
		t.Errorf("Begin = %v; want %s", err, want)
	}
}

// TestClientReplacedReconnects: when the client that holds an account's
// grant is replaced (the remote moved to another authorization server),
// the account cannot be refreshed: the person connects again.
func TestClientReplacedReconnects(t *testing.T) {
	each(t, func(t *testing.T, st store.Store) {
		r := newRemote(t)
		f := newFixture(t, st)
		svc := newService(st, keyFile(t, secrets.NewKey()), nil)
		connect(t, svc, f, r, f.ann, "ann-upstream")
		cs, _ := st.UpstreamClients(t.Context())
		if len(cs) != 1 {
			t.Fatalf("%d clients kept", len(cs))
		}
		cs[0].ClientID = "client-elsewhere"
		if err := st.PutUpstreamClient(t.Context(), cs[0]); err != nil {
			t.Fatal(err)
		}
		stale, _ := svc.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp")
		_, err := svc.Refresh(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp", stale)
		want := "the upstream account needs connecting again: the gateway no longer has the client that connected the account at " + strings.TrimPrefix(r.base, "http://")
		if !errors.Is(err, upstream.ErrReconnect) || err.Error() != want {
			t.Errorf("Refresh = %v;\nwant %s", err, want)
		}
		if _, err := svc.Token(t.Context(), f.project, f.agentKey, f.ann, r.base+"/mcp"); !errors.Is(err, upstream.ErrNotConnected) {
			t.Errorf("Token then = %v; want ErrNotConnected", err)
		}
	})
}
