package oauth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/testenv"
)

const base = "https://gw.example"

type harness struct {
	t       testing.TB
	s       *Server
	st      store.Store
	srv     *httptest.Server
	project store.Project
	user    store.User

	logs *syncBuffer // the server's log

	mu      sync.Mutex
	revoked []string
}

// syncBuffer is a log destination that handlers and the test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newHarness(t testing.TB, opts ...func(*Options)) *harness {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := &harness{t: t, st: st, logs: &syncBuffer{}}
	o := Options{Store: st, BaseURL: func(*http.Request) string { return base }, Logger: slog.New(slog.NewTextHandler(h.logs, nil)),
		HashPassword: func(string) string { return "$argon2id$unusable" },
		Revoked:      func(_ int64, id string) { h.mu.Lock(); h.revoked = append(h.revoked, id); h.mu.Unlock() }}
	for _, f := range opts {
		f(&o)
	}
	h.s = New(o)
	// The clock stands still, so a checked token stays in Verify's cache
	// for the whole test: only a revocation's Forget can end it there.
	frozen := time.Now()
	h.s.now = func() time.Time { return frozen }
	mux := http.NewServeMux()
	h.s.Mount(mux)
	h.srv = httptest.NewServer(mux)
	t.Cleanup(h.srv.Close)
	if h.project, err = st.CreateProject(t.Context(), "shop"); err != nil {
		t.Fatal(err)
	}
	if h.user, err = st.CreateUser(t.Context(), store.User{Email: "ada@example.com"}, "x"); err != nil {
		t.Fatal(err)
	}
	return h
}

// post sends a form (or JSON when body is a string) and decodes the JSON answer.
func (h *harness) post(path string, form url.Values) (int, map[string]any) {
	h.t.Helper()
	resp, err := http.PostForm(h.srv.URL+path, form)
	if err != nil {
		h.t.Fatal(err)
	}
	return decode(h.t, resp)
}

func decode(t testing.TB, resp *http.Response) (int, map[string]any) {
	t.Helper()
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("%s: body %q is not JSON", resp.Request.URL.Path, body)
		}
	}
	return resp.StatusCode, m
}

func (h *harness) register(meta string) (int, map[string]any) {
	h.t.Helper()
	resp, err := http.Post(h.srv.URL+RegisterPath, "application/json", strings.NewReader(meta))
	if err != nil {
		h.t.Fatal(err)
	}
	return decode(h.t, resp)
}

// publicClient registers a public client with one loopback redirect URI.
func (h *harness) publicClient() string {
	h.t.Helper()
	code, m := h.register(`{"client_name":"Test app","redirect_uris":["http://127.0.0.1:3000/callback"],"token_endpoint_auth_method":"none"}`)
	if code != http.StatusCreated {
		h.t.Fatalf("register: %d %v", code, m)
	}
	return m["client_id"].(string)
}

const verifier = "a-long-enough-pkce-code-verifier-of-at-least-43-characters-0123"

func challenge(v string) string {
	sum := sha256.Sum256([]byte(v))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorize checks an authorization request as the consent page does.
func (h *harness) authorize(q url.Values) (*AuthRequest, error) {
	r := httptest.NewRequest("GET", AuthorizePath+"?"+q.Encode(), nil)
	return h.s.ParseAuthorize(r)
}

func authQuery(clientID string) url.Values {
	return url.Values{
		"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {"http://127.0.0.1:3000/callback"},
		"state": {"xyz"}, "code_challenge": {challenge(verifier)}, "code_challenge_method": {"S256"},
		"resource": {base + "/mcp"}, "scope": {"mcp:read mcp:write"},
	}
}

// code runs an approved authorization and returns the code.
func (h *harness) code(clientID string, write bool) string {
	h.t.Helper()
	a, err := h.authorize(authQuery(clientID))
	if err != nil {
		h.t.Fatal(err)
	}
	to, err := h.s.Approve(h.t.Context(), a, h.user.ID, h.project.ID, write)
	if err != nil {
		h.t.Fatal(err)
	}
	u, _ := url.Parse(to)
	q := u.Query()
	if q.Get("state") != "xyz" || q.Get("iss") != base || !strings.HasPrefix(to, "http://127.0.0.1:3000/callback?") {
		h.t.Fatalf("approved redirect = %s; want the callback with the state and iss", to)
	}
	return q.Get("code")
}

func (h *harness) exchange(clientID, code, v string) (int, map[string]any) {
	return h.post(TokenPath, url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {code},
		"code_verifier": {v}, "redirect_uri": {"http://127.0.0.1:3000/callback"}, "resource": {base + "/mcp"}})
}

func wantError(t *testing.T, what string, status int, m map[string]any, wantStatus int, wantCode string) {
	t.Helper()
	if status != wantStatus || m["error"] != wantCode {
		t.Errorf("%s = %d %v; want %d with error %q", what, status, m, wantStatus, wantCode)
	}
}

