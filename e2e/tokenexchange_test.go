package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/bridge"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
)

// Token exchange (issue 28, "exchange" mode): a bridged remote acts as each
// caller's own account there by exchanging the call's identity token (the
// gateway-signed JWT) at the company's authorization server (RFC 8693).
// The AS (exchange_as_test.go) is zitadel/oidc's op package trusting the
// gateway's JWKS; the remote is a go-sdk server accepting only the AS's
// tokens.

const exchangeSecretEnv = "UPSTREAM_EXCHANGE_SECRET"

// exchangeForm posts form to the AS's token endpoint as the bridge's
// client (client_secret_basic with secret) and returns the status and the
// JSON answer.
func exchangeForm(t *testing.T, as *exchangeAS, secret string, form url.Values) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", as.tokenEndpoint(), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(exchangeClientID), url.QueryEscape(secret)) // RFC 6749 2.3.1
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("the AS answered %s %q: %v", resp.Status, body, err)
	}
	return resp.StatusCode, out
}

// tokenExchangeForm is an RFC 8693 request for subject.
func tokenExchangeForm(subject, audience string) url.Values {
	return url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "subject_token": {subject},
		"subject_token_type": {"urn:ietf:params:oauth:token-type:jwt"}, "audience": {audience}, "scope": {"mcp"}}
}

// remoteWhoami calls the remote's whoami directly with an access token.
func remoteWhoami(t *testing.T, r *exchangeRemote, token string) string {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: r.url(),
		HTTPClient: &http.Client{Transport: bearer{key: token, base: http.DefaultTransport}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, tr, nil)
	must(t, err)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	must(t, err)
	return text(res)
}

// TestTokenExchangeServer: the test AS and the remote stand on their own,
// driven by hand as RFC 8693 describes: a person's identity token from the
// gateway becomes an access token with which the remote says who it is;
// a token altered by one byte, another audience or a wrong client secret
// are refused with the RFC's errors; the client's own client_credentials
// token speaks for the client.
func TestTokenExchangeServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	as := newExchangeAS(t, e.url)
	remote := newExchangeRemote(t, as)
	e.startAgent(core.Options{}, idAgent(t))
	setAudience(t, e, e.agentKeyID(), as.issuer)
	ada := newOAuthMember(t, e, "ada@example.com", store.RoleEditor)
	idToken := tokenOf(t, e.connect("2025-11-25", ada.access, nil)).IdentityToken

	status, tok := exchangeForm(t, as, as.secret, tokenExchangeForm(idToken, upstreamAudience))
	if status != http.StatusOK || tok["issued_token_type"] != "urn:ietf:params:oauth:token-type:access_token" ||
		tok["token_type"] != "Bearer" || tok["expires_in"] == nil {
		t.Fatalf("token exchange = %d %v; want 200 with a Bearer access token", status, tok)
	}
	if got := remoteWhoami(t, remote, tok["access_token"].(string)); got != "ada@example.com" {
		t.Errorf("the remote's whoami with the exchanged token = %q; want ada@example.com", got)
	}
	if got := as.exchanges(strconv.FormatInt(ada.user.ID, 10)); got != 1 {
		t.Errorf("the AS counts %d exchanges for ada; want 1", got)
	}

	for _, c := range []struct {
		name, subject, audience, secret string
		status                          int
		err                             string
	}{
		{"an altered signature", alterOneByte(idToken, 2), upstreamAudience, as.secret, http.StatusBadRequest, "invalid_request"},
		{"another audience", idToken, "https://elsewhere.example", as.secret, http.StatusBadRequest, "invalid_target"},
		{"a wrong client secret", idToken, upstreamAudience, "not-the-secret", http.StatusUnauthorized, "invalid_client"},
	} {
		if status, got := exchangeForm(t, as, c.secret, tokenExchangeForm(c.subject, c.audience)); status != c.status || got["error"] != c.err {
			t.Errorf("token exchange with %s = %d %v; want %d %s", c.name, status, got, c.status, c.err)
		}
	}
	if got, refused := as.exchanges(strconv.FormatInt(ada.user.ID, 10)), as.refusals(); got != 1 || refused != 2 {
		t.Errorf("after the refusals the AS counts %d exchanges for ada and %d refused; want 1 and 2", got, refused)
	}

	status, cc := exchangeForm(t, as, as.secret, url.Values{"grant_type": {"client_credentials"}, "scope": {"mcp"}})
	if status != http.StatusOK || cc["access_token"] == nil {
		t.Fatalf("client_credentials = %d %v", status, cc)
	}
	if got := remoteWhoami(t, remote, cc["access_token"].(string)); got != exchangeClientID || as.clientCredentials() != 1 {
		t.Errorf("the remote's whoami with the client's own token = %q after %d client_credentials tokens; want %s after 1",
			got, as.clientCredentials(), exchangeClientID)
	}
	if got := remote.accepted(); len(got) != 2 || got[0] != tok["access_token"] || got[1] != cc["access_token"] {
		t.Errorf("the remote accepted %d tokens; want the exchanged one, then the client's", len(got))
	}

	// Told to refuse ada's token, the remote answers 401 to it from then on.
	if !remote.refuseCurrent(strconv.FormatInt(ada.user.ID, 10)) {
		t.Fatal("the remote saw no token of ada's")
	}
	for range 2 {
		if status := remoteStatus(t, remote, tok["access_token"].(string)); status != http.StatusUnauthorized {
			t.Errorf("the refused token at the remote = %d; want 401", status)
		}
	}
	if n := remote.unauthorized(); n != 2 {
		t.Errorf("the remote counts %d refusals of the refused token; want 2", n)
	}

	// Neither no token nor the identity token itself is a token of the remote's.
	resp, err := http.Post(remote.url(), "application/json", strings.NewReader(`{}`))
	must(t, err)
	resp.Body.Close()
	if status := remoteStatus(t, remote, idToken); resp.StatusCode != http.StatusUnauthorized || status != http.StatusUnauthorized ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Errorf("the remote without a token = %s (WWW-Authenticate %q), with the gateway's identity token = %d; want 401 for both",
			resp.Status, resp.Header.Get("WWW-Authenticate"), status)
	}
}

