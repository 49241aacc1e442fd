package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/dashboard"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/users"
)

// person is someone signed in to the dashboard who approves OAuth sign-ins,
// as a browser would: GET the consent page, POST the form.
type person struct {
	t       *testing.T
	e       *env
	session string
	access  atomic.Value // "read" or "write": what the next approval allows
	asked   atomic.Int32 // consent pages seen
	lastURL atomic.Value // the last authorization URL
}

func newPerson(t *testing.T, e *env, email string) *person {
	t.Helper()
	return newUser(t, e, email, true)
}

// newUser is newPerson with or without the instance admin flag.
func newUser(t *testing.T, e *env, email string, admin bool) *person {
	t.Helper()
	u, err := e.store.CreateUser(context.Background(), store.User{Email: email, Admin: admin}, users.HashPassword("correct horse battery"))
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := users.NewSession(context.Background(), e.store, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	p := &person{t: t, e: e, session: tok}
	p.access.Store("write")
	return p
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// consent approves (or with decision "deny", declines) the authorization
// request at authURL and returns where the gateway sends the browser.
func (p *person) consent(authURL, decision string) (*url.URL, error) {
	p.asked.Add(1)
	p.lastURL.Store(authURL)
	req, _ := http.NewRequest("GET", authURL, nil)
	req.AddCookie(&http.Cookie{Name: dashboard.SessionCookieName(p.e.gw.URL()), Value: p.session})
	resp, err := noRedirects.Do(req)
	if err != nil {
		return nil, err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "unverified") {
		return nil, fmt.Errorf("consent page: %s\n%s", resp.Status, page)
	}
	u, _ := url.Parse(authURL)
	form := u.Query()
	form.Set("project", p.e.project.Name)
	form.Set("access", p.access.Load().(string))
	form.Set("decision", decision)
	req, _ = http.NewRequest("POST", p.e.url+"/oauth/authorize", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: dashboard.SessionCookieName(p.e.gw.URL()), Value: p.session})
	resp, err = noRedirects.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("consent POST: %s", resp.Status)
	}
	return url.Parse(resp.Header.Get("Location"))
}

// fetcher is go-sdk's hook for "open the browser and wait for the redirect".
func (p *person) fetcher(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	back, err := p.consent(args.URL, "approve")
	if err != nil {
		return nil, err
	}
	q := back.Query()
	if q.Get("error") != "" {
		return nil, fmt.Errorf("authorization refused: %s: %s", q.Get("error"), q.Get("error_description"))
	}
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}

const oauthRedirect = "http://127.0.0.1:53682/callback"