func TestMetadata(t *testing.T) {
	h := newHarness(t)
	for _, p := range []string{ServerMetaPath, OpenIDMetaPath} {
		resp, err := http.Get(h.srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		_, m := decode(t, resp)
		if m["issuer"] != base || m["authorization_endpoint"] != base+"/oauth/authorize" || m["token_endpoint"] != base+"/oauth/token" ||
			m["registration_endpoint"] != base+"/oauth/register" || m["client_id_metadata_document_supported"] != true ||
			fmt.Sprint(m["code_challenge_methods_supported"]) != "[S256]" || fmt.Sprint(m["scopes_supported"]) != "[mcp:read mcp:write]" ||
			m["authorization_response_iss_parameter_supported"] != true {
			t.Errorf("%s = %v", p, m)
		}
	}
	if m := getJSON(t, h.srv.URL+ServerMetaPath); m["jwks_uri"] != nil {
		t.Errorf("jwks_uri without a JWKSPath: %v", m["jwks_uri"])
	}
	withJWKS := newHarness(t, func(o *Options) { o.JWKSPath = "/.well-known/jwks.json" })
	for _, p := range []string{ServerMetaPath, OpenIDMetaPath} {
		if m := getJSON(t, withJWKS.srv.URL+p); m["jwks_uri"] != base+"/.well-known/jwks.json" {
			t.Errorf("%s: jwks_uri = %v, want %s", p, m["jwks_uri"], base+"/.well-known/jwks.json")
		}
	}
	for _, p := range []string{ResourceMetaPath, ResourceMetaPath + "/mcp"} {
		resp, err := http.Get(h.srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		_, m := decode(t, resp)
		if m["resource"] != base+"/mcp" || fmt.Sprint(m["authorization_servers"]) != "["+base+"]" || fmt.Sprint(m["scopes_supported"]) != "[mcp:read mcp:write]" {
			t.Errorf("%s = %v", p, m)
		}
	}
	r := httptest.NewRequest("POST", "/mcp", nil)
	if got, want := h.s.Challenge(r), `Bearer resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp", scope="mcp:read mcp:write"`; got != want {
		t.Errorf("Challenge = %s; want %s", got, want)
	}
}

func TestRegister(t *testing.T) {
	h := newHarness(t)
	code, m := h.register(`{"client_name":"Claude","redirect_uris":["https://claude.ai/api/mcp/auth_callback"],"token_endpoint_auth_method":"none"}`)
	if code != http.StatusCreated || !strings.HasPrefix(fmt.Sprint(m["client_id"]), "client_") || m["client_secret"] != nil || m["client_name"] != "Claude" {
		t.Errorf("public registration = %d %v; want 201 with a client_id and no secret", code, m)
	}
	code, m = h.register(`{"redirect_uris":["http://localhost:8976/cb"]}`)
	if code != http.StatusCreated || !strings.HasPrefix(fmt.Sprint(m["client_secret"]), "sfx_ocs_") || m["token_endpoint_auth_method"] != "client_secret_basic" {
		t.Errorf("registration without an auth method = %d %v; want a client_secret_basic client with a secret", code, m)
	}
	for _, tc := range []struct{ meta, code, says string }{
		{`{"redirect_uris":["http://app.example/cb"]}`, "invalid_redirect_uri", "plain http on a host that is not loopback"},
		{`{"redirect_uris":["javascript:alert(1)"]}`, "invalid_redirect_uri", "javascript: scheme"},
		{`{"redirect_uris":["https://app.example/cb#x"]}`, "invalid_redirect_uri", "fragment"},
		{`{"redirect_uris":[]}`, "invalid_redirect_uri", "at least one"},
		{`{"redirect_uris":["https://a.example/cb"],"grant_types":["client_credentials"]}`, "invalid_client_metadata", "client_credentials"},
		{`{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt"}`, "invalid_client_metadata", "private_key_jwt"},
		{`[1]`, "invalid_client_metadata", "not a JSON object"},
		{`{"redirect_uris":["https://a.example/cb"],"client_name":"` + strings.Repeat("x", 20<<10) + `"}`, "invalid_client_metadata", "at most 16384 bytes"},
	} {
		code, m := h.register(tc.meta)
		if code != http.StatusBadRequest || m["error"] != tc.code || !strings.Contains(fmt.Sprint(m["error_description"]), tc.says) {
			t.Errorf("register %.60s = %d %v; want 400 %s saying %q", tc.meta, code, m, tc.code, tc.says)
		}
	}
}

// TestRegisterLimits: each field of a registration has a limit, and the
// refusal names the field and the limit.
func TestRegisterLimits(t *testing.T) {
	h := newHarness(t)
	long := "https://a.example/" + strings.Repeat("x", 512)
	uris := func(n int) string {
		return `"redirect_uris":["https://a.example/cb"` + strings.Repeat(`,"https://a.example/cb"`, n-1) + `]`
	}
	for _, tc := range []struct{ meta, says string }{
		{`{` + uris(1) + `,"scope":"` + strings.Repeat("s", 257) + `"}`, "scope is longer than 256 bytes."},
		{`{` + uris(1) + `,"client_name":"` + strings.Repeat("é", 101) + `"}`, "client_name is longer than 100 characters."},
		{`{` + uris(1) + `,"client_uri":"` + long + `"}`, "client_uri is longer than 512 bytes."},
		{`{` + uris(1) + `,"logo_uri":"` + long + `"}`, "logo_uri is longer than 512 bytes."},
		{`{"redirect_uris":["` + long + `"]}`, "a URI in redirect_uris is longer than 512 bytes."},
		{`{` + uris(11) + `}`, "redirect_uris lists 11 URIs; at most 10 are allowed."},
		{`{` + uris(1) + `,"grant_types":["refresh_token","refresh_token","refresh_token","refresh_token","refresh_token"]}`, "grant_types lists 5 values; at most 4 are allowed."},
		{`{` + uris(1) + `,"response_types":["code","code","code","code","code"]}`, "response_types lists 5 values; at most 4 are allowed."},
	} {
		code, m := h.register(tc.meta)
		if code != http.StatusBadRequest || m["error"] != "invalid_client_metadata" || m["error_description"] != tc.says {
			t.Errorf("register %.70s… = %d %v; want 400 invalid_client_metadata %q", tc.meta, code, m, tc.says)
		}
	}
	// At the limits, it registers.
	code, m := h.register(`{` + uris(10) + `,"scope":"` + strings.Repeat("s", 256) + `","client_name":"` + strings.Repeat("é", 100) +
		`","client_uri":"` + long[:512] + `","token_endpoint_auth_method":"none"}`)
	if code != http.StatusCreated {
		t.Errorf("registration at every limit = %d %v; want 201", code, m)
	}
}

// TestRedirectSchemes: what a redirect URI may be, at registration and in
// a metadata document alike (both go through validate).
func TestRedirectSchemes(t *testing.T) {
	h := newHarness(t)
	for _, u := range []string{
		"https://claude.ai/api/mcp/auth_callback", "http://127.0.0.1:3000/cb", "http://[::1]:3000/cb", "http://localhost/cb",
		"com.example.app:/callback", "com.example.app://callback", "io.modelcontextprotocol.inspector:/oauth",
		"cursor://anysphere.cursor-mcp/oauth/callback",
	} {
		h.s.limits = ratelimit.New() // the per-address limit is not what is tested
		if code, m := h.register(`{"redirect_uris":["` + u + `"],"token_endpoint_auth_method":"none"}`); code != http.StatusCreated {
			t.Errorf("register %s = %d %v; want 201", u, code, m)
		}
		if err := (&client{RedirectURIs: []string{u}}).validate(); err != nil {
			t.Errorf("a document with %s: %v; want accepted", u, err)
		}
	}
	for _, tc := range []struct{ uri, says string }{
		{"ftp://files.example/cb", `"ftp://files.example/cb" uses the ftp: scheme; a redirect URI must be https, http on 127.0.0.1, [::1] or localhost, or an app's own scheme in reverse-domain form such as com.example.app:/callback`},
		{"ws://127.0.0.1:3000/cb", "uses the ws: scheme"},
		{"wss://app.example/cb", "uses the wss: scheme"},
		{"view-source:https://app.example/cb", "uses the view-source: scheme"},
		{"javascript:alert(1)", "uses the javascript: scheme"},
		{"data:text/html,hi", "uses the data: scheme"},
		{"file:///etc/passwd", "uses the file: scheme"},
		{"myapp:/callback", "uses the myapp: scheme"},
		{"cursor://anysphere.cursor-mcp/oauth/other", "uses the cursor: scheme"},
		{"cursor://evil.example/oauth/callback", "uses the cursor: scheme"},
		{"http://app.example/cb", "plain http on a host that is not loopback"},
		{"http://192.168.1.2/cb", "plain http on a host that is not loopback"},
		{"https:///cb", "has no host"},
		{"com.example.app:/cb#x", "has a fragment"},
	} {
		h.s.limits = ratelimit.New()
		code, m := h.register(`{"redirect_uris":["` + tc.uri + `"],"token_endpoint_auth_method":"none"}`)
		if code != http.StatusBadRequest || m["error"] != "invalid_redirect_uri" || !strings.Contains(fmt.Sprint(m["error_description"]), tc.says) {
			t.Errorf("register %s = %d %v; want 400 invalid_redirect_uri saying %q", tc.uri, code, m, tc.says)
		}
		err := (&client{RedirectURIs: []string{tc.uri}}).validate()
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("a document with %s: %v; want refused saying %q", tc.uri, err, tc.says)
		}
	}
}

// TestRegisterCursor: Cursor's registration, three redirect URIs in one
// request as it sends them, is accepted.
func TestRegisterCursor(t *testing.T) {
	h := newHarness(t)
	code, m := h.register(`{"client_name":"Cursor","redirect_uris":["cursor://anysphere.cursor-mcp/oauth/callback","https://www.cursor.com/agents/mcp/oauth/callback","http://localhost:8787/callback"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"],"response_types":["code"]}`)
	if code != http.StatusCreated {
		t.Errorf("Cursor's registration = %d %v; want 201", code, m)
	}
}

func TestRegistrationFlood(t *testing.T) {
	h := newHarness(t)
	var last int
	var m map[string]any
	for range registersPerAddr + 1 {
		last, m = h.register(`{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"none"}`)
	}
	if last != http.StatusTooManyRequests || m["error"] != "slow_down" {
		t.Errorf("registration %d in a minute = %d %v; want 429 slow_down", registersPerAddr+1, last, m)
	}
}

func TestAuthorizeChecks(t *testing.T) {
	h := newHarness(t)
	id := h.publicClient()
	page := func(what string, q url.Values, says string) {
		t.Helper()
		_, err := h.authorize(q)
		var pe *PageError
		if !errors.As(err, &pe) || !strings.Contains(pe.Message, says) {
			t.Errorf("%s: error %v; want a page (no redirect) saying %q", what, err, says)
		}
	}
	redirect := func(what string, q url.Values, code string) {
		t.Helper()
		_, err := h.authorize(q)
		var re *RedirectError
		if !errors.As(err, &re) {
			t.Fatalf("%s: error %v; want a redirect with %s", what, err, code)
		}
		u, _ := url.Parse(re.URL)
		if u.Host != "127.0.0.1:3000" || u.Query().Get("error") != code || u.Query().Get("state") != "xyz" || u.Query().Get("iss") != base {
			t.Errorf("%s: redirect %s; want the callback with error=%s, the state and iss", what, re.URL, code)
		}
	}
	q := authQuery("client_unknown")
	page("unknown client", q, "Unknown client_id")
	q = authQuery(id)
	q.Set("redirect_uri", "https://evil.example/cb")
	page("unregistered redirect", q, "which it did not register")
	q = authQuery(id)
	q.Set("redirect_uri", "http://127.0.0.1:49152/callback")
	if a, err := h.authorize(q); err != nil || a.RedirectURI != "http://127.0.0.1:49152/callback" {
		t.Errorf("loopback redirect on another port = %v, %v; want accepted (RFC 8252)", a, err)
	}
	q.Set("redirect_uri", "http://127.0.0.1:49152/other")
	page("loopback redirect on another path", q, "did not register")

	q = authQuery(id)
	q.Set("code_challenge_method", "plain")
	redirect("plain PKCE", q, "invalid_request")
	q.Del("code_challenge_method")
	redirect("no PKCE method", q, "invalid_request")
	q = authQuery(id)
	q.Del("code_challenge")
	redirect("no code_challenge", q, "invalid_request")
	q = authQuery(id)
	q.Set("resource", "https://other.example/mcp")
	redirect("another resource", q, "invalid_target")
	q = authQuery(id)
	q.Set("response_type", "token")
	redirect("implicit grant", q, "unsupported_response_type")

	q = authQuery(id)
	q.Set("scope", "mcp:read")
	if a, err := h.authorize(q); err != nil || a.Scope != "mcp:read" || a.ClientName != "Test app" || a.RedirectHost() != "127.0.0.1:3000" {
		t.Errorf("read-only request = %+v, %v", a, err)
	}
	q.Del("scope")
	if a, _ := h.authorize(q); a == nil || a.Scope != ScopeAll {
		t.Errorf("request without a scope = %+v; want %s", a, ScopeAll)
	}
}

func TestCodeExchange(t *testing.T) {
	h := newHarness(t)
	id := h.publicClient()

	st, m := h.exchange(id, h.code(id, true), "")
	wantError(t, "exchange without a verifier", st, m, 400, "invalid_request")
	st, m = h.exchange(id, h.code(id, true), verifier+"x")
	wantError(t, "exchange with a wrong verifier", st, m, 400, "invalid_grant")
	st, m = h.exchange("client_other", h.code(id, true), verifier)
	wantError(t, "exchange by an unknown client", st, m, 401, "invalid_client")

	code := h.code(id, true)
	st, m = h.post(TokenPath, url.Values{"grant_type": {"authorization_code"}, "client_id": {id}, "code": {code},
		"code_verifier": {verifier}, "redirect_uri": {"http://127.0.0.1:3000/callback"}, "resource": {"https://other.example/mcp"}})
	wantError(t, "exchange for another resource", st, m, 400, "invalid_target")

	code = h.code(id, true)
	st, m = h.exchange(id, code, verifier)
	if st != 200 || m["token_type"] != "Bearer" || m["scope"] != ScopeAll || m["expires_in"] != float64(3600) ||
		!strings.HasPrefix(fmt.Sprint(m["access_token"]), "sfx_oat_") || !strings.HasPrefix(fmt.Sprint(m["refresh_token"]), "sfx_ort_") {
		t.Fatalf("exchange = %d %v", st, m)
	}
	access := m["access_token"].(string)
	g, err := h.s.Verify(t.Context(), access, base+"/mcp")
	if err != nil || g.ProjectID != h.project.ID || !g.Write || g.Client != "Test app" {
		t.Errorf("Verify = %+v, %v; want a writing grant on the project", g, err)
	}
	if _, err := h.s.Verify(t.Context(), access, "https://other.example/mcp"); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("Verify at another resource: %v; want ErrInvalidToken", err)
	}

	// A code used twice: refused, and what it granted is revoked.
	st, m = h.exchange(id, code, verifier)
	wantError(t, "second use of a code", st, m, 400, "invalid_grant")
	if _, err := h.s.Verify(t.Context(), access, base+"/mcp"); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("Verify after the code was reused: %v; want ErrInvalidToken", err)
	}
	if len(h.revoked) != 1 || h.revoked[0] != g.ID {
		t.Errorf("revoked = %v; want [%s]", h.revoked, g.ID)
	}

	// A read-only approval gives mcp:read only, even when write was asked.
	st, m = h.exchange(id, h.code(id, false), verifier)
	if st != 200 || m["scope"] != ScopeRead {
		t.Errorf("read-only exchange = %d %v; want scope mcp:read", st, m)
	}
	// Signing in again replaces the app's older grant.
	h.exchange(id, h.code(id, true), verifier)
	if gs, _ := h.st.OAuthGrants(t.Context(), h.project.ID); len(gs) != 1 || gs[0].Scope != ScopeAll {
		t.Errorf("grants after signing in again = %+v; want only the newest", gs)
	}
}

