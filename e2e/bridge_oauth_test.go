package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/bridge"
)

// oauthServer is a small loopback OAuth 2.1 authorization server in front
// of a go-sdk MCP server, as the MCP authorization spec describes one:
// protected resource metadata, authorization server metadata, dynamic
// client registration, an authorization endpoint that approves at once
// (the "person" is the test), PKCE S256 checked at the token endpoint,
// refresh tokens. Access tokens live one second, so every use after the
// first refreshes. It stands in for the gateway's own OAuth server, which
// is another branch's work.
type oauthServer struct {
	srv *httptest.Server

	mu         sync.Mutex
	clients    map[string]string // client_id → redirect URI
	codes      map[string]string // code → code_challenge
	access     map[string]bool
	refresh    map[string]bool
	n          int
	refreshes  int
	registered int // dynamic registrations
}

// cimdURL is the Client ID Metadata Document URL the CIMD test signs in
// with; the test server takes it as a client id without fetching it.
const cimdURL = "https://bridge.example/spacefix-bridge.json"

func newOAuthServer(t *testing.T, cimd bool) *oauthServer {
	o := &oauthServer{clients: map[string]string{}, codes: map[string]string{}, access: map[string]bool{}, refresh: map[string]bool{}}
	mux := http.NewServeMux()
	o.srv = httptest.NewServer(mux)
	t.Cleanup(o.srv.Close)
	base := o.srv.URL
	mcpServer := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "9.9.9"}, nil)
	mcp.AddTool(mcpServer, &mcp.Tool{Name: "whoami", Description: "Say who the caller is."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "signed in"}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpServer }, nil)
	t.Cleanup(func() { // sessions whose client could not say goodbye (revoked tokens)
		for ss := range mcpServer.Sessions() {
			ss.Close()
		}
	})
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if !o.access[token] {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Scopes: []string{"mcp"}, Expiration: time.Now().Add(time.Hour)}, nil
	}
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: base + "/.well-known/oauth-protected-resource/mcp"})(handler))
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: base + "/mcp", AuthorizationServers: []string{base}, ScopesSupported: []string{"mcp"}}))
	// The same server over the legacy SSE transport, behind the same OAuth.
	sse := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return mcpServer }, nil)
	mux.Handle("/sse", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: base + "/.well-known/oauth-protected-resource/sse"})(sse))
	mux.Handle("/.well-known/oauth-protected-resource/sse", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: base + "/sse", AuthorizationServers: []string{base}, ScopesSupported: []string{"mcp"}}))
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
			"registration_endpoint": base + "/register", "code_challenge_methods_supported": []string{"S256"},
			"response_types_supported": []string{"code"}, "grant_types_supported": []string{"authorization_code", "refresh_token"},
			"token_endpoint_auth_methods_supported": []string{"none"}, "scopes_supported": []string{"mcp", "offline_access"},
			"client_id_metadata_document_supported": cimd,
		})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			RedirectURIs []string `json:"redirect_uris"`
		}
		json.NewDecoder(r.Body).Decode(&m)
		o.mu.Lock()
		o.n++
		o.registered++
		id := fmt.Sprintf("client-%d", o.n)
		o.clients[id] = m.RedirectURIs[0]
		o.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"client_id": id, "redirect_uris": m.RedirectURIs, "token_endpoint_auth_method": "none"})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		o.mu.Lock()
		redirect, ok := o.clients[q.Get("client_id")]
		if cimd && q.Get("client_id") == cimdURL && strings.HasPrefix(q.Get("redirect_uri"), "http://127.0.0.1:") {
			redirect, ok = q.Get("redirect_uri"), true // a loopback redirect matches on any port
		}
		o.n++
		code := fmt.Sprintf("code-%d", o.n)
		o.codes[code] = q.Get("code_challenge")
		o.mu.Unlock()
		if !ok || redirect != q.Get("redirect_uri") || q.Get("code_challenge_method") != "S256" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, redirect+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		o.mu.Lock()
		defer o.mu.Unlock()
		switch r.Form.Get("grant_type") {
		case "authorization_code":
			sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
			if want, ok := o.codes[r.Form.Get("code")]; !ok || want != base64.RawURLEncoding.EncodeToString(sum[:]) {
				o.tokenError(w, "invalid_grant")
				return
			}
			delete(o.codes, r.Form.Get("code"))
		case "refresh_token":
			if !o.refresh[r.Form.Get("refresh_token")] {
				o.tokenError(w, "invalid_grant")
				return
			}
			// The MCP spec wants the resource in every token request.
			if res := r.Form.Get("resource"); res != base+"/mcp" && res != base+"/sse" {
				o.tokenError(w, "invalid_target")
				return
			}
			o.refreshes++
		default:
			o.tokenError(w, "unsupported_grant_type")
			return
		}
		o.n++
		at, rt := fmt.Sprintf("at-%d", o.n), fmt.Sprintf("rt-%d", o.n)
		o.access[at], o.refresh[rt] = true, true
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": 1, "refresh_token": rt, "scope": "mcp"})
	})
	return o
}

