package oauthclient_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/oauth2"

	"github.com/spacefix/spacefix/internal/oauthclient"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// as serves an authorization server's metadata at the root of mux.
func as(mux *http.ServeMux, base func() string, extra map[string]any) {
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		m := map[string]any{"issuer": base(), "authorization_endpoint": base() + "/authorize", "token_endpoint": base() + "/token",
			"code_challenge_methods_supported": []string{"S256"}, "response_types_supported": []string{"code"}}
		for k, v := range extra {
			m[k] = v
		}
		writeJSON(w, http.StatusOK, m)
	})
}

// TestDiscoverFromChallenge: the 401's resource_metadata leads to the
// authorization server; the challenge's scope is asked for, with
// offline_access when the server has it; CIMD and iss support are read.
func TestDiscoverFromChallenge(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()

	mux.HandleFunc("/mcp", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata=%q, scope="read write"`, srv.URL+"/meta/mcp"))
		w.WriteHeader(http.StatusUnauthorized)
	})
	mux.HandleFunc("GET /meta/mcp", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"resource": srv.URL + "/mcp", "authorization_servers": []string{srv.URL + "/as"}})
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server/as", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"issuer": srv.URL + "/as", "authorization_endpoint": srv.URL + "/as/authorize",
			"token_endpoint": srv.URL + "/as/token", "registration_endpoint": srv.URL + "/as/register",
			"code_challenge_methods_supported": []string{"S256"}, "response_types_supported": []string{"code"},
			"scopes_supported": []string{"read", "write", "offline_access"}, "client_id_metadata_document_supported": true,
			"authorization_response_iss_parameter_supported": true})
	})
	challenges, unauthorized, err := oauthclient.Probe(t.Context(), nil, srv.URL+"/mcp")
	if err != nil || !unauthorized || len(challenges) != 1 {
		t.Fatalf("Probe = %q, %v, %v", challenges, unauthorized, err)
	}
	s, err := oauthclient.Discover(t.Context(), nil, srv.URL+"/mcp", challenges, oauthclient.DiscoverOptions{RefreshTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	want := oauthclient.Server{Resource: srv.URL + "/mcp", Issuer: srv.URL + "/as", AuthURL: srv.URL + "/as/authorize",
		TokenURL: srv.URL + "/as/token", RegistrationURL: srv.URL + "/as/register", Scopes: []string{"read", "write", "offline_access"},
		CIMD: true, IssParameter: true}
	if s.Resource != want.Resource || s.Issuer != want.Issuer || s.AuthURL != want.AuthURL || s.TokenURL != want.TokenURL ||
		s.RegistrationURL != want.RegistrationURL || !slices.Equal(s.Scopes, want.Scopes) || !s.CIMD || !s.IssParameter {
		t.Errorf("Discover = %+v;\nwant %+v", *s, want)
	}
	// CIMD: the document's URL is the client id, no registration.
	c, err := oauthclient.Register(t.Context(), nil, s, oauthclient.RegisterOptions{RedirectURI: "https://gw.example/cb", ClientIDMetadataURL: "https://gw.example/client.json"})
	if err != nil || c.ID != "https://gw.example/client.json" || c.Secret != "" {
		t.Errorf("Register with CIMD = %+v, %v", c, err)
	}
	_, err = oauthclient.Register(t.Context(), nil, s, oauthclient.RegisterOptions{RedirectURI: "https://gw.example/cb", ClientIDMetadataURL: "http://gw.example/client.json"})
	if want := `the client id metadata document URL "http://gw.example/client.json" must be an https URL with a path`; err == nil || err.Error() != want {
		t.Errorf("Register with an http CIMD URL = %v; want %s", err, want)
	}
	u, _ := url.Parse(c.AuthorizeURL("st", oauthclient.NewVerifier(), s.Resource))
	if q := u.Query(); q.Get("client_id") != c.ID || q.Get("state") != "st" || q.Get("code_challenge_method") != "S256" ||
		q.Get("resource") != srv.URL+"/mcp" || q.Get("redirect_uri") != "https://gw.example/cb" || q.Get("scope") != "read write offline_access" {
		t.Errorf("authorize URL %s", u)
	}
}

// TestDiscoverFallbacks: without any protected resource metadata the
// remote's origin is its authorization server (2025-03-26); without its
// metadata, its /authorize, /token and /register are.
func TestDiscoverFallbacks(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	s, err := oauthclient.Discover(t.Context(), nil, srv.URL+"/v1/mcp", nil, oauthclient.DiscoverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Resource != srv.URL+"/v1/mcp" || s.Issuer != srv.URL || s.AuthURL != srv.URL+"/authorize" || s.TokenURL != srv.URL+"/token" ||
		s.RegistrationURL != srv.URL+"/register" || len(s.Scopes) != 0 {
		t.Errorf("Discover = %+v", *s)
	}
	// Protected resource metadata at the root names the resource by origin.
	mux.HandleFunc("GET /.well-known/oauth-protected-resource", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"resource": srv.URL, "authorization_servers": []string{srv.URL}, "scopes_supported": []string{"mcp"}})
	})
	as(mux, func() string { return srv.URL }, nil)
	s, err = oauthclient.Discover(t.Context(), nil, srv.URL+"/v1/mcp", nil, oauthclient.DiscoverOptions{RefreshTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Resource != srv.URL || s.RegistrationURL != "" || !slices.Equal(s.Scopes, []string{"mcp"}) || s.CIMD {
		t.Errorf("Discover = %+v", *s)
	}
	_, err = oauthclient.Register(t.Context(), nil, s, oauthclient.RegisterOptions{RedirectURI: "https://gw.example/cb"})
	if want := "the authorization server of " + strings.TrimPrefix(srv.URL, "http://") + " takes no dynamic client registration"; err == nil || err.Error() != want {
		t.Errorf("Register = %v; want %s", err, want)
	}
}

// TestRefusalsSayTheCodeOnly: a token endpoint's refusal reaches people as
// the host and the OAuth error code; its description, which may echo what
// was sent, does not.
func TestRefusalsSayTheCodeOnly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.Form.Get("grant_type") == "refresh_token" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "token " + r.Form.Get("refresh_token") + " revoked"})
			return
		}
		http.Error(w, "upstream broke: "+r.Form.Get("code"), http.StatusBadGateway)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	c := oauthclient.Client{ID: "c1", TokenURL: srv.URL, Host: host}
	_, err := c.Refresh(t.Context(), nil, "rt-secret")
	if want := "the authorization server of " + host + " refused: invalid_grant"; err == nil || err.Error() != want || !oauthclient.InvalidGrant(err) {
		t.Errorf("Refresh = %v; want %s", err, want)
	}
	_, err = c.Exchange(t.Context(), nil, "code-secret", "v", "https://r.example")
	if want := "the authorization server of " + host + " refused: HTTP 502"; err == nil || err.Error() != want || oauthclient.InvalidGrant(err) {
		t.Errorf("Exchange = %v; want %s", err, want)
	}
	var r *oauthclient.Refused
	if !errors.As(err, &r) || r.Host != host {
		t.Errorf("%v is not a Refused of %s", err, host)
	}
}

// TestCheckIssuer: RFC 9207 as the authorization server advertises it.
func TestCheckIssuer(t *testing.T) {
	with := &oauthclient.Server{Resource: "https://mcp.example/mcp", Issuer: "https://as.example", IssParameter: true}
	without := &oauthclient.Server{Resource: "https://mcp.example/mcp", Issuer: "https://as.example"}
	for _, c := range []struct {
		s    *oauthclient.Server
		iss  string
		want string
	}{
		{with, "https://as.example", ""},
		{with, "", "the authorization server of mcp.example sends its issuer with each answer, and this answer has none"},
		{with, "https://evil.example", "the answer came from another authorization server than the one of mcp.example"},
		{without, "", ""},
		{without, "https://as.example", ""},
		{without, "https://evil.example", "the answer came from another authorization server than the one of mcp.example"},
	} {
		err := c.s.CheckIssuer(c.iss)
		if got := fmt.Sprint(err); (c.want == "" && err != nil) || (c.want != "" && got != c.want) {
			t.Errorf("CheckIssuer(%q) with iss support %v = %v; want %q", c.iss, c.s.IssParameter, err, c.want)
		}
	}
}

// TestTokenRequestsNameTheResource: the MCP spec wants the resource
// (RFC 8707) in every token request. Refreshes (Refresh and a
// TokenSource's) carry the client's, once, with the credentials and the
// body intact; the code exchange keeps the one it is given; a client
// without a resource sends none.
func TestTokenRequestsNameTheResource(t *testing.T) {
	var mu sync.Mutex
	var forms []url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		id, secret, _ := r.BasicAuth()
		f := r.PostForm
		f.Set("basic", id+":"+secret)
		mu.Lock()
		forms = append(forms, f)
		mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"access_token": "at", "token_type": "Bearer", "expires_in": 3600, "refresh_token": "rt-2"})
	}))
	defer srv.Close()
	c := oauthclient.Client{ID: "c1", Secret: "s1", TokenURL: srv.URL, Host: "as", Resource: "https://mcp.example/mcp"}
	if _, err := c.Refresh(t.Context(), nil, "rt-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TokenSource(nil, &oauth2.Token{RefreshToken: "rt-1", Expiry: time.Now().Add(-time.Minute)}).Token(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exchange(t.Context(), nil, "code-1", "verifier", "https://mcp.example/other"); err != nil {
		t.Fatal(err)
	}
	bare := c
	bare.Resource = ""
	if _, err := bare.Refresh(t.Context(), nil, "rt-1"); err != nil {
		t.Fatal(err)
	}
	want := []url.Values{
		{"grant_type": {"refresh_token"}, "refresh_token": {"rt-1"}, "resource": {"https://mcp.example/mcp"}, "basic": {"c1:s1"}},
		{"grant_type": {"refresh_token"}, "refresh_token": {"rt-1"}, "resource": {"https://mcp.example/mcp"}, "basic": {"c1:s1"}},
		{"grant_type": {"authorization_code"}, "code": {"code-1"}, "code_verifier": {"verifier"}, "resource": {"https://mcp.example/other"}, "basic": {"c1:s1"}},
		{"grant_type": {"refresh_token"}, "refresh_token": {"rt-1"}, "basic": {"c1:s1"}},
	}
	if diff := cmp.Diff(want, forms); diff != "" {
		t.Errorf("token requests (-want +got):\n%s", diff)
	}
}