func TestRefreshRotation(t *testing.T) {
	h := newHarness(t)
	id := h.publicClient()
	_, m := h.exchange(id, h.code(id, true), verifier)
	first := m["refresh_token"].(string)
	refresh := func(rt string) (int, map[string]any) {
		return h.post(TokenPath, url.Values{"grant_type": {"refresh_token"}, "client_id": {id}, "refresh_token": {rt}})
	}
	st, m := refresh(first)
	if st != 200 || m["refresh_token"] == first || m["access_token"] == nil {
		t.Fatalf("refresh = %d %v; want new tokens", st, m)
	}
	second, access := m["refresh_token"].(string), m["access_token"].(string)
	if _, err := h.s.Verify(t.Context(), access, base+"/mcp"); err != nil {
		t.Fatalf("refreshed access token: %v", err)
	}
	// The first refresh token again: someone else has it. The family goes.
	st, m = refresh(first)
	wantError(t, "reused refresh token", st, m, 400, "invalid_grant")
	if _, err := h.s.Verify(t.Context(), access, base+"/mcp"); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("access token after refresh reuse: %v; want ErrInvalidToken", err)
	}
	st, m = refresh(second)
	wantError(t, "the newest refresh token of a revoked family", st, m, 400, "invalid_grant")
}

func TestRevokeEndpoint(t *testing.T) {
	h := newHarness(t)
	id := h.publicClient()
	_, m := h.exchange(id, h.code(id, true), verifier)
	access := m["access_token"].(string)
	st, _ := h.post(RevokePath, url.Values{"client_id": {"client_other"}, "token": {access}})
	if st != http.StatusUnauthorized {
		t.Errorf("revoke by an unknown client = %d; want 401", st)
	}
	if st, _ := h.post(RevokePath, url.Values{"client_id": {id}, "token": {"sfx_oat_unknown"}}); st != 200 {
		t.Errorf("revoke of an unknown token = %d; want 200 (RFC 7009)", st)
	}
	if _, err := h.s.Verify(t.Context(), access, base+"/mcp"); err != nil { // now in Verify's cache
		t.Fatal(err)
	}
	if st, _ := h.post(RevokePath, url.Values{"client_id": {id}, "token": {access}}); st != 200 {
		t.Errorf("revoke = %d; want 200", st)
	}
	if _, err := h.s.Verify(t.Context(), access, base+"/mcp"); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("Verify after revocation: %v; want ErrInvalidToken", err)
	}
	st, m = h.post(TokenPath, url.Values{"grant_type": {"refresh_token"}, "client_id": {id}, "refresh_token": {m["refresh_token"].(string)}})
	wantError(t, "refresh after revocation", st, m, 400, "invalid_grant")
	// The project's audit log says the app disconnected itself.
	es, err := h.st.Audit(t.Context(), store.AuditFilter{ProjectID: h.project.ID, Action: "app.revoke"})
	if err != nil || len(es) != 1 || !strings.HasPrefix(es[0].Actor, "app ") || !strings.Contains(string(es[0].After), `"why":"revoked by the app"`) {
		t.Errorf("audit entries of the revocation = %+v, %v; want one app.revoke by the app", es, err)
	}
}

