package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/users"
)

// enterprise is a gateway that trusts a company's IdP, with an app
// registered for the JWT bearer grant that the IdP knows by its client id.
type enterprise struct {
	*env
	idp            *companyIdP
	issuer         string // the gateway's issuer (its public URL)
	client, secret string
}

// newEnterprise starts it: the IdP added through the admin API, people it
// signs in provisioned into the default project as editors. An option
// with its own withConfig must set UpstreamAllowLoopback too (the IdP is
// on loopback).
func newEnterprise(t *testing.T, opts ...func(*envOptions)) *enterprise {
	t.Helper()
	opts = append([]func(*envOptions){withConfig(func(c *gateway.Config) { c.UpstreamAllowLoopback = true })}, opts...)
	e := &enterprise{env: newEnv(t, opts...), idp: newCompanyIdP(t)}
	e.issuer = e.url
	if e.cfg.PublicURL != "" {
		e.issuer = e.cfg.PublicURL
		e.url = "http://" + e.gw.Addr() // the app reaches the gateway directly
	}
	_, apiToken, err := users.CreateAPIToken(context.Background(), e.store, "e2e", 0)
	must(t, err)
	body := `{"issuer":"` + e.idp.srv.URL + `","provisionProject":"default","provisionRole":"editor"}`
	req, _ := http.NewRequest("POST", e.url+"/api/idps", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/idps = %d", resp.StatusCode)
	}
	resp, err = http.Post(e.url+"/oauth/register", "application/json", strings.NewReader(
		`{"client_name":"Wiki","grant_types":["`+grantJWTBearer+`"],"token_endpoint_auth_method":"client_secret_basic"}`))
	must(t, err)
	var reg map[string]any
	json.NewDecoder(resp.Body).Decode(&reg)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("register = %d %v", resp.StatusCode, reg)
	}
	e.client, e.secret = reg["client_id"].(string), reg["client_secret"].(string)
	e.idp.mapClient(e.client)
	return e
}

// idJAG signs a person in at the IdP and exchanges their ID token there
// for an ID-JAG for the gateway.
func (e *enterprise) idJAG(sub, email string) string {
	e.t.Helper()
	resp, err := http.PostForm(e.idp.srv.URL+"/token", url.Values{
		"grant_type": {grantTokenExchange}, "requested_token_type": {tokenTypeIDJAG}, "audience": {e.issuer},
		"resource": {e.issuer + "/mcp"}, "scope": {"mcp:read mcp:write"}, "client_id": {idpClient},
		"subject_token": {e.idp.idToken(sub, email)}, "subject_token_type": {tokenTypeIDToken},
	})
	must(e.t, err)
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	if resp.StatusCode != http.StatusOK || m["issued_token_type"] != tokenTypeIDJAG {
		e.t.Fatalf("token exchange at the IdP = %d %v", resp.StatusCode, m)
	}
	return m["access_token"].(string)
}