// remoteStatus is the status of an MCP initialize at the remote with token.
func remoteStatus(t *testing.T, r *exchangeRemote, token string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", r.url(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// exchangeWorld is a gateway in OAuth mode with two people, the AS, the
// remote, and a bridge in exchange mode in front of the remote.
type exchangeWorld struct {
	t          *testing.T
	e          *env
	gwLogs     *syncBuffer
	as         *exchangeAS
	remote     *exchangeRemote
	bridge     *runningBridge
	alice, bob oauthMember
	tool, host string
}

// newExchangeWorld starts it all, the bridge in this process; fallback
// is the bridge config's "fallback" ("" or "shared").
func newExchangeWorld(t *testing.T, fallback string) *exchangeWorld {
	t.Helper()
	w := newExchangeParts(t)
	servers, err := bridge.ParseConfig(w.bridgeConfig(fallback), func(name string) (string, bool) {
		if name == exchangeSecretEnv {
			return w.as.secret, true
		}
		return "", false
	})
	must(t, err)
	// Listing the remote's tools needs no sign-in: the bridge's own
	// client_credentials token does it.
	w.bridge = w.e.startBridge(servers[0], bridge.Options{TokenDir: t.TempDir()})
	w.listedWithClientCredentials()
	return w
}

// newExchangeParts starts all but the bridge.
func newExchangeParts(t *testing.T) *exchangeWorld {
	t.Helper()
	w := &exchangeWorld{t: t, gwLogs: &syncBuffer{}, tool: "up__whoami"}
	w.e = newEnv(t, func(o *envOptions) { o.logs = w.gwLogs })
	w.as = newExchangeAS(t, w.e.url)
	w.remote = newExchangeRemote(t, w.as)
	u, _ := url.Parse(w.remote.url())
	w.host = u.Host
	// The identity audience is what the AS expects: its issuer URL.
	setAudience(t, w.e, w.e.agentKeyID(), w.as.issuer)
	w.alice = newOAuthMember(t, w.e, "alice@example.com", store.RoleEditor)
	w.bob = newOAuthMember(t, w.e, "bob@example.com", store.RoleEditor)
	return w
}

// bridgeConfig is the bridge's config file: the remote "up" in exchange
// mode, the client secret in the environment variable exchangeSecretEnv.
func (w *exchangeWorld) bridgeConfig(fallback string) []byte {
	server := map[string]any{"url": w.remote.url(), "tokenExchange": map[string]string{
		"tokenEndpoint": w.as.tokenEndpoint(), "clientId": exchangeClientID, "clientSecretEnv": exchangeSecretEnv,
		"audience": upstreamAudience, "scope": "mcp"}}
	if fallback != "" {
		server["fallback"] = fallback
	}
	config, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"up": server}})
	return config
}