func TestConfidentialClient(t *testing.T) {
	h := newHarness(t)
	_, m := h.register(`{"client_name":"Server app","redirect_uris":["http://127.0.0.1:3000/callback"],"token_endpoint_auth_method":"client_secret_post"}`)
	id, secret := m["client_id"].(string), m["client_secret"].(string)
	code := h.code(id, true)
	st, m := h.exchange(id, code, verifier)
	wantError(t, "exchange without the secret", st, m, 401, "invalid_client")
	req, _ := http.NewRequest("POST", h.srv.URL+TokenPath, strings.NewReader(url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"code_verifier": {verifier}, "redirect_uri": {"http://127.0.0.1:3000/callback"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if st, m := decode(t, resp); st != 200 || m["access_token"] == nil {
		t.Errorf("exchange with the secret in HTTP Basic = %d %v", st, m)
	}
}

// TestMetadataDocument: a client named by a Client ID Metadata Document
// URL, fetched over TLS, and what the fetch refuses.
func TestMetadataDocument(t *testing.T) {
	docs := map[string]string{}
	var fetches sync.Map
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := fetches.LoadOrStore(r.URL.Path, new(int))
		*n.(*int)++
		switch r.URL.Path {
		case "/moved.json":
			http.Redirect(w, r, "/client.json", http.StatusFound)
			return
		case "/big.json":
			w.Write([]byte(`{"client_name":"` + strings.Repeat("x", 20<<10) + `"}`))
			return
		}
		doc, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(doc))
	}))
	defer srv.Close()
	id := srv.URL + "/client.json"
	docs["/client.json"] = `{"client_id":"` + id + `","client_name":"Doc app","logo_uri":"https://app.example/logo.png","redirect_uris":["http://127.0.0.1:3000/callback"]}`
	docs["/wrong-id.json"] = `{"client_id":"https://else.example/c.json","redirect_uris":["http://127.0.0.1:3000/callback"]}`
	docs["/secret.json"] = `{"client_id":"` + srv.URL + `/secret.json","client_secret":"s","redirect_uris":["http://127.0.0.1:3000/callback"]}`
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs

	h := newHarness(t, func(o *Options) { o.ClientIDRoots = roots; o.AllowPrivateClientIDs = true })
	a, err := h.authorize(authQuery(id))
	if err != nil || a.ClientName != "Doc app" || !a.Document || a.LogoURI != "https://app.example/logo.png" {
		t.Fatalf("authorize with a metadata document = %+v, %v", a, err)
	}
	h.authorize(authQuery(id))
	if n, _ := fetches.Load("/client.json"); *n.(*int) != 1 {
		t.Errorf("the document was fetched %d times for two requests; want 1 (cached)", *n.(*int))
	}
	st, m := h.exchange(id, h.code(id, false), verifier)
	if st != 200 || m["scope"] != ScopeRead {
		t.Errorf("exchange by a document client = %d %v", st, m)
	}
	// A document that names itself but is not usable: the app's developer
	// is told why.
	if _, err := h.authorize(authQuery(srv.URL + "/secret.json")); err == nil ||
		err.Error() != "The app that sent you here cannot sign in: The client's metadata document is not usable: it carries a client_secret, which a public document must not." {
		t.Errorf("document with a secret: %v; want refused saying why", err)
	}
	// Anything else is one message; why is in the log.
	for _, tc := range []struct{ path, log string }{
		{"/wrong-id.json", "is not its own URL"},
		{"/moved.json", "redirects"},
		{"/big.json", "larger than 16384 bytes"},
		{"/missing.json", "404 Not Found"},
	} {
		_, err := h.authorize(authQuery(srv.URL + tc.path))
		if err == nil || err.Error() != "The app that sent you here cannot sign in: "+errDocFetch.Description {
			t.Errorf("document %s: %v; want the one message for a document that could not be fetched", tc.path, err)
		}
		if !strings.Contains(h.logs.String(), tc.log) {
			t.Errorf("document %s: the log does not say %q:\n%s", tc.path, tc.log, h.logs)
		}
	}
	for _, bad := range []string{"http://app.example/client.json", "https://app.example", "https://app.example/"} {
		if _, err := h.s.docs.get(context.Background(), bad); err == nil {
			t.Errorf("client_id %s accepted", bad)
		}
	}
}