// oauthClient connects go-sdk's client to the gateway with OAuth: dynamic
// registration, the person's consent, PKCE, tokens.
func (p *person) oauthClient(v string) (*mcp.ClientSession, error) {
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "e2e-app", RedirectURIs: []string{oauthRedirect}, TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		}},
		RedirectURL:              oauthRedirect,
		AuthorizationCodeFetcher: p.fetcher,
	})
	if err != nil {
		return nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-oauth", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: p.e.url + "/mcp", OAuthHandler: h}
	cs, err := client.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: v})
	if err == nil {
		p.t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func addOAuthTools(a *core.Agent) error {
	if err := addOrderTools(a); err != nil {
		return err
	}
	return core.AddTool(a, "cancel_order", "Cancel an order.", func(ctx context.Context, in GetOrderInput) (string, error) {
		return "cancelled " + in.ID, nil
	})
}

// TestOAuthDiscovery: a client without credentials learns where to sign in.
func TestOAuthDiscovery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	resp, err := http.Post(e.url+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := fmt.Sprintf(`Bearer resource_metadata="%s/.well-known/oauth-protected-resource/mcp", scope="mcp:read mcp:write"`, e.url)
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != want {
		t.Errorf("POST /mcp without credentials = %d, WWW-Authenticate %q; want 401 and %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
	}
	// A wrong key says so, with the challenge too; a good one has none.
	req, _ := http.NewRequest("POST", e.url+"/mcp", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer sfx_client_wrong")
	resp, _ = http.DefaultClient.Do(req)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != want || !strings.Contains(string(body), "Unknown or revoked client key") {
		t.Errorf("wrong key = %d %q %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
	}

	ctx := context.Background()
	prm, err := oauthex.GetProtectedResourceMetadata(ctx, e.url+"/.well-known/oauth-protected-resource/mcp", e.url+"/mcp", http.DefaultClient)
	if err != nil || prm.Resource != e.url+"/mcp" || len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != e.url {
		t.Fatalf("protected resource metadata = %+v, %v", prm, err)
	}
	asm, err := auth.GetAuthServerMetadata(ctx, e.url, http.DefaultClient)
	if err != nil || asm.Issuer != e.url || asm.RegistrationEndpoint != e.url+"/oauth/register" ||
		fmt.Sprint(asm.CodeChallengeMethodsSupported) != "[S256]" || !asm.ClientIDMetadataDocumentSupported {
		t.Errorf("authorization server metadata = %+v, %v", asm, err)
	}
	for _, p := range []string{"/.well-known/openid-configuration", "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(e.url + p)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("GET %s = %v, %v", p, resp, err)
		}
		resp.Body.Close()
	}
}

// TestOAuthPublicURL: behind a proxy, every URL the gateway gives out is
// the public one.
func TestOAuthPublicURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) {
		o.config = func(c *gateway.Config) { c.PublicURL = "https://mcp.example.com"; c.AllowedHosts = []string{"*"} }
	})
	listen := "http://" + e.gw.Addr()
	resp, err := http.Post(listen+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); got != `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:read mcp:write"` {
		t.Errorf("challenge behind a public URL = %s", got)
	}
	resp, err = http.Get(listen + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if m["issuer"] != "https://mcp.example.com" || m["token_endpoint"] != "https://mcp.example.com/oauth/token" {
		t.Errorf("metadata behind a public URL = %v", m)
	}
}

// TestOAuthGoClient: go-sdk's client signs in (dynamic registration, the
// person's consent, PKCE), lists and calls tools; the person sees the app
// under Connected apps and disconnects it; the client must sign in again.
func TestOAuthGoClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOAuthTools(a)) })
	_, apiToken, err := users.CreateAPIToken(context.Background(), e.store, "e2e", 0)
	must(t, err)
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			p := newPerson(t, e, "ada-"+v+"@example.com")
			cs, err := p.oauthClient(v)
			if err != nil {
				t.Fatalf("connect with OAuth: %v", err)
			}
			if n := p.asked.Load(); n != 1 {
				t.Errorf("consent pages = %d; want 1", n)
			}
			authURL, _ := url.Parse(p.lastURL.Load().(string))
			if q := authURL.Query(); q.Get("resource") != e.url+"/mcp" || q.Get("code_challenge_method") != "S256" {
				t.Errorf("authorization request %s; want resource %s/mcp and S256", authURL, e.url)
			}
			if got := toolNames(t, cs); strings.Join(got, ",") != "cancel_order,get_order,search_orders" {
				t.Errorf("tools = %v", got)
			}
			if got := text(call(t, cs, "cancel_order", map[string]any{"id": "1042"})); got != "cancelled 1042" {
				t.Errorf("cancel_order = %q", got)
			}

			// The person's Connected apps list it, with its last use.
			var apps []map[string]any
			apiGet(t, e, apiToken, "/api/projects/default/apps", &apps)
			var app map[string]any
			for _, a := range apps {
				if a["approvedBy"] == "ada-"+v+"@example.com" {
					app = a
				}
			}
			if app == nil || app["client"] != "e2e-app" || app["readOnly"] != false {
				t.Fatalf("connected apps = %v; want e2e-app approved by ada", apps)
			}
			waitFor(t, "the app's last use to be recorded", func() bool {
				g, err := e.store.OAuthGrant(context.Background(), app["id"].(string))
				return err == nil && !g.LastUsedAt.IsZero()
			})
			// The call log names the app's grant as the key.
			waitFor(t, "the call in the log", func() bool {
				for _, c := range e.calls() {
					if c.KeyID == app["id"] && c.Name == "cancel_order" {
						return true
					}
				}
				return false
			})

			// Disconnected: the token stops working at once.
			apiPost(t, e, apiToken, "/api/projects/default/apps/"+app["id"].(string)+"/revoke", http.StatusNoContent)
			if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_order", Arguments: map[string]any{"id": "1"}}); err == nil && v != "2026-07-28" {
				t.Errorf("a call in the disconnected app's session succeeded")
			}
			if v == "2026-07-28" {
				// Stateless: go-sdk saw the 401 and signed in again.
				if n := p.asked.Load(); n != 2 {
					t.Errorf("consent pages after the disconnect = %d; want 2 (signed in again)", n)
				}
			}
		})
	}
}

