package bridge

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// A saved sign-in whose token expired: the bridge refreshes it, naming the
// resource it was issued for. A refusal of the grant asks a person to sign
// in; an authorization server that fails (5xx) or is unreachable is tried
// again later, without a sign-in; an expired token with no refresh token
// asks for a sign-in.
func TestSavedSignInRefresh(t *testing.T) {
	var status int
	var body, resource string
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		resource = r.PostForm.Get("resource")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	defer as.Close()
	expired := &oauth2.Token{AccessToken: "old", RefreshToken: "rt-1", TokenType: "Bearer", Expiry: time.Now().Add(-time.Minute)}

	for _, c := range []struct {
		name     string
		status   int
		body     string
		token    *oauth2.Token
		signIn   bool
		wantErr  string
		resource string
	}{
		{"refreshed", 200, `{"access_token":"new","token_type":"Bearer","expires_in":3600}`, expired, false, "", "https://mcp.example.com/mcp"},
		{"grant refused", 400, `{"error":"invalid_grant"}`, expired, true, "the authorization server refused to refresh the token: invalid_grant", "https://mcp.example.com/mcp"},
		{"server failing", 503, `{}`, expired, false, `refresh the OAuth token of "gh": the authorization server of mcp.example.com refused: HTTP 503`, "https://mcp.example.com/mcp"},
		{"no refresh token", 200, `{}`, &oauth2.Token{AccessToken: "old", TokenType: "Bearer", Expiry: time.Now().Add(-time.Minute)}, true, "the token expired and the authorization server gave no refresh token", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body, resource = c.status, c.body, ""
			b, err := New(Server{Name: "gh", URL: "https://mcp.example.com/mcp"}, Options{GatewayURL: "http://127.0.0.1:1", APIKey: fakeAgentKey,
				TokenDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.saveTokens(&tokenFile{URL: b.srv.URL, ClientID: "c", TokenURL: as.URL, Resource: "https://mcp.example.com/mcp", Token: c.token}); err != nil {
				t.Fatal(err)
			}
			h, err := b.newOAuthHandler()
			if err != nil {
				t.Fatal(err)
			}
			src, _ := h.TokenSource(t.Context())
			tok, err := src.Token()
			switch {
			case c.wantErr == "" && (err != nil || tok.AccessToken != "new"):
				t.Errorf("Token() = %v, %v; want the new token", tok, err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr) || errors.Is(err, ErrSignIn) != c.signIn):
				t.Errorf("Token() = %v; want %q, sign-in %v", err, c.wantErr, c.signIn)
			}
			if resource != c.resource {
				t.Errorf("the refresh named resource %q, want %q", resource, c.resource)
			}
		})
	}
}