// TestCheckTarget: the dial-time check refuses every special-purpose
// range of both IANA registries, in each form an address can be dialled
// in, and lets global unicast through.
func TestCheckTarget(t *testing.T) {
	refused := []string{
		// IPv4, one address in each range and its edges where they matter.
		"0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "100.64.0.1", "100.127.255.254", "127.0.0.1", "127.9.9.9",
		"169.254.169.254", "172.16.5.4", "172.31.255.255", "192.0.0.8", "192.0.2.1", "192.88.99.1", "192.168.0.1",
		"198.18.0.1", "198.19.255.255", "198.51.100.7", "203.0.113.9", "224.0.0.1", "239.255.255.250", "240.0.0.1",
		"255.255.255.255",
		// IPv6.
		"::", "::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "::127.0.0.1",
		"64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1", "64:ff9b::5db8:d822", "64:ff9b:1::a00:1", "100::1",
		"2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:1ff::1", "2001:db8::1", "2002:a9fe:a9fe::1", "2002:5db8:d822::1",
		"3fff::1", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0", "fec0::1", "ff02::1", "ff0e::1", "5f00::1",
	}
	for _, ip := range refused {
		addr := net.JoinHostPort(ip, "443")
		if err := checkTarget(addr, false); !errors.Is(err, errNotGlobal) {
			t.Errorf("checkTarget(%s) = %v; want refused as not global", addr, err)
		}
		if err := checkTarget(addr, true); err != nil {
			t.Errorf("checkTarget(%s, allowPrivate) = %v; want allowed", addr, err)
		}
	}
	for _, ip := range []string{"93.184.216.34", "8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.0", "172.32.0.1",
		"192.0.1.1", "198.20.0.1", "223.255.255.255", "::ffff:93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946",
		"2001:200::1", "2a00:1450:4001:82a::200e"} {
		if err := checkTarget(net.JoinHostPort(ip, "443"), false); err != nil {
			t.Errorf("checkTarget of the global address %s = %v; want allowed", ip, err)
		}
	}
	if err := checkTarget("example.com:443", false); err == nil {
		t.Error("checkTarget of a name = nil; want refused (the check runs after resolution)")
	}
}