// TestOAuthReadScope: a token with only mcp:read sees and calls only tools
// that read, like a read-only key; a call to a tool that writes gets 403
// insufficient_scope, and go-sdk steps up (stateless protocol).
func TestOAuthReadScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOAuthTools(a)) })
	p := newPerson(t, e, "bo@example.com")
	p.access.Store("read")
	cs, err := p.oauthClient("2026-07-28")
	if err != nil {
		t.Fatal(err)
	}
	if got := toolNames(t, cs); strings.Join(got, ",") != "get_order,search_orders" {
		t.Errorf("tools of an mcp:read token = %v; want the read tools only", got)
	}

	// The raw answer to a write call, as any client sees it.
	grants, _ := e.store.OAuthGrants(context.Background(), e.project.ID)
	if len(grants) != 1 || grants[0].Scope != "mcp:read" {
		t.Fatalf("grants = %+v", grants)
	}
	asked := p.asked.Load()
	token := readToken(t, e, p)
	resp, body := modernCall(t, e, token, "tools/call", "cancel_order", `{"name":"cancel_order","arguments":{"id":"1"}}`)
	ch := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != 403 || !strings.HasPrefix(ch, `Bearer error="insufficient_scope", scope="mcp:write", resource_metadata="`+e.url) ||
		!strings.Contains(string(body), "the OAuth token may only read (scope mcp:read)") {
		t.Errorf("write call with an mcp:read token = %d %q %q", resp.StatusCode, ch, body)
	}
	// A read call with the same token goes through.
	if resp, body := modernCall(t, e, token, "tools/call", "get_order", `{"name":"get_order","arguments":{"id":"1"}}`); resp.StatusCode != 200 {
		t.Errorf("read call with an mcp:read token = %d %s", resp.StatusCode, body)
	}

	// go-sdk steps up: the person is asked again and allows writing.
	p.access.Store("write")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "cancel_order", Arguments: map[string]any{"id": "9"}})
	if err != nil || text(res) != "cancelled 9" {
		t.Fatalf("cancel_order after step-up = %v, %v", res, err)
	}
	if n := p.asked.Load(); n != asked+2 {
		t.Errorf("consent pages = %d; want %d (the step-up asked again)", n, asked+2)
	}
	if grants, _ := e.store.OAuthGrants(context.Background(), e.project.ID); len(grants) == 0 || grants[0].ClientName != "e2e-app" || grants[0].Scope != "mcp:read mcp:write" {
		t.Errorf("grants after the step-up = %+v; want the newest e2e-app's, read and write", grants)
	}
}

// readToken runs the authorization code flow by hand for p and returns
// the access token.
func readToken(t *testing.T, e *env, p *person) string {
	t.Helper()
	tok := handFlow(t, e, p, url.Values{"scope": {"mcp:read"}})
	return tok["access_token"].(string)
}

const handVerifier = "a-long-enough-pkce-code-verifier-of-at-least-43-characters-0123"
const handChallenge = "iLohnn1B0_7ILt2wXSYc3mtCD42o5jcbYY5f60B3Dgc" // base64url(SHA-256(handVerifier))

// handFlow registers a client, gets a code through p's consent and
// exchanges it; extra adds to or replaces the authorization parameters.
func handFlow(t *testing.T, e *env, p *person, extra url.Values) map[string]any {
	t.Helper()
	clientID := register(t, e)
	code := handCode(t, e, p, clientID, extra)
	st, m := tokenRequest(t, e, url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {code},
		"code_verifier": {handVerifier}, "redirect_uri": {oauthRedirect}, "resource": {e.url + "/mcp"}})
	if st != 200 {
		t.Fatalf("exchange = %d %v", st, m)
	}
	m["client_id"] = clientID
	m["code"] = code
	return m
}