func (w *exchangeWorld) listedWithClientCredentials() {
	w.t.Helper()
	if w.as.clientCredentials() == 0 {
		w.t.Errorf("the bridge listed the remote's tools, and the AS issued no client_credentials token")
	}
}

func (w *exchangeWorld) subject(m oauthMember) string { return strconv.FormatInt(m.user.ID, 10) }

// whoami calls the bridged whoami through the gateway and returns what the
// remote said; an error of any kind fails the test.
func (w *exchangeWorld) whoami(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	r := call(t, cs, w.tool, map[string]any{})
	if r.IsError {
		t.Fatalf("%s: an error result: %s", w.tool, text(r))
	}
	return text(r)
}

// noSecretsLogged checks that neither the gateway's nor the bridge's log
// holds the client secret, an upstream token, a person's OAuth token or
// any of more.
func (w *exchangeWorld) noSecretsLogged(more ...string) {
	w.t.Helper()
	secrets := map[string]string{"the AS client secret": w.as.secret,
		"alice's OAuth token": w.alice.access, "bob's OAuth token": w.bob.access}
	for i, s := range more {
		secrets[fmt.Sprintf("secret %d", i+1)] = s
	}
	for i, tok := range w.remote.accepted() {
		secrets[fmt.Sprintf("upstream token %d", i+1)] = tok
	}
	noSecrets(w.t, "the gateway's log", w.gwLogs.String(), secrets)
	noSecrets(w.t, "the bridge's log", w.bridge.log.String(), secrets)
}

// TestTokenExchange: alice and bob call the bridged remote's whoami
// through the gateway with their OAuth tokens and each is answered with
// their own email: the bridge exchanged each one's identity token at the
// AS. Alice's later calls, from sessions at every protocol version, use
// her cached upstream token (the AS counts one exchange for her). When
// the remote refuses her token (401), the bridge exchanges once more and
// the call succeeds. Carol's four simultaneous first calls make one
// exchange. A call with a client key (no person) is refused with the
// sentence that says why, and reaches neither the AS nor the remote. No
// secret reaches a log.
func TestTokenExchange(t *testing.T) {
	t.Parallel()
	w := newExchangeWorld(t, "")
	alice, bob := w.subject(w.alice), w.subject(w.bob)

	aliceCS := w.e.connect("2025-11-25", w.alice.access, nil)
	if got := w.whoami(t, aliceCS); got != "alice@example.com" {
		t.Errorf("alice's whoami = %q; want alice@example.com", got)
	}
	if got := w.whoami(t, w.e.connect("2026-07-28", w.bob.access, nil)); got != "bob@example.com" {
		t.Errorf("bob's whoami = %q; want bob@example.com", got)
	}
	for _, v := range versions {
		if got := w.whoami(t, w.e.connect(v, w.alice.access, nil)); got != "alice@example.com" {
			t.Errorf("alice's whoami at %s = %q; want alice@example.com", v, got)
		}
	}
	if a, b := w.as.exchanges(alice), w.as.exchanges(bob); a != 1 || b != 1 {
		t.Errorf("the AS granted %d exchanges for alice and %d for bob; want 1 each (later calls use the cached token)", a, b)
	}

	// The remote refuses alice's token: one re-exchange, and the call succeeds.
	if !w.remote.refuseCurrent(alice) {
		t.Fatal("the remote saw no token of alice's")
	}
	if got := w.whoami(t, aliceCS); got != "alice@example.com" {
		t.Errorf("alice's whoami after the remote refused her token = %q; want alice@example.com", got)
	}
	if a, b, n := w.as.exchanges(alice), w.as.exchanges(bob), w.remote.unauthorized(); a != 2 || b != 1 || n != 1 {
		t.Errorf("after the 401: %d exchanges for alice, %d for bob, %d 401s at the remote; want 2, 1 and 1", a, b, n)
	}
	if got := w.whoami(t, aliceCS); got != "alice@example.com" || w.as.exchanges(alice) != 2 {
		t.Errorf("alice's next whoami = %q after %d exchanges; want alice@example.com with the new token cached (2)", got, w.as.exchanges(alice))
	}

	// Carol's first calls come at once: one exchange serves them all.
	carol := newOAuthMember(t, w.e, "carol@example.com", store.RoleEditor)
	var wg sync.WaitGroup
	got := make([]string, 4)
	for i := range got {
		cs := w.e.connect("2025-11-25", carol.access, nil)
		wg.Go(func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: w.tool, Arguments: map[string]any{}})
			if err == nil {
				got[i] = text(res)
			}
		})
	}
	wg.Wait()
	for i, g := range got {
		if g != "carol@example.com" {
			t.Errorf("carol's concurrent whoami %d = %q; want carol@example.com", i+1, g)
		}
	}
	if n := w.as.exchanges(w.subject(carol)); n != 1 {
		t.Errorf("the AS granted %d exchanges for carol's %d concurrent first calls; want 1", n, len(got))
	}

	// A key speaks for no person: the gateway refuses its call before the
	// bridge, the AS or the remote hears of it.
	exchanges, served := w.as.totalExchanges(), w.remote.whoamiCalls()
	want := fmt.Sprintf(`%s acts on %s as each person's own account, and this call comes with an agent key, not a person. Call it through an MCP client signed in with OAuth, or ask the bridge's operator to set "fallback": "shared".`, w.tool, w.host)
	for _, v := range versions {
		r := call(t, w.e.connect(v, w.e.clientKey, nil), w.tool, map[string]any{})
		if !r.IsError || text(r) != want {
			t.Errorf("a key's call at %s = %q (isError %v); want the error %q", v, text(r), r.IsError, want)
		}
	}
	if e, s := w.as.totalExchanges(), w.remote.whoamiCalls(); e != exchanges || s != served {
		t.Errorf("the key's calls made %d exchanges and %d whoami calls at the remote; want none", e-exchanges, s-served)
	}
	if w.as.refusals() != 0 {
		t.Errorf("the AS refused %d exchanges; want none", w.as.refusals())
	}
	w.noSecretsLogged(carol.access)
}

