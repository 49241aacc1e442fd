package bridge

// Exchange mode: the bridge trades each caller's identity token (the JWT
// the gateway signed for the agent key's identity audience) for an access
// token of the remote server at an authorization server's token endpoint
// (RFC 8693), and keeps it per person until shortly before it expires.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// RFC 8693 names.
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeJWT       = "urn:ietf:params:oauth:token-type:jwt"
	tokenTypeAccess    = "urn:ietf:params:oauth:token-type:access_token"
)

// exchangeMargin is how long before it expires an exchanged token is
// exchanged again rather than used.
const exchangeMargin = 30 * time.Second

// defaultExchangeTTL is how long a token whose answer gave no expires_in
// is kept (an upstream 401 drops it earlier).
const defaultExchangeTTL = 5 * time.Minute

// maxTokenAnswer bounds what the bridge reads of a token endpoint's answer.
const maxTokenAnswer = 64 << 10

// exchanger exchanges identity tokens for upstream tokens and keeps them
// per person. At most one exchange per person is in flight: callers that
// arrive meanwhile wait for its outcome.
type exchanger struct {
	te  TokenExchange
	hc  *http.Client
	now func() time.Time

	mu      sync.Mutex
	cache   map[string]exchanged         // by person id
	pending map[string]*exchangeInFlight // by person id
	joined  int                          // callers that waited for another's exchange
}

type exchanged struct {
	token   string
	expires time.Time // when to exchange again: 30 s before the token expires
}

type exchangeInFlight struct {
	done  chan struct{}
	token string
	err   error
}

func newExchanger(te TokenExchange, rt http.RoundTripper) *exchanger {
	return &exchanger{te: te, hc: &http.Client{Transport: rt, Timeout: connectTimeout, CheckRedirect: noRedirects},
		now: time.Now, cache: map[string]exchanged{}, pending: map[string]*exchangeInFlight{}}
}

// noRedirects keeps a token endpoint's redirect from carrying the client
// secret or a subject token elsewhere.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// token returns person's upstream token: the cached one while it is
// fresh, else one exchanged for subject (the call's identity token).
func (x *exchanger) token(ctx context.Context, person, subject string) (string, error) {
	x.mu.Lock()
	if c, ok := x.cache[person]; ok && x.now().Before(c.expires) {
		x.mu.Unlock()
		return c.token, nil
	}
	if f, ok := x.pending[person]; ok {
		x.joined++
		x.mu.Unlock()
		select {
		case <-f.done:
			return f.token, f.err
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
	f := &exchangeInFlight{done: make(chan struct{})}
	x.pending[person] = f
	x.mu.Unlock()

	// The exchange outlives a caller that gives up: others may wait on it.
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), connectTimeout)
	tok, ttl, err := x.exchange(ectx, subject)
	cancel()
	x.mu.Lock()
	delete(x.pending, person)
	if err == nil {
		if len(x.cache) >= maxCachedExchanges {
			x.forgetExpiredLocked()
		}
		x.cache[person] = exchanged{token: tok, expires: x.now().Add(ttl - exchangeMargin)}
	}
	x.mu.Unlock()
	f.token, f.err = tok, err
	close(f.done)
	return tok, err
}

// maxCachedExchanges is how many people's tokens the cache holds before
// it forgets the expired ones.
const maxCachedExchanges = 4 * maxPersonSessions

// forgetExpiredLocked drops the expired tokens. x.mu is held.
func (x *exchanger) forgetExpiredLocked() {
	now := x.now()
	for p, c := range x.cache {
		if !now.Before(c.expires) {
			delete(x.cache, p)
		}
	}
}

// drop forgets person's token when it is still stale (the remote refused
// it), so the next token call exchanges again.
func (x *exchanger) drop(person, stale string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if c, ok := x.cache[person]; ok && c.token == stale {
		delete(x.cache, person)
	}
}

// host is the token endpoint's host, as errors name it.
func (x *exchanger) host() string {
	if u, err := url.Parse(x.te.TokenEndpoint); err == nil {
		return u.Host
	}
	return "the token endpoint"
}

// exchangeError is what the caller reads when an exchange failed: the
// endpoint's host and the OAuth error code, never a token or a body.
func (x *exchanger) exchangeError(why string) error {
	return fmt.Errorf("The token exchange at %s failed: %s.", x.host(), why)
}