func register(t *testing.T, e *env) string {
	t.Helper()
	resp, err := http.Post(e.url+"/oauth/register", "application/json", strings.NewReader(`{"client_name":"hand","redirect_uris":["`+oauthRedirect+`"],"token_endpoint_auth_method":"none"}`))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("register = %d %v", resp.StatusCode, m)
	}
	return m["client_id"].(string)
}

func handCode(t *testing.T, e *env, p *person, clientID string, extra url.Values) string {
	t.Helper()
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {oauthRedirect}, "state": {"s1"},
		"code_challenge": {handChallenge}, "code_challenge_method": {"S256"}, "resource": {e.url + "/mcp"}, "scope": {"mcp:read mcp:write"}}
	for k, v := range extra {
		q[k] = v
	}
	back, err := p.consent(e.url+"/oauth/authorize?"+q.Encode(), "approve")
	if err != nil {
		t.Fatal(err)
	}
	iss := e.url
	if e.cfg.PublicURL != "" {
		iss = e.cfg.PublicURL
	}
	if back.Query().Get("iss") != iss || back.Query().Get("state") != "s1" {
		t.Errorf("redirect %s; want iss %s and state s1", back, iss)
	}
	return back.Query().Get("code")
}

func tokenRequest(t *testing.T, e *env, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(e.url+"/oauth/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("token response Cache-Control = %q; want no-store", cc)
	}
	return resp.StatusCode, m
}

// modernCall sends one stateless (2026-07-28) request with token, as any
// client would, and returns the answer and its body.
func modernCall(t *testing.T, e *env, token, method, name, params string) (*http.Response, []byte) {
	t.Helper()
	return modernCallCaps(t, e, token, method, name, params, "{}")
}