// TestTokenExchangeSharedFallback: with "fallback": "shared", a call with
// a client key uses the bridge's own account (here its client_credentials
// token, there being no `bridge login`), while a person's call still goes
// as that person.
func TestTokenExchangeSharedFallback(t *testing.T) {
	t.Parallel()
	w := newExchangeWorld(t, "shared")
	if got := w.whoami(t, w.e.connect("2025-11-25", w.e.clientKey, nil)); got != exchangeClientID {
		t.Errorf("a key's whoami with the shared fallback = %q; want the bridge's own client, %s", got, exchangeClientID)
	}
	if got := w.whoami(t, w.e.connect("2025-11-25", w.alice.access, nil)); got != "alice@example.com" {
		t.Errorf("alice's whoami with the shared fallback = %q; want alice@example.com", got)
	}
	if got := w.as.exchanges(w.subject(w.alice)); got != 1 {
		t.Errorf("the AS granted %d exchanges for alice; want 1", got)
	}
	w.noSecretsLogged()
}

// errorOf calls the bridged whoami and returns its error result's text,
// failing the test when the call succeeds or ends with a protocol error.
func (w *exchangeWorld) errorOf(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	r := call(t, cs, w.tool, map[string]any{})
	if !r.IsError {
		t.Fatalf("%s = %q; want an error result", w.tool, text(r))
	}
	return text(r)
}