func (o *oauthServer) tokenError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]string{"error": code})
}

// revokeAll forgets every token, as an administrator signing a user out.
func (o *oauthServer) revokeAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.access)
	clear(o.refresh)
}

func (o *oauthServer) refreshCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refreshes
}

// TestBridgeOAuth signs in to a remote server behind OAuth as a person
// would (`spacefix bridge login`: the URL printed, the browser's visit, the
// redirect taken on a loopback port), then bridges it: calls work, the
// short-lived token is refreshed and saved, the token file is readable by
// its owner only, and when the authorization server forgets the tokens the
// bridge says that a person must sign in again, and how.
func TestBridgeOAuth(t *testing.T) {
	t.Parallel()
	o := newOAuthServer(t, false)
	e := newEnv(t)
	dir := t.TempDir()
	srv := bridge.Server{Name: "prot", URL: o.srv.URL + "/mcp"}

	b, err := bridge.New(srv, bridge.Options{GatewayURL: e.url, APIKey: e.agentKey, TokenDir: dir})
	must(t, err)

	out := &syncBuffer{}
	loginThrough(t, b, o.srv.URL+"/authorize?", nil, out)
	path := filepath.Join(dir, "prot.json")
	if !strings.Contains(out.String(), `Signed in to "prot". The tokens are in `+path) {
		t.Errorf("login output:\n%s", out)
	}
	fi, err := os.Stat(path)
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}

	br := e.startBridge(srv, bridge.Options{TokenDir: dir, KeepAlive: 200 * time.Millisecond})
	cs := e.connect("2025-11-25", e.clientKey, nil)
	if r := call(t, cs, "prot__whoami", nil); r.IsError || text(r) != "signed in" {
		t.Errorf("whoami = %v %q", r.IsError, text(r))
	}
	waitFor(t, "a refresh", func() bool { return o.refreshCount() > 0 })
	br.waitLog(t, "OAuth token refreshed")
	saved, _ := os.ReadFile(path)
	if strings.Contains(br.log.String(), "at-") || strings.Contains(br.log.String(), "rt-") {
		t.Errorf("the bridge's log holds a token")
	}

	o.revokeAll()
	br.waitLog(t, "a person must sign in: run `spacefix bridge login prot`")
	waitFor(t, "prot's tools to go", func() bool { return !slices.Contains(toolNames(t, cs), "prot__whoami") })
	if now, _ := os.ReadFile(path); string(now) == "" || len(saved) == 0 {
		t.Errorf("the token file was emptied")
	}
}

// TestBridgeLoginCLI runs `spacefix bridge login NAME --remote URL
// --client-id URL` as a person does against an authorization server that
// takes Client ID Metadata Documents: it prints the URL, the browser visits
// it, the command saves the tokens under $XDG_CONFIG_HOME/spacefix/bridge
// with the document's URL as client id (no dynamic registration) and
// exits 0.
func TestBridgeLoginCLI(t *testing.T) {
	t.Parallel()
	o := newOAuthServer(t, true)
	home := t.TempDir()
	cmd := exec.Command(binary(t, "../cmd/spacefix"), "bridge", "login", "prot", "--remote", o.srv.URL+"/mcp", "--client-id", cimdURL)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+home)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = logOutput()
	must(t, cmd.Start())
	p := &proc{cmd: cmd, done: make(chan struct{})}
	t.Cleanup(p.kill)
	var printed strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		printed.WriteString(line + "\n")
		if strings.HasPrefix(line, o.srv.URL+"/authorize?") {
			resp, err := http.Get(line)
			must(t, err)
			resp.Body.Close()
		}
	}
	go func() { cmd.Wait(); close(p.done) }()
	p.wait(t)
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("login exited %d:\n%s", code, printed.String())
	}
	path := filepath.Join(home, "spacefix", "bridge", "prot.json")
	if !strings.Contains(printed.String(), "Open this URL in a browser to sign in to \"prot\":") ||
		!strings.Contains(printed.String(), "Signed in to \"prot\". The tokens are in "+path) {
		t.Errorf("login printed:\n%s", printed.String())
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v %v", fi, err)
	}
	saved, _ := os.ReadFile(path)
	var f struct{ ClientID string }
	json.Unmarshal(saved, &f)
	o.mu.Lock()
	registered := o.registered
	o.mu.Unlock()
	if f.ClientID != cimdURL || registered != 0 {
		t.Errorf("client id %q after %d dynamic registrations; want the metadata document's URL and none", f.ClientID, registered)
	}
}