// modernCallCaps is modernCall declaring the client capabilities caps.
func modernCallCaps(t *testing.T, e *env, token, method, name, params, caps string) (*http.Response, []byte) {
	t.Helper()
	params = strings.TrimSuffix(params, "}")
	if params != "{" {
		params += ","
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
	req, _ := http.NewRequest("POST", e.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

// mcpStatus is the HTTP status of a tools/list with token.
func mcpStatus(t *testing.T, e *env, token string) int {
	t.Helper()
	resp, _ := modernCall(t, e, token, "tools/list", "", "{}")
	return resp.StatusCode
}

// TestOAuthRefusals: each way a flow goes wrong gets the RFCs' error, and
// stolen secrets are caught: a reused code or refresh token ends the grant.
func TestOAuthRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := newPerson(t, e, "cy@example.com")

	// Refused at the authorization endpoint: back to the app with the error.
	clientID := register(t, e)
	for _, tc := range []struct {
		what  string
		extra url.Values
		code  string
	}{
		{"a wrong resource", url.Values{"resource": {"https://elsewhere.example/mcp"}}, "invalid_target"},
		{"plain PKCE", url.Values{"code_challenge_method": {"plain"}}, "invalid_request"},
		{"no PKCE", url.Values{"code_challenge": {""}, "code_challenge_method": {""}}, "invalid_request"},
	} {
		q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {oauthRedirect}, "state": {"s1"},
			"code_challenge": {handChallenge}, "code_challenge_method": {"S256"}, "resource": {e.url + "/mcp"}}
		for k, v := range tc.extra {
			q[k] = v
		}
		resp, err := noRedirects.Get(e.url + "/oauth/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		back, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(back.String(), oauthRedirect) || back.Query().Get("error") != tc.code || back.Query().Get("state") != "s1" {
			t.Errorf("%s: %d to %s; want a redirect to the app with error=%s", tc.what, resp.StatusCode, back, tc.code)
		}
	}
	// No open redirect: an unregistered redirect URI gets a page, not a redirect.
	resp, err := noRedirects.Get(e.url + "/oauth/authorize?" + url.Values{"response_type": {"code"}, "client_id": {clientID},
		"redirect_uri": {"https://evil.example/cb"}, "code_challenge": {handChallenge}, "code_challenge_method": {"S256"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("Location") != "" || !strings.Contains(string(page), "which it did not register") ||
		resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("unregistered redirect URI = %d %q; want 400, a page saying so, framing denied", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The person says no.
	back, err := p.consent(e.url+"/oauth/authorize?"+url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {oauthRedirect},
		"state": {"s2"}, "code_challenge": {handChallenge}, "code_challenge_method": {"S256"}}.Encode(), "deny")
	if err != nil || back.Query().Get("error") != "access_denied" || back.Query().Get("state") != "s2" {
		t.Errorf("denied = %v, %v; want error=access_denied with the state", back, err)
	}

	// Refused at the token endpoint.
	code := handCode(t, e, p, clientID, nil)
	st, m := tokenRequest(t, e, url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {code}, "redirect_uri": {oauthRedirect}})
	if st != 400 || m["error"] != "invalid_request" {
		t.Errorf("exchange without a code_verifier = %d %v; want 400 invalid_request", st, m)
	}
	code = handCode(t, e, p, clientID, nil)
	st, m = tokenRequest(t, e, url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {code}, "redirect_uri": {oauthRedirect},
		"code_verifier": {strings.Repeat("x", 43)}})
	if st != 400 || m["error"] != "invalid_grant" {
		t.Errorf("exchange with a wrong code_verifier = %d %v; want 400 invalid_grant", st, m)
	}

	// A code used twice: the tokens of its first use stop working.
	tok := handFlow(t, e, p, nil)
	access := tok["access_token"].(string)
	if st := mcpStatus(t, e, access); st != 200 {
		t.Fatalf("tools/list with a fresh token = %d", st)
	}
	st, m = tokenRequest(t, e, url.Values{"grant_type": {"authorization_code"}, "client_id": {tok["client_id"].(string)}, "code": {tok["code"].(string)},
		"code_verifier": {handVerifier}, "redirect_uri": {oauthRedirect}})
	if st != 400 || m["error"] != "invalid_grant" {
		t.Errorf("second use of a code = %d %v; want 400 invalid_grant", st, m)
	}
	if st := mcpStatus(t, e, access); st != 401 {
		t.Errorf("tools/list after the code was reused = %d; want 401", st)
	}

	// Refresh rotates; the old refresh token again ends the family.
	tok = handFlow(t, e, p, nil)
	refresh := func(rt string) (int, map[string]any) {
		return tokenRequest(t, e, url.Values{"grant_type": {"refresh_token"}, "client_id": {tok["client_id"].(string)}, "refresh_token": {rt}})
	}
	st, fresh := refresh(tok["refresh_token"].(string))
	if st != 200 || fresh["refresh_token"] == tok["refresh_token"] {
		t.Fatalf("refresh = %d %v", st, fresh)
	}
	if st := mcpStatus(t, e, fresh["access_token"].(string)); st != 200 {
		t.Errorf("tools/list with a refreshed token = %d", st)
	}
	st, m = refresh(tok["refresh_token"].(string))
	if st != 400 || m["error"] != "invalid_grant" {
		t.Errorf("reused refresh token = %d %v; want 400 invalid_grant", st, m)
	}
	if st := mcpStatus(t, e, fresh["access_token"].(string)); st != 401 {
		t.Errorf("tools/list after refresh-token reuse = %d; want 401 (the family is revoked)", st)
	}

	// The app revokes its own token (RFC 7009).
	tok = handFlow(t, e, p, nil)
	resp, err = http.PostForm(e.url+"/oauth/revoke", url.Values{"client_id": {tok["client_id"].(string)}, "token": {tok["refresh_token"].(string)}})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("revoke = %v, %v", resp, err)
	}
	resp.Body.Close()
	if st := mcpStatus(t, e, tok["access_token"].(string)); st != 401 {
		t.Errorf("tools/list after the app revoked its refresh token = %d; want 401", st)
	}
}

func apiGet(t *testing.T, e *env, token, path string, out any) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s = %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

func apiPost(t *testing.T, e *env, token, path string, want int) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("POST %s = %s %s; want %d", path, resp.Status, body, want)
	}
}