// TestTokenExchangeFailures: what a person reads when the exchange cannot
// give the remote a token it takes. A remote that refuses every token of
// alice's gets exactly one re-exchange per call, then she reads why; an
// AS that refuses the identity token (the key's identity audience is not
// the one it expects) and a key with no identity audience at all each
// give a sentence that names the cause. A token that expires within 30 s
// is never reused.
func TestTokenExchangeFailures(t *testing.T) {
	t.Parallel()
	w := newExchangeWorld(t, "")
	alice, bob := w.subject(w.alice), w.subject(w.bob)
	asURL, _ := url.Parse(w.as.issuer)

	aliceCS := w.e.connect("2025-11-25", w.alice.access, nil)
	if got := w.whoami(t, aliceCS); got != "alice@example.com" {
		t.Fatalf("alice's whoami = %q", got)
	}
	w.remote.shun(alice, true)
	want := fmt.Sprintf("%s refused the token the exchange at %s gave for this person (HTTP 401), twice.", w.host, asURL.Host)
	if got := w.errorOf(t, aliceCS); got != want {
		t.Errorf("alice's whoami while the remote refuses her = %q; want %q", got, want)
	}
	if a, n := w.as.exchanges(alice), w.remote.unauthorized(); a != 2 || n != 2 {
		t.Errorf("one call refused twice: %d exchanges for alice, %d 401s; want 2 and 2 (one re-exchange, no more)", a, n)
	}
	w.remote.shun(alice, false)
	if got := w.whoami(t, aliceCS); got != "alice@example.com" || w.as.exchanges(alice) != 3 {
		t.Errorf("alice's whoami once the remote takes her again = %q after %d exchanges; want alice@example.com after 3", got, w.as.exchanges(alice))
	}

	// Tokens that expire within the 30 s margin are exchanged for every call.
	w.as.setLifetime(30 * time.Second)
	bobCS := w.e.connect("2025-11-25", w.bob.access, nil)
	for i := 1; i <= 2; i++ {
		if got := w.whoami(t, bobCS); got != "bob@example.com" || w.as.exchanges(bob) != i {
			t.Errorf("bob's call %d with 30 s tokens = %q after %d exchanges; want bob@example.com after %d", i, got, w.as.exchanges(bob), i)
		}
	}
	w.as.setLifetime(exchangeLifetime)

	// The key's identity tokens are for another audience: the AS refuses them.
	carol := newOAuthMember(t, w.e, "carol@example.com", store.RoleEditor)
	carolCS := w.e.connect("2025-11-25", carol.access, nil)
	setAudience(t, w.e, w.e.agentKeyID(), "https://elsewhere.example")
	want = fmt.Sprintf("The token exchange at %s failed: invalid_request.", asURL.Host)
	if got := w.errorOf(t, carolCS); got != want {
		t.Errorf("carol's whoami with the wrong identity audience = %q; want %q", got, want)
	}
	if n, r := w.as.exchanges(w.subject(carol)), w.as.refusals(); n != 0 || r != 1 {
		t.Errorf("the AS granted carol %d exchanges and refused %d; want 0 and 1", n, r)
	}

	// No identity audience: the gateway signs no identity token.
	setAudience(t, w.e, w.e.agentKeyID(), "")
	want = fmt.Sprintf("%s acts on %s as each person's own account through a token exchange, and the gateway sent no identity token with this call: the bridge's agent key needs an identity audience: spacefix keys set KEY_ID --identity-audience AUD", w.tool, w.host)
	if got := w.errorOf(t, carolCS); got != want {
		t.Errorf("carol's whoami without an identity audience = %q; want %q", got, want)
	}
	w.noSecretsLogged(carol.access)
}

// TestTokenExchangeCLI: the real `spacefix bridge --config FILE`, the
// client secret in its environment, as an operator runs it: alice and bob
// each call as themselves, and the secret is in none of its output.
func TestTokenExchangeCLI(t *testing.T) {
	t.Parallel()
	w := newExchangeParts(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "bridge.json")
	must(t, os.WriteFile(config, w.bridgeConfig(""), 0o600))
	cmd := exec.Command(binary(t, "../cmd/spacefix"), "bridge", "--url", w.e.url, "--key", w.e.agentKey, "--config", config)
	// A home of its own: no sign-in of the machine's user is found there.
	cmd.Env = append(os.Environ(), exchangeSecretEnv+"="+w.as.secret, "HOME="+dir, "XDG_CONFIG_HOME="+dir)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	must(t, cmd.Start())
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	w.bridge = &runningBridge{log: out, stop: p.kill}
	waitFor(t, "the bridge to list the remote's tools", func() bool {
		for _, r := range w.e.gw.Registry().All() {
			if r.Reg != nil && r.Reg.Name == "up" && len(r.Reg.Tools) > 0 {
				return true
			}
		}
		return false
	})
	w.listedWithClientCredentials()

	for _, m := range []oauthMember{w.alice, w.bob} {
		if got := w.whoami(t, w.e.connect("2025-11-25", m.access, nil)); got != m.user.Email {
			t.Errorf("%s's whoami through the bridge process = %q", m.user.Email, got)
		}
		if n := w.as.exchanges(w.subject(m)); n != 1 {
			t.Errorf("the AS granted %d exchanges for %s; want 1", n, m.user.Email)
		}
	}
	p.term()
	p.wait(t)
	if !strings.Contains(out.String(), `msg="bridge: connected to the MCP server" server=up`) {
		t.Errorf("the bridge process did not log its connection to the remote; the secrets check below would prove little:\n%s", out)
	}
	w.noSecretsLogged()
}

