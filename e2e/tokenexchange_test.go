package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/store"
)

// Token exchange (issue 28, "exchange" mode): a bridged remote acts as each
// caller's own account there by exchanging the call's identity token (the
// gateway-signed JWT) at the company's authorization server (RFC 8693).
// The AS (exchange_as_test.go) is zitadel/oidc's op package trusting the
// gateway's JWKS; the remote is a go-sdk server accepting only the AS's
// tokens.

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