// TestMetadataDocumentErrorsOpaque: the page a person (or an attacker
// choosing client_ids) sees is the same whether the document's host
// resolved to a refused address, refused the connection, reset it, timed
// out or answered 404: no address, no dial error. The log has the detail.
func TestMetadataDocumentErrorsOpaque(t *testing.T) {
	closedURL := "https://" + testenv.RefusingAddr(t) + "/client.json" // connection refused
	reset, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer reset.Close()
	go func() {
		for {
			c, err := reset.Accept()
			if err != nil {
				return
			}
			c.(*net.TCPConn).SetLinger(0)
			c.Close() // connection reset
		}
	}()
	notFound := httptest.NewTLSServer(http.NotFoundHandler())
	defer notFound.Close()
	roots := notFound.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs

	strict := newHarness(t, func(o *Options) { o.ClientIDRoots = roots })
	open := newHarness(t, func(o *Options) { o.ClientIDRoots = roots; o.AllowPrivateClientIDs = true })
	for _, tc := range []struct {
		what, id string
		h        *harness
		log      string
	}{
		{"loopback refused by the address check", notFound.URL + "/client.json", strict, "127.0.0.1 is not a global address"},
		{"connection refused", closedURL, open, "connection refused"},
		{"connection reset", "https://" + reset.Addr().String() + "/client.json", open, `err="Get`},
		{"404", notFound.URL + "/client.json", open, "it answered 404 Not Found"},
	} {
		_, err := tc.h.authorize(authQuery(tc.id))
		var pe *PageError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: %v; want an error page", tc.what, err)
		}
		if want := "The app that sent you here cannot sign in: The gateway could not fetch the client's metadata document. Try again later; if it keeps failing, the gateway's operator can see why in its log."; pe.Message != want {
			t.Errorf("%s: page says %q; want %q", tc.what, pe.Message, want)
		}
		for _, leak := range []string{"127.0.0.1", "refused", "reset", "EOF", "timeout", "404", "dial"} {
			if strings.Contains(pe.Message, leak) {
				t.Errorf("%s: page says %q, which gives away %q", tc.what, pe.Message, leak)
			}
		}
		if line := logLine(tc.h, "client_id="+tc.id); !strings.Contains(line, tc.log) {
			t.Errorf("%s: the log says %q; want it to say %q", tc.what, line, tc.log)
		}
	}
	// The token endpoint says no more than the page.
	st, m := strict.post(TokenPath, url.Values{"grant_type": {"refresh_token"}, "client_id": {closedURL}, "refresh_token": {"x"}})
	if st != http.StatusUnauthorized || m["error_description"] != errDocFetch.Description {
		t.Errorf("token request by an unfetchable document client = %d %v; want 401 with the one message", st, m)
	}
}