// TestTokenExchangeCluster: two gateways on PostgreSQL and NATS with one
// public URL; the exchange bridge is connected to A, and people call
// through B, which relays their calls: each is answered as themselves,
// the identity token B signed is one the AS trusts (the gateways share
// their keys), the bridge's cache serves a person whichever gateway the
// call came through, and B refuses a key's call with the same sentence.
func TestTokenExchangeCluster(t *testing.T) {
	t.Parallel()
	const public = "https://mcp.example.com"
	var pg string
	gwLogs := &syncBuffer{}
	a := newEnv(t, onPostgres(&pg), func(o *envOptions) { o.logs = gwLogs }, withConfig(func(c *gateway.Config) {
		c.Bus, c.BusHeartbeat = startNATS(t), 250*time.Millisecond
		c.PublicURL, c.AllowedHosts = public, []string{"*"}
	}))
	a.url = "http://" + a.gw.Addr()
	b := a.sibling()
	b.url = "http://" + b.gw.Addr()
	w := &exchangeWorld{t: t, e: a, gwLogs: gwLogs, tool: "up__whoami"}
	w.as = newExchangeASFor(t, public, a.url)
	w.remote = newExchangeRemote(t, w.as)
	u, _ := url.Parse(w.remote.url())
	w.host = u.Host
	setAudience(t, a, a.agentKeyID(), w.as.issuer)
	w.alice = newOAuthMember(t, a, "alice@example.com", store.RoleEditor)
	w.bob = newOAuthMember(t, a, "bob@example.com", store.RoleEditor)
	servers, err := bridge.ParseConfig(w.bridgeConfig(""), func(name string) (string, bool) { return w.as.secret, name == exchangeSecretEnv })
	must(t, err)
	w.bridge = a.startBridge(servers[0], bridge.Options{TokenDir: t.TempDir()})

	aliceB := b.connect("2025-11-25", w.alice.access, nil)
	waitFor(t, "gateway B to list the bridged tool on A", func() bool {
		return strings.Contains(strings.Join(toolNames(t, aliceB), ","), w.tool)
	})
	if got := w.whoami(t, aliceB); got != "alice@example.com" {
		t.Errorf("alice's whoami through B = %q; want alice@example.com", got)
	}
	if got := w.whoami(t, b.connect("2026-07-28", w.bob.access, nil)); got != "bob@example.com" {
		t.Errorf("bob's whoami through B = %q; want bob@example.com", got)
	}
	if got := w.whoami(t, a.connect("2025-11-25", w.alice.access, nil)); got != "alice@example.com" {
		t.Errorf("alice's whoami through A = %q; want alice@example.com", got)
	}
	if x, y := w.as.exchanges(w.subject(w.alice)), w.as.exchanges(w.subject(w.bob)); x != 1 || y != 1 {
		t.Errorf("the AS granted %d exchanges for alice and %d for bob; want 1 each", x, y)
	}
	want := fmt.Sprintf(`%s acts on %s as each person's own account, and this call comes with an agent key, not a person. Call it through an MCP client signed in with OAuth, or ask the bridge's operator to set "fallback": "shared".`, w.tool, w.host)
	if r := call(t, b.connect("2025-11-25", b.clientKey, nil), w.tool, map[string]any{}); !r.IsError || text(r) != want {
		t.Errorf("a key's call through B = %q (isError %v); want the error %q", text(r), r.IsError, want)
	}
	if n := w.as.refusals(); n != 0 {
		t.Errorf("the AS refused %d exchanges; want none", n)
	}
	w.noSecretsLogged()
}
