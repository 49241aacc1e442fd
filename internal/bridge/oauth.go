package bridge

// A remote MCP server behind OAuth (the MCP authorization spec): a person
// signs in once with Login (`spacefix bridge login NAME`), which discovers
// the authorization server from the server's 401, registers a client
// (dynamic registration), runs the authorization code flow with PKCE with
// the redirect taken on a loopback port, and keeps the tokens in a file
// only this user can read. The running bridge then sends the access token,
// refreshes it as needed (saving the new one), and says clearly when a
// person must sign in again.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/spacefix/spacefix/internal/oauthclient"
)

// tokenFile is what a sign-in keeps: the client the authorization server
// registered, its endpoints, and the current token.
type tokenFile struct {
	// URL is the MCP server the tokens are for; a file for another URL is
	// not used.
	URL          string   `json:"url"`
	ClientID     string   `json:"clientId"`
	ClientSecret string   `json:"clientSecret,omitempty"`
	AuthURL      string   `json:"authUrl"`
	TokenURL     string   `json:"tokenUrl"`
	Scopes       []string `json:"scopes,omitempty"`
	// Resource is the resource indicator (RFC 8707) the tokens were asked
	// for, named again in each refresh; files saved before it was kept
	// have none and refresh without.
	Resource string        `json:"resource,omitempty"`
	Token    *oauth2.Token `json:"token"`
}

// client is the OAuth client the tokens were issued to.
func (f *tokenFile) client() oauthclient.Client {
	return oauthclient.Client{ID: f.ClientID, Secret: f.ClientSecret, AuthURL: f.AuthURL, TokenURL: f.TokenURL,
		Scopes: f.Scopes, Resource: f.Resource, Host: oauthclient.Host(f.URL)}
}

// DefaultTokenDir is where sign-ins are kept: $XDG_CONFIG_HOME/spacefix/bridge
// (else ~/.config/spacefix/bridge).
func DefaultTokenDir() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the folder for sign-in tokens: %w", err)
	}
	return filepath.Join(dir, "spacefix", "bridge"), nil
}

func (b *Bridge) tokenPath() (string, error) {
	dir := b.opts.TokenDir
	if dir == "" {
		d, err := DefaultTokenDir()
		if err != nil {
			return "", err
		}
		dir = d
	}
	return filepath.Join(dir, b.srv.Name+".json"), nil
}

// loadTokens reads the sign-in for this server, or nil when there is none
// (or it is for another URL).
func (b *Bridge) loadTokens() (*tokenFile, error) {
	path, err := b.tokenPath()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the sign-in of %q: %w", b.srv.Name, err)
	}
	var f tokenFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("read the sign-in of %q (%s): %w; sign in again with `spacefix bridge login %s`", b.srv.Name, path, err, b.srv.Name)
	}
	if f.URL != b.srv.URL || f.Token == nil {
		return nil, nil
	}
	return &f, nil
}

// saveTokens writes f where only this user can read it.
func (b *Bridge) saveTokens(f *tokenFile) error {
	path, err := b.tokenPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("save the sign-in: %w", err)
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("save the sign-in: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("save the sign-in: %w", err)
	}
	return nil
}

// ErrSignIn says a person must sign in (again) to a remote server.
var ErrSignIn = errors.New("sign-in needed")

func (b *Bridge) signInError() error {
	return fmt.Errorf("%w: the MCP server %q at %s asks for OAuth authorization; a person must sign in: run `spacefix bridge login %s`",
		ErrSignIn, b.srv.Name, redactURL(b.srv.URL), b.srv.Name)
}

// oauthHandler is the running bridge's side: it sends the saved token,
// refreshes and saves it, and on a 401 or 403 says a person must sign in.
type oauthHandler struct {
	b *Bridge

	mu  sync.Mutex
	src oauth2.TokenSource // nil: no sign-in yet
}

var _ auth.OAuthHandler = (*oauthHandler)(nil)