// TestMetadataDocumentFetchBound: however many clients name slow
// documents at once, at most docMaxFetches fetches are under way; the
// others wait a little, then are refused with a message that says to try
// again.
func TestMetadataDocumentFetchBound(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	inFlight, most := 0, 0
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		http.NotFound(w, r)
	}))
	defer srv.Close()
	h := newHarness(t, func(o *Options) {
		o.ClientIDRoots = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
		o.AllowPrivateClientIDs = true
	})
	h.s.docs.queueWait = 50 * time.Millisecond
	const n = docMaxFetches + 4
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := h.s.docs.get(t.Context(), fmt.Sprintf("%s/slow/%d.json", srv.URL, i))
			errs <- err
		}()
	}
	// The excess requests are refused while the fetches hang.
	for range n - docMaxFetches {
		select {
		case err := <-errs:
			if err != errDocsBusy {
				t.Errorf("request over the bound: %v; want %v", err, errDocsBusy)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("requests over the bound were not refused within 10 s")
		}
	}
	// Every fetch within the bound reaches the server and hangs there
	// (a real HTTP server: polled, bounded).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := inFlight
		mu.Unlock()
		if n == docMaxFetches {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d fetches under way after 10 s; want %d", n, docMaxFetches)
		}
	}
	if errDocsBusy.Description != "The gateway is fetching too many client metadata documents at once. Try again in a few seconds." {
		t.Errorf("busy message = %q", errDocsBusy.Description)
	}
	close(release)
	for range docMaxFetches {
		if err := <-errs; err != errDocFetch {
			t.Errorf("a fetch within the bound: %v; want it fetched (a 404 here)", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most != docMaxFetches {
		t.Errorf("%d fetches were under way at once; want %d", most, docMaxFetches)
	}
}

// logLine returns the first line of the server's log that contains s.
func logLine(h *harness, s string) string {
	for line := range strings.Lines(h.logs.String()) {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// TestRegisterTotalCap: past MaxClients registered clients, registration
// is refused with a message that says what to do, and the operator is
// told once; once Prune deletes unused ones, it is open again.
func TestRegisterTotalCap(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxClients = 3 })
	for range 3 {
		h.publicClient()
	}
	for range 2 {
		code, m := h.register(`{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"none"}`)
		if code != http.StatusServiceUnavailable || m["error"] != "temporarily_unavailable" ||
			m["error_description"] != "This gateway has as many registered OAuth clients as it keeps (3) and registers no more until unused ones are deleted. Try again in an hour, or name the client by a Client ID Metadata Document URL instead of registering." {
			t.Errorf("registration past the cap = %d %v; want 503 temporarily_unavailable saying why", code, m)
		}
	}
	if n, _ := h.st.CountOAuthClients(t.Context()); n != 3 {
		t.Errorf("%d clients stored; want 3", n)
	}
	if got := strings.Count(h.logs.String(), "OAuth client registration refused"); got != 1 {
		t.Errorf("the refusal was logged %d times; want once:\n%s", got, h.logs)
	}
	h.s.now = func() time.Time { return time.Now().Add(ClientUnusedTTL + time.Minute) }
	if _, err := h.s.Prune(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code, m := h.register(`{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"none"}`); code != http.StatusCreated {
		t.Errorf("registration after the unused clients were pruned = %d %v; want 201", code, m)
	}
}

// TestPruneClients: Prune (as the gateway runs it hourly) deletes a client
// no one approved a day after it registered, and one whose grants are all
// gone ClientRetention after the last went; a client in use stays.
func TestPruneClients(t *testing.T) {
	h := newHarness(t)
	unused, live, revoked := h.publicClient(), h.publicClient(), h.publicClient()
	h.exchange(live, h.code(live, true), verifier)
	_, m := h.exchange(revoked, h.code(revoked, true), verifier)
	h.post(RevokePath, url.Values{"client_id": {revoked}, "token": {m["access_token"].(string)}})
	exists := func(when string, want map[string]bool) {
		t.Helper()
		if _, err := h.s.Prune(t.Context()); err != nil {
			t.Fatal(err)
		}
		for id, kept := range want {
			_, err := h.st.OAuthClient(t.Context(), id)
			if kept != (err == nil) {
				t.Errorf("%s: client %s: %v; want kept: %v", when, id, err, kept)
			}
		}
	}
	start := time.Now()
	at := func(d time.Duration) { h.s.now = func() time.Time { return start.Add(d) } }
	at(ClientUnusedTTL - time.Minute)
	exists("just under a day", map[string]bool{unused: true, live: true, revoked: true})
	at(ClientUnusedTTL + time.Minute)
	exists("a day later", map[string]bool{unused: false, live: true, revoked: true})
	if !strings.Contains(h.logs.String(), `msg="pruned unused OAuth clients" clients=1`) {
		t.Errorf("the log does not count the pruned client:\n%s", h.logs)
	}
	at(ClientRetention + time.Minute)
	exists("past the retention", map[string]bool{live: true, revoked: false})
	// The code it used (unknown now) is refused as any unknown client.
	code, m := h.exchange(revoked, "sfx_oac_x", verifier)
	wantError(t, "a pruned client at the token endpoint", code, m, http.StatusUnauthorized, "invalid_client")
}

func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, m := decode(t, resp)
	return m
}