// TestOAuthAcrossGateways: every code, grant and token lives in the store,
// so a sign-in started on one gateway finishes on another, and a token
// works on both; a disconnect on one is refused on the other within a
// second. Nothing secret reaches either gateway's log.
func TestOAuthAcrossGateways(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	bus := startNATS(t)
	e := newEnv(t, withConfig(func(c *gateway.Config) {
		c.Bus, c.BusHeartbeat = bus, 250*time.Millisecond
		c.PublicURL, c.AllowedHosts = "https://mcp.example.com", []string{"*"}
	}), func(o *envOptions) { o.logs = &logs })
	a := "http://" + e.gw.Addr()
	sib := e.sibling()
	b := "http://" + sib.gw.Addr()
	e.url = a // the person's browser and the app reach gateway A first
	p := newPerson(t, e, "dee@example.com")

	clientID := register(t, e)
	code := handCode(t, e, p, clientID, url.Values{"resource": {"https://mcp.example.com/mcp"}})
	// The app's token request lands on gateway B.
	resp, err := http.PostForm(b+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {code},
		"code_verifier": {handVerifier}, "redirect_uri": {oauthRedirect}, "resource": {"https://mcp.example.com/mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	var tok map[string]any
	json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("exchange on the other gateway = %d %v", resp.StatusCode, tok)
	}
	access := tok["access_token"].(string)
	for _, g := range []*env{e, sib} {
		g.url = "http://" + g.gw.Addr()
		if st := mcpStatus(t, g, access); st != 200 {
			t.Errorf("tools/list on %s = %d; want 200", g.url, st)
		}
	}
	// Refreshed on A; the new token works on B.
	resp, err = http.PostForm(a+"/oauth/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {tok["refresh_token"].(string)}})
	if err != nil {
		t.Fatal(err)
	}
	var fresh map[string]any
	json.NewDecoder(resp.Body).Decode(&fresh)
	resp.Body.Close()
	sib.url = b
	if st := mcpStatus(t, sib, fresh["access_token"].(string)); st != 200 {
		t.Errorf("refreshed token on the other gateway = %d", st)
	}

	// Disconnected on A: B refuses within a second (the bus says so at once).
	_, apiToken, err := users.CreateAPIToken(context.Background(), e.store, "e2e", 0)
	must(t, err)
	grants, _ := e.store.OAuthGrants(context.Background(), e.project.ID)
	if len(grants) != 1 {
		t.Fatalf("grants = %+v", grants)
	}
	apiPost(t, e, apiToken, "/api/projects/default/apps/"+grants[0].ID+"/revoke", http.StatusNoContent)
	waitFor(t, "the other gateway to refuse the disconnected app", func() bool { return mcpStatus(t, sib, fresh["access_token"].(string)) == 401 })

	for _, secret := range []string{code, access, tok["refresh_token"].(string), fresh["access_token"].(string), "sfx_oat_", "sfx_ort_", "sfx_oac_"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the gateway log holds a secret (%.12s…)", secret)
		}
	}
	if !strings.Contains(logs.String(), "OAuth app connected") {
		t.Errorf("the gateway log does not say the app connected:\n%s", logs.String())
	}
}

// TestOAuthConsentCrossSite: the consent form cannot be posted from
// another site, nor the page framed.
func TestOAuthConsentCrossSite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := newPerson(t, e, "eve@example.com")
	clientID := register(t, e)
	form := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {oauthRedirect},
		"code_challenge": {handChallenge}, "code_challenge_method": {"S256"}, "project": {"default"}, "access": {"write"}, "decision": {"approve"}}
	req, _ := http.NewRequest("POST", e.url+"/oauth/authorize", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	req.AddCookie(&http.Cookie{Name: dashboard.SessionCookieName(p.e.gw.URL()), Value: p.session})
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Location") != "" {
		t.Errorf("cross-site consent POST = %d to %q; want 403 and no code", resp.StatusCode, resp.Header.Get("Location"))
	}
	req, _ = http.NewRequest("GET", e.url+"/oauth/authorize?"+form.Encode(), nil)
	req.AddCookie(&http.Cookie{Name: dashboard.SessionCookieName(p.e.gw.URL()), Value: p.session})
	resp, err = noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") ||
		resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("consent page headers = %v; want framing denied and no-store", resp.Header)
	}
}