// newOAuthHandler reads the sign-in for b's server, if any.
func (b *Bridge) newOAuthHandler() (*oauthHandler, error) {
	h := &oauthHandler{b: b}
	f, err := b.loadTokens()
	if err != nil || f == nil {
		return h, err
	}
	h.src = &savingSource{b: b, file: f, src: f.client().TokenSource(&http.Client{Transport: b.opts.httpTransport()}, f.Token)}
	return h, nil
}

func (h *oauthHandler) TokenSource(context.Context) (oauth2.TokenSource, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.src == nil {
		return nil, nil
	}
	return h.src, nil
}

func (h *oauthHandler) Authorize(_ context.Context, _ *http.Request, resp *http.Response) error {
	if resp != nil && resp.Body != nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
	return h.b.signInError()
}

// savingSource refreshes through src and saves each new token.
type savingSource struct {
	b    *Bridge
	mu   sync.Mutex
	file *tokenFile
	src  oauth2.TokenSource
}

func (s *savingSource) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.src.Token()
	if err != nil {
		var r *oauthclient.Refused
		switch {
		case errors.Is(err, oauthclient.ErrNoRefreshToken):
			return nil, fmt.Errorf("%w (%v)", s.b.signInError(), err)
		case errors.As(err, &r) && r.Code != "" && !strings.HasPrefix(r.Code, "HTTP 5"):
			return nil, fmt.Errorf("%w (the authorization server refused to refresh the token: %s)", s.b.signInError(), r.Code)
		}
		return nil, fmt.Errorf("refresh the OAuth token of %q: %w", s.b.srv.Name, err) // unreachable or failing: try again later
	}
	if s.file.Token == nil || t.AccessToken != s.file.Token.AccessToken {
		s.file.Token = t
		if err := s.b.saveTokens(s.file); err != nil {
			s.b.log.Warn("bridge: could not save the refreshed token; the next start may need a sign-in", "err", err)
		}
		s.b.log.Info("bridge: OAuth token refreshed")
	}
	return t, nil
}

// LoginOptions configure [Bridge.Login].
type LoginOptions struct {
	// Out receives the URL the person opens, and the outcome.
	Out io.Writer
	// ClientName is how the authorization server shows the bridge. Empty
	// means "Spacefix bridge (<name>)".
	ClientName string
	// ClientIDMetadataURL is the https URL of a Client ID Metadata Document
	// describing the bridge (its redirect URI http://127.0.0.1/callback,
	// any port, as loopback redirects are matched). An authorization server
	// that supports such documents takes the URL as the client id;
	// otherwise, and when empty, the bridge registers dynamically.
	ClientIDMetadataURL string
	// Port is the loopback port the redirect comes to. Zero means any free
	// port.
	Port int
}