// token presents an ID-JAG at the gateway's token endpoint, with a DPoP
// proof unless proof is "".
func (e *enterprise) token(jag, proof string) (int, map[string]any) {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.url+"/oauth/token", strings.NewReader(url.Values{"grant_type": {grantJWTBearer}, "assertion": {jag}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(e.client, e.secret)
	if proof != "" {
		req.Header.Set("DPoP", proof)
	}
	resp, err := http.DefaultClient.Do(req)
	must(e.t, err)
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// TestEnterpriseSignIn: an app signs a person in with the company's IdP
// (ID token, token exchange for an ID-JAG, JWT bearer grant) and calls
// tools in both protocol eras as that person and app (core.CallFrom and
// the identity token alike); the ID-JAG works once.
func TestEnterpriseSignIn(t *testing.T) {
	t.Parallel()
	e := newEnterprise(t)
	e.startAgent(core.Options{}, whoAgent(t))
	setAudience(t, e.env, e.agentKeyID(), idAudience)
	set, _ := jwksOf(t, e.url)
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			jag := e.idJAG("00u-ann", "ann@example.com")
			status, tok := e.token(jag, "")
			if status != http.StatusOK || tok["token_type"] != "Bearer" || tok["refresh_token"] != nil || tok["scope"] != "mcp:read mcp:write" {
				t.Fatalf("jwt-bearer grant = %d %v; want a Bearer token for read and write, no refresh token", status, tok)
			}
			cs := e.connect(v, tok["access_token"].(string), nil)
			var w who
			// The identity audience reaches the gateway's controls within a second.
			waitFor(t, "a call with an identity token", func() bool {
				w = who{}
				must(t, json.Unmarshal([]byte(text(call(t, cs, "whoami", map[string]any{}))), &w))
				return w.IdentityToken != ""
			})
			if w.Person == nil || w.Person.Email != "ann@example.com" || w.App == nil || w.App.ID != e.client || w.App.Name != "Wiki" ||
				w.Role != "editor" || !slices.Equal(w.Scopes, []string{"mcp:read", "mcp:write"}) {
				t.Errorf("the handler saw %+v (person %+v, app %+v); want ann, the Wiki app, editor, read and write", w, w.Person, w.App)
			}
			if c := mustVerify(t, set, w.IdentityToken, e.url); c.Email != "ann@example.com" || c.ClientID != e.client || c.Scope != "mcp:read mcp:write" {
				t.Errorf("identity token claims %+v; want ann, the Wiki app's client id, read and write", c)
			}
			status, m := e.token(jag, "")
			if status != http.StatusBadRequest || m["error"] != "invalid_grant" || !strings.Contains(m["error_description"].(string), "was used already") {
				t.Errorf("the same ID-JAG again = %d %v; want invalid_grant, used already", status, m)
			}
		})
	}
	es, err := e.store.Audit(context.Background(), store.AuditFilter{ProjectID: e.project.ID})
	must(t, err)
	n := 0
	for _, a := range es {
		if a.Action == "oauth.jwt_bearer" && a.Actor == "ann@example.com" && a.Target == "Wiki" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("oauth.jwt_bearer audit entries by ann = %d; want 2", n)
	}
}