// exchange is one RFC 8693 request: the subject token for an access token
// of the remote, and how long that is valid.
func (x *exchanger) exchange(ctx context.Context, subject string) (string, time.Duration, error) {
	form := url.Values{
		"grant_type":           {grantTokenExchange},
		"subject_token":        {subject},
		"subject_token_type":   {tokenTypeJWT},
		"requested_token_type": {tokenTypeAccess},
	}
	if x.te.Audience != "" {
		form.Set("audience", x.te.Audience)
	}
	if x.te.Scope != "" {
		form.Set("scope", x.te.Scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.te.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, x.exchangeError("the endpoint's URL is not usable")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// RFC 6749 2.3.1: the id and secret are form-encoded, then Basic.
	req.SetBasicAuth(url.QueryEscape(x.te.ClientID), url.QueryEscape(x.te.ClientSecret))
	resp, err := x.hc.Do(req)
	if err != nil {
		return "", 0, x.exchangeError("no answer")
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenAnswer))
	if err != nil {
		return "", 0, x.exchangeError("no answer")
	}
	var answer struct {
		AccessToken string      `json:"access_token"`
		ExpiresIn   json.Number `json:"expires_in"`
		Error       string      `json:"error"`
	}
	jerr := json.Unmarshal(body, &answer)
	switch {
	case resp.StatusCode != http.StatusOK && jerr == nil && oauthCode(answer.Error):
		return "", 0, x.exchangeError(answer.Error)
	case resp.StatusCode != http.StatusOK:
		return "", 0, x.exchangeError(fmt.Sprintf("HTTP %d", resp.StatusCode))
	case jerr != nil || answer.AccessToken == "":
		return "", 0, x.exchangeError("the answer has no access_token")
	}
	ttl := defaultExchangeTTL
	if secs, err := answer.ExpiresIn.Int64(); err == nil && secs > 0 {
		ttl = time.Duration(secs) * time.Second
	}
	return answer.AccessToken, ttl, nil
}

// oauthCode reports whether s looks like an OAuth error code (RFC 6749
// 5.2: printable ASCII without " and \), short enough to show.
func oauthCode(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return false
		}
	}
	return true
}

// clientCredentials is the OAuth handler of exchange mode's shared
// session when no one signed in with `bridge login`: a client_credentials
// token of the exchange's client lists the remote's tools.
type clientCredentials struct {
	src oauth2.TokenSource
	b   *Bridge
}

func newClientCredentials(b *Bridge) *clientCredentials {
	te := b.srv.TokenExchange
	cfg := &clientcredentials.Config{ClientID: te.ClientID, ClientSecret: te.ClientSecret, TokenURL: te.TokenEndpoint,
		AuthStyle: oauth2.AuthStyleInHeader}
	if te.Scope != "" {
		cfg.Scopes = strings.Fields(te.Scope)
	}
	if te.Audience != "" {
		cfg.EndpointParams = url.Values{"audience": {te.Audience}}
	}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient,
		&http.Client{Transport: b.opts.httpTransport(), Timeout: connectTimeout, CheckRedirect: noRedirects})
	return &clientCredentials{src: cfg.TokenSource(ctx), b: b}
}

func (c *clientCredentials) TokenSource(context.Context) (oauth2.TokenSource, error) {
	return tokenErrors{c}, nil
}

// tokenErrors words a failed client_credentials grant as an exchange's.
type tokenErrors struct{ c *clientCredentials }

func (t tokenErrors) Token() (*oauth2.Token, error) {
	tok, err := t.c.src.Token()
	if err == nil {
		return tok, nil
	}
	x := exchanger{te: *t.c.b.srv.TokenExchange}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && oauthCode(re.ErrorCode) {
		return nil, fmt.Errorf("The client_credentials grant at %s failed: %s.", x.host(), re.ErrorCode)
	}
	return nil, fmt.Errorf("The client_credentials grant at %s failed.", x.host())
}

func (c *clientCredentials) Authorize(_ context.Context, _ *http.Request, resp *http.Response) error {
	if resp != nil && resp.Body != nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
	return fmt.Errorf("%s refused the bridge's client_credentials token for %q (HTTP %d); sign in instead with `spacefix bridge login %s`",
		redactURL(c.b.srv.URL), c.b.srv.Name, resp.StatusCode, c.b.srv.Name)
}