// TestOAuthMembersOnly: the consent page offers a person only the projects
// they are a member of; a viewer can give an app read-only access, not
// read and write; removing the person from the project disconnects the
// apps they connected.
func TestOAuthMembersOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOAuthTools(a)) })
	p := newUser(t, e, "vic@example.com", false)
	ctx := context.Background()
	u, _, err := e.store.UserByEmail(ctx, "vic@example.com")
	must(t, err)
	vicID := u.ID
	_, err = e.store.SetMember(ctx, store.Member{ProjectID: e.project.ID, UserID: vicID, Role: store.RoleViewer})
	must(t, err)
	if _, err := e.store.CreateProject(ctx, "hidden"); err != nil {
		t.Fatal(err)
	}

	clientID := register(t, e)
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {oauthRedirect}, "state": {"s1"},
		"code_challenge": {handChallenge}, "code_challenge_method": {"S256"}, "resource": {e.url + "/mcp"}, "scope": {"mcp:read mcp:write"}}
	page := p.page(e.url + "/oauth/authorize?" + q.Encode())
	if !strings.Contains(page, `value="`+e.project.Name+`"`) || strings.Contains(page, `value="hidden"`) {
		t.Errorf("the consent page's projects: want %s only\n%s", e.project.Name, page)
	}
	p.access.Store("write")
	if _, err := p.consent(e.url+"/oauth/authorize?"+q.Encode(), "approve"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a viewer approving read and write: %v; want 403", err)
	}
	p.access.Store("read")
	token := readToken(t, e, p)
	if resp, body := modernCall(t, e, token, "tools/call", "get_order", `{"name":"get_order","arguments":{"id":"1"}}`); resp.StatusCode != 200 {
		t.Fatalf("read call with the viewer's app = %d %s", resp.StatusCode, body)
	}

	admin := e.adminToken()
	req, _ := http.NewRequest("DELETE", fmt.Sprintf("%s/api/projects/%s/members/%d", e.url, e.project.Name, vicID), nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("removing vic = %d", resp.StatusCode)
	}
	waitFor(t, "the removed member's app to be refused", func() bool {
		resp, _ := modernCall(t, e, token, "tools/call", "get_order", `{"name":"get_order","arguments":{"id":"1"}}`)
		return resp.StatusCode == http.StatusUnauthorized
	})
}

// page GETs a dashboard page as the person.
func (p *person) page(u string) string {
	p.t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.AddCookie(&http.Cookie{Name: dashboard.SessionCookieName(p.e.gw.URL()), Value: p.session})
	resp, err := noRedirects.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestOAuthDemotedEditor: an editor demoted to viewer keeps the read-only
// apps they connected; the read and write ones are disconnected.
func TestOAuthDemotedEditor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) { must(t, addOAuthTools(a)) })
	p := newUser(t, e, "eve@example.com", false)
	u, _, err := e.store.UserByEmail(context.Background(), "eve@example.com")
	must(t, err)
	_, err = e.store.SetMember(context.Background(), store.Member{ProjectID: e.project.ID, UserID: u.ID, Role: store.RoleEditor})
	must(t, err)
	p.access.Store("read")
	readOnly := readToken(t, e, p)
	p.access.Store("write")
	readWrite := handFlow(t, e, p, nil)["access_token"].(string)
	call := func(token string) int {
		resp, _ := modernCall(t, e, token, "tools/call", "get_order", `{"name":"get_order","arguments":{"id":"1"}}`)
		return resp.StatusCode
	}
	if call(readOnly) != 200 || call(readWrite) != 200 {
		t.Fatal("the editor's apps do not work")
	}
	req, _ := http.NewRequest("PATCH", fmt.Sprintf("%s/api/projects/%s/members/%d", e.url, e.project.Name, u.ID), strings.NewReader(`{"role":"viewer"}`))
	req.Header.Set("Authorization", "Bearer "+e.adminToken())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("demoting eve = %d", resp.StatusCode)
	}
	waitFor(t, "the read and write app to be refused", func() bool { return call(readWrite) == http.StatusUnauthorized })
	if st := call(readOnly); st != 200 {
		t.Errorf("the read-only app after the demotion = %d; want 200", st)
	}
}