// dpopList sends a stateless tools/list with the given Authorization and
// DPoP headers ("" leaves one out), and returns the answer and its body
// (a refusal's message alone).
func dpopList(t *testing.T, e *env, authz, proof string) (*http.Response, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest("POST", e.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", authz)
	if proof != "" {
		req.Header.Set("DPoP", proof)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var rpc struct {
		Error struct{ Message string }
	}
	if json.Unmarshal(out, &rpc) == nil && rpc.Error.Message != "" {
		return resp, rpc.Error.Message // a refusal: its words, unescaped
	}
	return resp, string(out)
}

// TestEnterpriseDPoP: a DPoP-bound token from the JWT bearer grant works
// in both eras with a fresh proof per request; without its key, with a
// replayed proof or one for another URL, method or token, it is refused.
func TestEnterpriseDPoP(t *testing.T) {
	t.Parallel()
	e := newEnterprise(t)
	e.startAgent(core.Options{}, whoAgent(t))
	key := newDPoPClientKey(t)
	status, tok := e.token(e.idJAG("00u-ann", "ann@example.com"), key.proof("POST", e.url+"/oauth/token", ""))
	if status != http.StatusOK || tok["token_type"] != "DPoP" {
		t.Fatalf("jwt-bearer grant with a proof = %d %v; want a DPoP token", status, tok)
	}
	access := tok["access_token"].(string)
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			client := mcp.NewClient(&mcp.Implementation{Name: "e2e-dpop", Version: "1"}, nil)
			tr := &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp",
				HTTPClient: &http.Client{Transport: dpopTransport{token: access, endpoint: e.url + "/mcp", key: key}}}
			cs, err := client.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: v})
			must(t, err)
			defer cs.Close()
			var w who
			must(t, json.Unmarshal([]byte(text(call(t, cs, "whoami", map[string]any{}))), &w))
			if w.Person == nil || w.Person.Email != "ann@example.com" || w.App == nil || w.App.ID != e.client {
				t.Errorf("the handler saw %+v; want ann and the Wiki app", w)
			}
		})
	}
	mcpURL := e.url + "/mcp"
	replayed := key.proof("POST", mcpURL, access)
	if resp, body := dpopList(t, e.env, "DPoP "+access, replayed); resp.StatusCode != http.StatusOK {
		t.Fatalf("tools/list with a proof = %d %s", resp.StatusCode, body)
	}
	thief := newDPoPClientKey(t)
	for _, tc := range []struct{ what, authz, proof, want string }{
		{"the Bearer scheme", "Bearer " + access, "", "This OAuth token is bound to a DPoP key: send it as Authorization: DPoP <token> with a DPoP proof (RFC 9449), not as a Bearer token."},
		{"a replayed proof", "DPoP " + access, replayed, "was used already; make a new proof for every request."},
		{"another htu", "DPoP " + access, key.proof("POST", e.url+"/oauth/token", access), `The DPoP proof's htu is "` + e.url + `/oauth/token"; this request is to ` + mcpURL + "."},
		{"another htm", "DPoP " + access, key.proof("GET", mcpURL, access), `The DPoP proof's htm is "GET"; this request is POST.`},
		{"another token's ath", "DPoP " + access, key.proof("POST", mcpURL, "sfx_oat_other"), "The DPoP proof's ath is not the hash of the access token it comes with."},
		{"a stolen token with another key", "DPoP " + access, thief.proof("POST", mcpURL, access), "The DPoP proof is signed by a key this OAuth token is not bound to."},
		{"no proof", "DPoP " + access, "", "Send exactly one DPoP header with a proof, not 0."},
	} {
		resp, body := dpopList(t, e.env, tc.authz, tc.proof)
		challenges := strings.Join(resp.Header.Values("WWW-Authenticate"), "\n")
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, tc.want) || !strings.Contains(challenges, `DPoP algs="ES256`) {
			t.Errorf("%s = %d %s\nchallenges %s;\nwant 401 saying %q with a DPoP challenge", tc.what, resp.StatusCode, body, challenges, tc.want)
		}
	}
}

// TestEnterpriseDPoPAcrossGateways: two gateways on one PostgreSQL store
// share the replay cache: an ID-JAG or a proof one accepted, the other
// refuses.
func TestEnterpriseDPoPAcrossGateways(t *testing.T) {
	t.Parallel()
	var pg string
	bus := startNATS(t)
	e := newEnterprise(t, onPostgres(&pg), withConfig(func(c *gateway.Config) {
		c.Bus, c.BusHeartbeat, c.UpstreamAllowLoopback = bus, 250*time.Millisecond, true
		c.PublicURL, c.AllowedHosts = "https://mcp.example.com", []string{"*"}
	}))
	sib := e.sibling()
	sib.url = "http://" + sib.gw.Addr()
	key := newDPoPClientKey(t)
	jag := e.idJAG("00u-ann", "ann@example.com")
	status, tok := e.token(jag, key.proof("POST", e.issuer+"/oauth/token", ""))
	if status != http.StatusOK || tok["token_type"] != "DPoP" {
		t.Fatalf("jwt-bearer grant with a proof = %d %v", status, tok)
	}
	onB := *e
	onB.env = sib
	if status, m := onB.token(jag, ""); status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(m["error_description"]), "was used already") {
		t.Errorf("the same ID-JAG at the other gateway = %d %v; want invalid_grant, used already", status, m)
	}
	access := tok["access_token"].(string)
	proof := key.proof("POST", e.issuer+"/mcp", access)
	if resp, body := dpopList(t, e.env, "DPoP "+access, proof); resp.StatusCode != http.StatusOK {
		t.Fatalf("first gateway = %d %s", resp.StatusCode, body)
	}
	if resp, body := dpopList(t, sib, "DPoP "+access, proof); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "was used already") {
		t.Errorf("the other gateway, same proof = %d %s; want 401, used already", resp.StatusCode, body)
	}
	if resp, body := dpopList(t, sib, "DPoP "+access, key.proof("POST", e.issuer+"/mcp", access)); resp.StatusCode != http.StatusOK {
		t.Errorf("the other gateway, a fresh proof = %d %s; want 200", resp.StatusCode, body)
	}
}