// Login signs a person in to the bridge's remote server: it prints the
// authorization URL to opts.Out, takes the redirect on a loopback port,
// exchanges the code (PKCE), and saves the tokens. It returns when the
// tokens are saved, or ctx ends.
func (b *Bridge) Login(ctx context.Context, opts LoginOptions) error {
	if b.srv.URL == "" {
		return fmt.Errorf("login %q: only remote servers (a url) sign in; this one is a command", b.srv.Name)
	}
	if opts.ClientName == "" {
		opts.ClientName = "Spacefix bridge (" + b.srv.Name + ")"
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", opts.Port))
	if err != nil {
		return fmt.Errorf("login: listen for the redirect: %w", err)
	}
	defer l.Close()
	redirect := fmt.Sprintf("http://127.0.0.1:%d/callback", l.Addr().(*net.TCPAddr).Port)
	results := make(chan *auth.AuthorizationResult, 1)
	srv := &http.Server{Handler: callbackHandler(results), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	defer srv.Close()

	hc := &http.Client{Transport: b.opts.httpTransport()}
	h := &loginHandler{b: b, hc: hc, out: opts.Out, redirect: redirect, results: results,
		reg: oauthclient.RegisterOptions{RedirectURI: redirect, ClientName: opts.ClientName, ClientIDMetadataURL: opts.ClientIDMetadataURL}}
	client := mcp.NewClient(&mcp.Implementation{Name: "spacefix-bridge", Version: Version}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: b.srv.URL, HTTPClient: &http.Client{Transport: headers{h: b.srv.Headers, base: b.opts.httpTransport()}},
		OAuthHandler: h, MaxRetries: -1}
	cs, err := client.Connect(ctx, tr, nil)
	switch {
	case err == nil:
		cs.Close()
	case h.saved != nil && fallbackToSSE(err):
		// Signed in; the server speaks only the legacy SSE transport,
		// which the bridge uses with these tokens.
	default:
		return fmt.Errorf("login %q: %w", b.srv.Name, err)
	}
	if h.saved == nil {
		fmt.Fprintf(opts.Out, "%s did not ask for a sign-in; nothing to save.\n", redactURL(b.srv.URL))
		return nil
	}
	if err := b.saveTokens(h.saved); err != nil {
		return err
	}
	path, _ := b.tokenPath()
	fmt.Fprintf(opts.Out, "Signed in to %q. The tokens are in %s (readable by you only); `spacefix bridge` refreshes them.\n", b.srv.Name, path)
	return nil
}

// loginHandler is Login's side of the MCP client's OAuth: on the server's
// 401 it runs the authorization code flow through internal/oauthclient
// (discovery, registration, PKCE), the person's browser bringing the code
// back to the loopback redirect.
type loginHandler struct {
	b        *Bridge
	hc       *http.Client
	out      io.Writer
	redirect string
	results  <-chan *auth.AuthorizationResult
	reg      oauthclient.RegisterOptions

	mu    sync.Mutex
	src   oauth2.TokenSource
	saved *tokenFile
}

var _ auth.OAuthHandler = (*loginHandler)(nil)

func (h *loginHandler) TokenSource(context.Context) (oauth2.TokenSource, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.src, nil
}

func (h *loginHandler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	challenges := resp.Header.Values("WWW-Authenticate")
	if resp.StatusCode == http.StatusForbidden && !strings.Contains(strings.Join(challenges, ","), "insufficient_scope") {
		return nil // not a matter of authorization; the answer reaches the caller
	}
	srv, err := oauthclient.Discover(ctx, h.hc, req.URL.String(), challenges, oauthclient.DiscoverOptions{RefreshTokens: true})
	if err != nil {
		return err
	}
	c, err := oauthclient.Register(ctx, h.hc, srv, h.reg)
	if err != nil {
		return err
	}
	state, verifier := rand.Text(), oauthclient.NewVerifier()
	fmt.Fprintf(h.out, "Open this URL in a browser to sign in to %q:\n\n  %s\n\nWaiting for the redirect to %s …\n", h.b.srv.Name, c.AuthorizeURL(state, verifier, srv.Resource), h.redirect)
	var r *auth.AuthorizationResult
	select {
	case r = <-h.results:
	case <-ctx.Done():
		return ctx.Err()
	}
	if r.State != state {
		return errors.New("the redirect's state is not the one sent: sign in again")
	}
	if err := srv.CheckIssuer(r.Iss); err != nil {
		return err
	}
	t, err := c.Exchange(ctx, h.hc, r.Code, verifier, srv.Resource)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.saved = &tokenFile{URL: h.b.srv.URL, ClientID: c.ID, ClientSecret: c.Secret,
		AuthURL: c.AuthURL, TokenURL: c.TokenURL, Scopes: c.Scopes, Resource: c.Resource, Token: t}
	h.src = c.TokenSource(h.hc, t)
	return nil
}

// callbackHandler takes the authorization server's redirect.
func callbackHandler(results chan<- *auth.AuthorizationResult) http.Handler {
	var once sync.Once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if e := q.Get("error"); e != "" {
			http.Error(w, "Sign-in failed: "+e+" "+q.Get("error_description"), http.StatusBadRequest)
			return
		}
		if q.Get("code") == "" {
			http.Error(w, "No authorization code in the redirect.", http.StatusBadRequest)
			return
		}
		once.Do(func() {
			results <- &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}
		})
		fmt.Fprintln(w, "Signed in. You can close this tab and go back to the terminal.")
	})
}
