package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/oauth"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/testenv"
)

// registerRaw posts a registration body and returns the answer.
func registerRaw(t *testing.T, e *env, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(e.url+"/oauth/register", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// TestOAuthRegistrationRefusals: what a registration may carry, as an app
// registering with a running gateway sees it: fields over their limits
// and redirect URIs a code must not go to are refused with RFC 7591's
// errors saying what is wrong; an app's reverse-domain scheme gets its
// code.
func TestOAuthRegistrationRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct{ body, code, says string }{
		{`{"redirect_uris":["` + oauthRedirect + `"],"scope":"` + strings.Repeat("mcp:read ", 40) + `"}`,
			"invalid_client_metadata", "scope is longer than 256 bytes."},
		{`{"redirect_uris":["` + oauthRedirect + strings.Repeat(`","`+oauthRedirect, 10) + `"]}`,
			"invalid_client_metadata", "redirect_uris lists 11 URIs; at most 10 are allowed."},
		{`{"redirect_uris":["https://app.example/` + strings.Repeat("x", 500) + `"]}`,
			"invalid_client_metadata", "a URI in redirect_uris is longer than 512 bytes."},
		{`{"redirect_uris":["ftp://files.example/cb"]}`, "invalid_redirect_uri",
			`"ftp://files.example/cb" uses the ftp: scheme; a redirect URI must be https, http on 127.0.0.1, [::1] or localhost, or an app's own scheme in reverse-domain form such as com.example.app:/callback`},
		{`{"redirect_uris":["ws://127.0.0.1:9/cb"]}`, "invalid_redirect_uri",
			`"ws://127.0.0.1:9/cb" uses the ws: scheme; a redirect URI must be https, http on 127.0.0.1, [::1] or localhost, or an app's own scheme in reverse-domain form such as com.example.app:/callback`},
		{`{"redirect_uris":["view-source:https://app.example/cb"]}`, "invalid_redirect_uri",
			`"view-source:https://app.example/cb" uses the view-source: scheme; a redirect URI must be https, http on 127.0.0.1, [::1] or localhost, or an app's own scheme in reverse-domain form such as com.example.app:/callback`},
	} {
		st, m := registerRaw(t, e, tc.body)
		if st != http.StatusBadRequest || m["error"] != tc.code || m["error_description"] != tc.says {
			t.Errorf("register %.60s… = %d %v; want 400 %s %q", tc.body, st, m, tc.code, tc.says)
		}
	}
	if n, err := e.store.CountOAuthClients(context.Background()); err != nil || n != 0 {
		t.Errorf("%d clients stored after refused registrations (%v); want 0", n, err)
	}

	// A native app's own scheme: registered, and the person's approval
	// sends the browser there with the code.
	const native = "com.example.app:/callback"
	st, m := registerRaw(t, e, `{"client_name":"Native","redirect_uris":["`+native+`"],"token_endpoint_auth_method":"none"}`)
	if st != http.StatusCreated {
		t.Fatalf("register %s = %d %v; want 201", native, st, m)
	}
	p := newPerson(t, e, "nat@example.com")
	q := url.Values{"response_type": {"code"}, "client_id": {m["client_id"].(string)}, "redirect_uri": {native}, "state": {"s1"},
		"code_challenge": {handChallenge}, "code_challenge_method": {"S256"}, "resource": {e.url + "/mcp"}}
	back, err := p.consent(e.url+"/oauth/authorize?"+q.Encode(), "approve")
	if err != nil {
		t.Fatal(err)
	}
	if back.Scheme != "com.example.app" || back.Path != "/callback" || back.Query().Get("code") == "" {
		t.Errorf("approval sent the browser to %s; want %s with a code", back, native)
	}
}

// TestOAuthMetadataDocumentUnfetchable: the page a person sees for an app
// named by a metadata document the gateway cannot fetch says only that,
// whether the address was refused or the connection was; which address
// and what failed are in the gateway's log.
func TestOAuthMetadataDocumentUnfetchable(t *testing.T) {
	t.Parallel()
	doc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"client_id":"https://%s/client.json","redirect_uris":[%q]}`, r.Host, oauthRedirect)
	}))
	defer doc.Close()
	closedAddr := testenv.RefusingAddr(t)

	strictLogs, openLogs := &syncBuffer{}, &syncBuffer{}
	strict := newEnv(t, func(o *envOptions) { o.logs = strictLogs })
	open := newEnv(t, func(o *envOptions) {
		o.logs = openLogs
		o.config = func(c *gateway.Config) { c.OAuthPrivateClientIDs = true }
	})
	const says = "The app that sent you here cannot sign in: The gateway could not fetch the client's metadata document. Try again later; if it keeps failing, the gateway's operator can see why in its log."
	for _, tc := range []struct {
		what string
		e    *env
		logs *syncBuffer
		host string
		log  string
	}{
		{"a document on loopback", strict, strictLogs, strings.TrimPrefix(doc.URL, "https://"), "127.0.0.1 is not a global address"},
		{"a port that refuses", open, openLogs, closedAddr, "connection refused"},
	} {
		id := "https://" + tc.host + "/client.json"
		q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {oauthRedirect}, "state": {"s1"},
			"code_challenge": {handChallenge}, "code_challenge_method": {"S256"}}
		resp, err := http.Get(tc.e.url + "/oauth/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page := html.UnescapeString(string(b))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, says) {
			t.Errorf("%s: the page is %d and does not say %q:\n%s", tc.what, resp.StatusCode, says, page)
		}
		for _, leak := range []string{tc.host, "not a global", "dial", "refused", "connect:"} {
			if strings.Contains(page, leak) {
				t.Errorf("%s: the page gives away %q", tc.what, leak)
			}
		}
		if !strings.Contains(tc.logs.String(), tc.log) {
			t.Errorf("%s: the gateway's log does not say %q:\n%s", tc.what, tc.log, tc.logs.String())
		}
		st, m := tokenRequest(t, tc.e, url.Values{"grant_type": {"refresh_token"}, "client_id": {id}, "refresh_token": {"sfx_ort_x"}})
		if st != http.StatusUnauthorized || m["error"] != "invalid_client" || !strings.HasSuffix(says, fmt.Sprint(m["error_description"])) {
			t.Errorf("%s: token request = %d %v; want 401 invalid_client with the page's message", tc.what, st, m)
		}
	}
}

// TestOAuthRegistrationCap: a store holding as many registered clients as
// the gateway keeps takes no more, and the app is told what to do.
func TestOAuthRegistrationCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var (
		fill sync.WaitGroup
		slot = make(chan struct{}, 16) // PostgreSQL takes them side by side; SQLite one by one
		errs = make(chan error, 1)
	)
	for i := range oauth.DefaultMaxClients {
		slot <- struct{}{}
		fill.Go(func() {
			defer func() { <-slot }()
			if err := e.store.CreateOAuthClient(ctx, store.OAuthClient{ID: fmt.Sprintf("client_fill%05d", i), Metadata: []byte(`{}`)}); err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	fill.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	st, m := registerRaw(t, e, `{"redirect_uris":["`+oauthRedirect+`"],"token_endpoint_auth_method":"none"}`)
	if want := "This gateway has as many registered OAuth clients as it keeps (10000) and registers no more until unused ones are deleted. Try again in an hour, or name the client by a Client ID Metadata Document URL instead of registering."; st != http.StatusServiceUnavailable ||
		m["error"] != "temporarily_unavailable" || m["error_description"] != want {
		t.Errorf("registration past the cap = %d %v; want 503 temporarily_unavailable %q", st, m, want)
	}
}