// TestEnterpriseEgress: the IdP's metadata and keys are fetched under the
// rules of the gateway's other outbound fetches: without
// --upstream-allow-loopback, an IdP on loopback is not dialled, the client
// reads only that the keys could not be fetched, and the log says why.
func TestEnterpriseEgress(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	e := newEnterprise(t, withConfig(func(c *gateway.Config) { c.UpstreamAllowLoopback = false }), func(o *envOptions) { o.logs = &logs })
	status, m := e.token(e.idJAG("00u-ann", "ann@example.com"), "")
	want := "The gateway could not fetch the signing keys of " + e.idp.srv.URL + ". Try again later; if it keeps failing, the gateway's log says why."
	if status != http.StatusBadRequest || m["error"] != "invalid_grant" || m["error_description"] != want {
		t.Errorf("jwt-bearer grant = %d %v; want invalid_grant %q", status, m, want)
	}
	if !strings.Contains(logs.String(), "identity provider keys not fetched") || !strings.Contains(logs.String(), "--upstream-allow-loopback") {
		t.Errorf("the log does not say the loopback address was refused:\n%s", logs.String())
	}
}

// TestEnterpriseDPoPNonce: with --oauth-dpop-nonce, a proof without a
// nonce gets use_dpop_nonce and a DPoP-Nonce to retry with, at the token
// endpoint (400) and at /mcp (401 with the DPoP challenge); the retries
// succeed.
func TestEnterpriseDPoPNonce(t *testing.T) {
	t.Parallel()
	e := newEnterprise(t, withConfig(func(c *gateway.Config) { c.UpstreamAllowLoopback, c.OAuthDPoPNonce = true, true }))
	key := newDPoPClientKey(t)
	jag := e.idJAG("00u-ann", "ann@example.com")
	status, m := e.token(jag, key.proof("POST", e.url+"/oauth/token", ""))
	if status != http.StatusBadRequest || m["error"] != "use_dpop_nonce" {
		t.Fatalf("a proof without a nonce = %d %v; want use_dpop_nonce", status, m)
	}
	resp, err := http.Post(e.url+"/oauth/token", "application/x-www-form-urlencoded", strings.NewReader(""))
	must(t, err)
	resp.Body.Close()
	nonce := resp.Header.Get("DPoP-Nonce")
	if nonce == "" {
		t.Fatal("the token endpoint sends no DPoP-Nonce")
	}
	status, tok := e.token(jag, key.proofNonce("POST", e.url+"/oauth/token", "", nonce))
	if status != http.StatusOK || tok["token_type"] != "DPoP" {
		t.Fatalf("with the nonce = %d %v; want a DPoP token", status, tok)
	}
	access := tok["access_token"].(string)
	r, body := dpopList(t, e.env, "DPoP "+access, key.proof("POST", e.url+"/mcp", access))
	challenge := strings.Join(r.Header.Values("WWW-Authenticate"), "\n")
	if r.StatusCode != http.StatusUnauthorized || !strings.Contains(challenge, `error="use_dpop_nonce"`) || r.Header.Get("DPoP-Nonce") == "" {
		t.Fatalf("/mcp without a nonce = %d %s, challenge %s; want 401 use_dpop_nonce with a DPoP-Nonce", r.StatusCode, body, challenge)
	}
	if r, body := dpopList(t, e.env, "DPoP "+access, key.proofNonce("POST", e.url+"/mcp", access, r.Header.Get("DPoP-Nonce"))); r.StatusCode != http.StatusOK {
		t.Errorf("/mcp with the nonce = %d %s", r.StatusCode, body)
	}
}