// TestBridgeOAuthIntoSpacefix bridges one Spacefix project into another:
// the bridge is an OAuth client of the first gateway's own authorization
// server (dynamic registration, the person's consent on its dashboard,
// PKCE), and the first project's tools are called through the second
// gateway.
func TestBridgeOAuthIntoSpacefix(t *testing.T) {
	t.Parallel()
	up := newEnv(t)
	up.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOAuthTools(a)) })
	p := newPerson(t, up, "ops@example.com")
	p.access.Store("read")
	down := newEnv(t)
	dir := t.TempDir()
	srv := bridge.Server{Name: "shop", URL: up.url + "/mcp"}
	b, err := bridge.New(srv, bridge.Options{GatewayURL: down.url, APIKey: down.agentKey, TokenDir: dir})
	must(t, err)

	// The person allows reading on the first gateway's dashboard; the
	// browser goes back to the bridge.
	loginThrough(t, b, up.url+"/oauth/authorize?", func(authURL string) (string, error) {
		back, err := p.consent(authURL, "approve")
		if err != nil {
			return "", err
		}
		return back.String(), nil
	}, io.Discard)

	e := down
	e.startBridge(srv, bridge.Options{TokenDir: dir})
	cs := e.connect("2025-11-25", e.clientKey, nil)
	waitFor(t, "the first project's read tools through the bridge", func() bool {
		return slices.Contains(toolNames(t, cs), "shop__get_order")
	})
	if got := strings.Join(toolNames(t, cs), ","); got != "shop__get_order,shop__search_orders" {
		t.Errorf("tools through a read-only grant = %s; want the read tools only", got)
	}
	if r := call(t, cs, "shop__get_order", map[string]any{"id": "1042"}); r.IsError || !strings.Contains(text(r), `"customer":"ada"`) {
		t.Errorf("shop__get_order = %v %q", r.IsError, text(r))
	}
	grants, _ := up.store.OAuthGrants(context.Background(), up.project.ID)
	if len(grants) != 1 || grants[0].Scope != "mcp:read" || grants[0].UserEmail != "ops@example.com" {
		t.Errorf("the first gateway's connected apps = %+v; want the bridge, read only, approved by ops", grants)
	}
}

// TestBridgeOAuthLegacySSE: a server that speaks only the legacy SSE
// transport, behind OAuth: the bridge signs in as for Streamable HTTP and
// sends the token (refreshed as needed) on the SSE stream and its posts.
func TestBridgeOAuthLegacySSE(t *testing.T) {
	t.Parallel()
	o := newOAuthServer(t, false)
	e := newEnv(t)
	dir := t.TempDir()
	srv := bridge.Server{Name: "old", URL: o.srv.URL + "/sse"}

	b, err := bridge.New(srv, bridge.Options{GatewayURL: e.url, APIKey: e.agentKey, TokenDir: dir})
	must(t, err)
	loginThrough(t, b, o.srv.URL+"/authorize?", nil, io.Discard)

	br := e.startBridge(srv, bridge.Options{TokenDir: dir})
	br.waitLog(t, `transport=sse`)
	cs := e.connect("2025-11-25", e.clientKey, nil)
	waitFor(t, "the SSE server's tool", func() bool { return slices.Contains(toolNames(t, cs), "old__whoami") })
	if r := call(t, cs, "old__whoami", nil); r.IsError || text(r) != "signed in" {
		t.Errorf("whoami over legacy SSE = %v %q", r.IsError, text(r))
	}
	waitFor(t, "a refresh", func() bool { return o.refreshCount() > 0 })
	if r := call(t, cs, "old__whoami", nil); r.IsError || text(r) != "signed in" {
		t.Errorf("whoami after a refresh = %v %q", r.IsError, text(r))
	}
}

// loginThrough runs spacefix bridge login as a person would: the browser
// opens the authorization URL the bridge prints (it starts with
// authorize), consent (nil: the server approves at once, following
// redirects) turns it into the URL that leads back to the bridge, and the
// bridge's page must say the person is signed in. The bridge's output
// also goes to out.
func loginThrough(t *testing.T, b *bridge.Bridge, authorize string, consent func(authURL string) (string, error), out io.Writer) {
	t.Helper()
	if consent == nil {
		consent = func(u string) (string, error) { return u, nil }
	}
	pr, pw := io.Pipe()
	browsed := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if !strings.HasPrefix(line, authorize) {
				continue
			}
			back, err := consent(line)
			if err == nil {
				var resp *http.Response
				if resp, err = http.Get(back); err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if !strings.Contains(string(body), "Signed in. You can close this tab") {
						err = fmt.Errorf("callback page: %d %s", resp.StatusCode, body)
					}
				}
			}
			browsed <- err
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(t, b.Login(ctx, bridge.LoginOptions{Out: io.MultiWriter(out, pw)}))
	pw.Close()
	must(t, <-browsed)
}
