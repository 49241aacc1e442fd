// Package upstream keeps each person's own account at a bridged remote
// that runs per person (issue 28, connect mode): the gateway runs the
// remote's OAuth flow for the person (discovery, client registration,
// authorization code with PKCE; internal/oauthclient), keeps the tokens
// sealed by internal/secrets in the store, refreshes them, and hands the
// person's current access token to each of their calls.
//
// Several gateways may share one store: a refresh that loses the store's
// version compare to another gateway's uses the winner's token. In one
// gateway one refresh at a time runs per account.
//
// Errors meant for people name the remote's host and the OAuth error code
// only: never a token, never a response body.
package upstream

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/spacefix/spacefix/internal/oauthclient"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
)

// Options configure a [Service].
type Options struct {
	Store     store.UpstreamAccounts
	Box       *secrets.Box
	PublicURL func() string // the gateway's public base URL, no trailing slash
	// Client reaches the remotes and their authorization servers. Nil:
	// [HTTPClient](AllowLoopback), which refuses link-local, unspecified
	// and multicast addresses, and loopback unless AllowLoopback. A client
	// given here is used as it is.
	Client *http.Client
	// AllowLoopback lets the default client dial loopback addresses
	// (`--upstream-allow-loopback`).
	AllowLoopback bool
	Log           *slog.Logger
	Now           func() time.Time // nil: time.Now
}

// ErrNotConnected says the person has no account at the agent key's
// remote: they must connect one.
var ErrNotConnected = errors.New("no upstream account connected")

// ErrReconnect says the person's account exists no more: the upstream
// refused to refresh it (the row is deleted); they must connect again.
var ErrReconnect = errors.New("the upstream account needs connecting again")

// errClientGone says the upstream client that holds an account's grant
// was replaced (the remote's authorization server changed): the account
// must be connected again.
var errClientGone = errors.New("the gateway no longer has the client that connected the account")

// ErrState says a callback's state is not good (not sealed here, expired,
// or another person's); the error wrapping it says which, for the person.
var ErrState = errors.New("the connect link is not valid")

const (
	// refreshBefore is how long before it expires a token is refreshed.
	refreshBefore = 60 * time.Second
	// stateLife is how long a connect link (its state) is good.
	stateLife = 10 * time.Minute
	// raceGrace is how long a refresh refused with invalid_grant waits for
	// another gateway's refresh of the same account to land (a refresh
	// token rotated by that gateway is refused here) before it gives the
	// account up.
	raceGrace = time.Second
	// claimLife is how long a gateway waits for another's claimed refresh
	// before it refreshes itself; claimPoll how often it looks.
	claimLife = 15 * time.Second
	claimPoll = 50 * time.Millisecond
	// flightTimeout bounds a refresh shared by several callers.
	flightTimeout = 30 * time.Second

	stateContext = "upstream-state"
	clientName   = "Spacefix gateway"
)

// A Service keeps people's upstream accounts. Its methods are safe for
// concurrent use.
type Service struct {
	o   Options
	hc  *http.Client
	log *slog.Logger

	mu      sync.Mutex
	flights map[string]*flight // per account: the refresh running now
	reg     map[string]*sync.Mutex
}

// flight is one refresh, shared by the callers that wait for it.
type flight struct {
	done  chan struct{}
	token string
	err   error
}

// New returns a Service.
func New(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	hc := o.Client
	if hc == nil {
		hc = HTTPClient(o.AllowLoopback)
	}
	return &Service{o: o, hc: hc, log: o.Log, flights: map[string]*flight{}, reg: map[string]*sync.Mutex{}}
}

func accessContext(agentKeyID string, userID int64) string {
	return "upstream-access:" + agentKeyID + ":" + strconv.FormatInt(userID, 10)
}

func refreshContext(agentKeyID string, userID int64) string {
	return "upstream-refresh:" + agentKeyID + ":" + strconv.FormatInt(userID, 10)
}

func clientContext(resource string) string { return "upstream-client:" + resource }

// RedirectURI is where upstream authorization servers send people back:
// {public}/upstream/callback.
func (s *Service) RedirectURI() string { return s.o.PublicURL() + "/upstream/callback" }

// ConnectURL is the page that starts connecting a person's account at the
// agent key's remote: {public}/connect/{agentKeyID}.
func (s *Service) ConnectURL(agentKeyID string) string {
	return s.o.PublicURL() + "/connect/" + url.PathEscape(agentKeyID)
}

// state is what a connect link carries through the upstream, sealed.
type state struct {
	User      int64  `json:"u"`
	Project   int64  `json:"p"`
	AgentKey  string `json:"k"`
	Resource  string `json:"r"`  // the remote MCP URL (the account's and the client's key)
	Indicator string `json:"ri"` // the RFC 8707 resource discovery found
	Verifier  string `json:"v"`
	ReturnTo  string `json:"t,omitempty"`
	Nonce     string `json:"n"`
	Expires   int64  `json:"e"` // Unix seconds
	Issuer    string `json:"i"`
	IssParam  bool   `json:"ip,omitempty"`
	ClientID  string `json:"c"`
	Scopes    string `json:"s,omitempty"`
}

// Begin starts connecting the person userID's account at resource, the
// remote of agentKeyID in projectID: discovery, the client (registered
// once per resource and redirect URI, kept in the store), PKCE. It returns
// the upstream authorization URL to send the person's browser to.
func (s *Service) Begin(ctx context.Context, projectID int64, agentKeyID string, userID int64, resource, returnTo string) (string, error) {
	host := oauthclient.Host(resource)
	challenges, unauthorized, err := oauthclient.Probe(ctx, s.hc, resource)
	if err != nil {
		return "", err
	}
	if !unauthorized {
		return "", fmt.Errorf("%s did not ask for a sign-in: there is no account to connect", host)
	}
	srv, err := oauthclient.Discover(ctx, s.hc, resource, challenges, oauthclient.DiscoverOptions{RefreshTokens: true})
	if err != nil {
		return "", err
	}
	c, err := s.client(ctx, resource, srv)
	if err != nil {
		return "", err
	}
	verifier := oauthclient.NewVerifier()
	st := state{
		User: userID, Project: projectID, AgentKey: agentKeyID, Resource: resource, Indicator: srv.Resource,
		Verifier: verifier, ReturnTo: returnTo, Nonce: rand.Text(), Expires: s.o.Now().Add(stateLife).Unix(),
		Issuer: srv.Issuer, IssParam: srv.IssParameter, ClientID: c.ID, Scopes: strings.Join(srv.Scopes, " "),
	}
	plain, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	sealed := base64.RawURLEncoding.EncodeToString(s.o.Box.Seal(plain, stateContext))
	c.Scopes = srv.Scopes
	return c.AuthorizeURL(sealed, verifier, srv.Resource), nil
}

// client returns the upstream client for resource at srv's authorization
// server, registering one (and keeping it) when there is none yet, or the
// one kept is another authorization server's.
func (s *Service) client(ctx context.Context, resource string, srv *oauthclient.Server) (oauthclient.Client, error) {
	redirect := s.RedirectURI()
	s.mu.Lock()
	mu := s.reg[resource]
	if mu == nil {
		mu = &sync.Mutex{}
		s.reg[resource] = mu
	}
	s.mu.Unlock()
	mu.Lock() // one registration at a time per resource in this gateway
	defer mu.Unlock()
	kept, err := s.o.Store.UpstreamClient(ctx, resource, redirect)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return oauthclient.Client{}, fmt.Errorf("read the upstream client of %s: %w", srv.Host(), err)
	}
	if err == nil && kept.ClientID != "" && kept.Issuer == srv.Issuer && kept.TokenURL == srv.TokenURL && kept.AuthURL == srv.AuthURL {
		live, err := s.clientLive(ctx, kept)
		if err != nil {
			return oauthclient.Client{}, err
		}
		if live {
			if kept.Indicator != srv.Resource { // kept before the indicator was, or the remote's metadata changed
				kept.Indicator = srv.Resource
				if err := s.o.Store.PutUpstreamClient(ctx, kept); err != nil {
					return oauthclient.Client{}, fmt.Errorf("keep the upstream client of %s: %w", srv.Host(), err)
				}
			}
			return s.open(kept, srv.Host())
		}
	}
	c, err := oauthclient.Register(ctx, s.hc, srv, oauthclient.RegisterOptions{RedirectURI: redirect, ClientName: clientName})
	if err != nil {
		return oauthclient.Client{}, err
	}
	uc := store.UpstreamClient{Resource: resource, RedirectURI: redirect, Issuer: srv.Issuer, AuthURL: c.AuthURL,
		TokenURL: c.TokenURL, ClientID: c.ID, Scopes: c.Scopes, CreatedAt: s.o.Now(), Indicator: srv.Resource}
	if c.Secret != "" {
		uc.Secret = s.o.Box.Seal([]byte(c.Secret), clientContext(resource))
	}
	if err := s.o.Store.PutUpstreamClient(ctx, uc); err != nil {
		return oauthclient.Client{}, fmt.Errorf("keep the upstream client of %s: %w", srv.Host(), err)
	}
	s.log.Info("upstream: client registered", "host", srv.Host(), "issuer", srv.Issuer)
	return c, nil
}

// clientLive reports whether a kept client may still be used for a new
// connection. Authorization servers delete registrations nobody uses
// (Spacefix's own prunes an unapproved client after a day): a client
// registered longer ago than a connect link lives that holds no account
// is registered anew rather than trusted, or an abandoned first connect
// would leave every later one at the remote's "unknown client" page.
func (s *Service) clientLive(ctx context.Context, kept store.UpstreamClient) (bool, error) {
	if s.o.Now().Sub(kept.CreatedAt) < stateLife {
		return true, nil
	}
	all, err := s.o.Store.UpstreamAccounts(ctx, store.UpstreamFilter{})
	if err != nil {
		return false, fmt.Errorf("read the upstream accounts: %w", err)
	}
	for _, a := range all {
		if a.Resource == kept.Resource && a.ClientID == kept.ClientID {
			return true, nil
		}
	}
	return false, nil
}

// forgetClient marks the kept client clientID of resource as gone (the
// authorization server answered invalid_client): the next Begin
// registers anew.
func (s *Service) forgetClient(ctx context.Context, resource, clientID string) {
	kept, err := s.o.Store.UpstreamClient(ctx, resource, s.RedirectURI())
	if err != nil || kept.ClientID != clientID {
		return
	}
	kept.ClientID, kept.Secret = "", nil
	if err := s.o.Store.PutUpstreamClient(ctx, kept); err != nil {
		s.log.Warn("upstream: could not forget a client the authorization server no longer knows", "host", oauthclient.Host(resource), "err", err)
		return
	}
	s.log.Info("upstream: the authorization server no longer knows the gateway's client; the next connect registers anew", "host", oauthclient.Host(resource))
}

// open makes an oauthclient.Client of a kept one: its refreshes name the
// indicator its tokens were asked for.
func (s *Service) open(uc store.UpstreamClient, host string) (oauthclient.Client, error) {
	c := oauthclient.Client{ID: uc.ClientID, AuthURL: uc.AuthURL, TokenURL: uc.TokenURL, RedirectURI: uc.RedirectURI,
		Scopes: uc.Scopes, Host: host, Resource: uc.Indicator}
	if uc.Secret != nil {
		secret, err := s.o.Box.Open(uc.Secret, clientContext(uc.Resource))
		if err != nil {
			return oauthclient.Client{}, fmt.Errorf("open the upstream client secret of %s (is the secret key file the one it was sealed with?): %w", host, err)
		}
		c.Secret = string(secret)
	}
	return c, nil
}

// clientFor finds the kept client that holds a grant: by resource and the
// current redirect URI, else any of resource's with that client id.
func (s *Service) clientFor(ctx context.Context, resource, clientID string) (oauthclient.Client, error) {
	host := oauthclient.Host(resource)
	uc, err := s.o.Store.UpstreamClient(ctx, resource, s.RedirectURI())
	if err == nil && uc.ClientID == clientID && clientID != "" {
		return s.open(uc, host)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return oauthclient.Client{}, fmt.Errorf("read the upstream client of %s: %w", host, err)
	}
	all, err := s.o.Store.UpstreamClients(ctx)
	if err != nil {
		return oauthclient.Client{}, fmt.Errorf("read the upstream clients: %w", err)
	}
	for _, uc := range all {
		if uc.Resource == resource && uc.ClientID == clientID && clientID != "" {
			return s.open(uc, host)
		}
	}
	return oauthclient.Client{}, fmt.Errorf("%w at %s", errClientGone, host)
}

// Complete finishes connecting at the callback: it opens state, checks it
// is userID's (the person signed in now) and not expired, checks the
// response's iss when the authorization server sends one, exchanges the
// code and stores the account, its tokens sealed. It returns the account
// (tokens sealed) and where the person was going (returnTo of Begin).
func (s *Service) Complete(ctx context.Context, userID int64, rawState, code, iss string) (store.UpstreamAccount, string, error) {
	sealed, err := base64.RawURLEncoding.DecodeString(rawState)
	if err != nil || rawState == "" {
		return store.UpstreamAccount{}, "", fmt.Errorf("%w: it was not made by this gateway; start connecting again", ErrState)
	}
	plain, err := s.o.Box.Open(sealed, stateContext)
	if err != nil {
		return store.UpstreamAccount{}, "", fmt.Errorf("%w: it was not made by this gateway (or with another secret key); start connecting again", ErrState)
	}
	var st state
	if err := json.Unmarshal(plain, &st); err != nil {
		return store.UpstreamAccount{}, "", fmt.Errorf("%w: start connecting again", ErrState)
	}
	host := oauthclient.Host(st.Resource)
	if s.o.Now().Unix() > st.Expires {
		return store.UpstreamAccount{}, "", fmt.Errorf("%w: it expired (a connect link lasts %d minutes); start connecting your %s account again",
			ErrState, int(stateLife/time.Minute), host)
	}
	if st.User != userID {
		return store.UpstreamAccount{}, "", fmt.Errorf("%w: another person started it; sign in as yourself and start connecting your %s account again", ErrState, host)
	}
	srv := oauthclient.Server{Resource: st.Indicator, Issuer: st.Issuer, IssParameter: st.IssParam}
	if err := srv.CheckIssuer(iss); err != nil {
		return store.UpstreamAccount{}, "", err
	}
	// The callback opened again (a reload, a restored tab) must not spend
	// the code twice: an authorization server takes a reused code as
	// stolen and revokes what it granted. An account written since this
	// link was made is the one it connected.
	issued := time.Unix(st.Expires, 0).Add(-stateLife)
	if a, err := s.o.Store.UpstreamAccount(ctx, st.AgentKey, st.User); err == nil && a.Resource == st.Resource && !a.UpdatedAt.Before(issued) {
		return a, st.ReturnTo, nil
	}
	c, err := s.clientFor(ctx, st.Resource, st.ClientID)
	if err != nil {
		return store.UpstreamAccount{}, "", err
	}
	t, err := c.Exchange(ctx, s.hc, code, st.Verifier, st.Indicator)
	if oauthclient.InvalidClient(err) {
		s.forgetClient(ctx, st.Resource, c.ID)
	}
	if err != nil {
		return store.UpstreamAccount{}, "", err
	}
	if t.AccessToken == "" {
		return store.UpstreamAccount{}, "", &oauthclient.Refused{Host: host, Code: "no access token"}
	}
	a := store.UpstreamAccount{
		ProjectID: st.Project, AgentKeyID: st.AgentKey, UserID: st.User, Resource: st.Resource,
		ClientID: c.ID, Subject: subject(t), Scope: scope(t, st.Scopes),
	}
	s.seal(&a, t)
	if err := s.o.Store.PutUpstreamAccount(ctx, a); err != nil {
		return store.UpstreamAccount{}, "", fmt.Errorf("keep the %s account: %w", host, err)
	}
	stored, err := s.o.Store.UpstreamAccount(ctx, a.AgentKeyID, a.UserID)
	if err != nil {
		return store.UpstreamAccount{}, "", fmt.Errorf("read the %s account back: %w", host, err)
	}
	s.log.Info("upstream: account connected", "host", host, "agentKey", a.AgentKeyID, "user", a.UserID)
	return stored, st.ReturnTo, nil
}

// seal puts t's tokens, sealed, and its expiry into a.
func (s *Service) seal(a *store.UpstreamAccount, t *oauth2.Token) {
	a.Access = s.o.Box.Seal([]byte(t.AccessToken), accessContext(a.AgentKeyID, a.UserID))
	a.Refresh = nil
	if t.RefreshToken != "" {
		a.Refresh = s.o.Box.Seal([]byte(t.RefreshToken), refreshContext(a.AgentKeyID, a.UserID))
	}
	a.ExpiresAt = t.Expiry
}

// subject is who the person connected as, when the token answer says.
func subject(t *oauth2.Token) string {
	for _, k := range []string{"sub", "user", "username", "email"} {
		if v, ok := t.Extra(k).(string); ok && v != "" {
			return v
		}
	}
	return ""
}

// scope is the granted scope, else the requested one.
func scope(t *oauth2.Token, requested string) string {
	if v, ok := t.Extra("scope").(string); ok && v != "" {
		return v
	}
	return requested
}

// Token returns the person's current access token for the agent key's
// remote, refreshing it first when it expires within 60 s (one refresh at a
// time per account in this gateway; a write that loses to another
// gateway's re-reads and uses the winner's token). ErrNotConnected: no
// account; ErrReconnect: the upstream refused to refresh (the account is
// deleted).
func (s *Service) Token(ctx context.Context, projectID int64, agentKeyID string, userID int64) (string, error) {
	a, err := s.account(ctx, projectID, agentKeyID, userID)
	if err != nil {
		return "", err
	}
	if !s.expiring(a) {
		return s.access(a)
	}
	return s.refresh(ctx, projectID, agentKeyID, userID, "")
}

// Refresh is for an upstream 401 with the token stale: it refreshes unless
// the stored token differs from stale already (another call refreshed it),
// and returns the token to use.
func (s *Service) Refresh(ctx context.Context, projectID int64, agentKeyID string, userID int64, stale string) (string, error) {
	t, err := s.refresh(ctx, projectID, agentKeyID, userID, stale)
	if err == nil && t == stale {
		// It joined a Token flight that found stale still good by its
		// expiry: refresh once more, on our own terms.
		t, err = s.refresh(ctx, projectID, agentKeyID, userID, stale)
	}
	return t, err
}

func (s *Service) account(ctx context.Context, projectID int64, agentKeyID string, userID int64) (store.UpstreamAccount, error) {
	a, err := s.o.Store.UpstreamAccount(ctx, agentKeyID, userID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && a.ProjectID != projectID) {
		return store.UpstreamAccount{}, ErrNotConnected
	}
	if err != nil {
		return store.UpstreamAccount{}, fmt.Errorf("read the upstream account: %w", err)
	}
	return a, nil
}

func (s *Service) expiring(a store.UpstreamAccount) bool {
	return !a.ExpiresAt.IsZero() && !s.o.Now().Add(refreshBefore).Before(a.ExpiresAt)
}

func (s *Service) access(a store.UpstreamAccount) (string, error) {
	t, err := s.o.Box.Open(a.Access, accessContext(a.AgentKeyID, a.UserID))
	if err != nil {
		return "", fmt.Errorf("open the %s account's token (is the secret key file the one it was sealed with?): %w", oauthclient.Host(a.Resource), err)
	}
	return string(t), nil
}

// refresh runs (or joins) the one refresh of the account in this gateway.
// With stale set it refreshes when the stored token is stale; without, when
// the stored token expires soon.
func (s *Service) refresh(ctx context.Context, projectID int64, agentKeyID string, userID int64, stale string) (string, error) {
	key := agentKeyID + "\x00" + strconv.FormatInt(userID, 10)
	s.mu.Lock()
	f := s.flights[key]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		s.flights[key] = f
		go func() {
			// The refresh outlives a caller that gives up: the others wait
			// for it.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flightTimeout)
			defer cancel()
			f.token, f.err = s.doRefresh(fctx, projectID, agentKeyID, userID, stale)
			s.mu.Lock()
			delete(s.flights, key)
			s.mu.Unlock()
			close(f.done)
		}()
	}
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.token, f.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (s *Service) doRefresh(ctx context.Context, projectID int64, agentKeyID string, userID int64, stale string) (string, error) {
	a, err := s.account(ctx, projectID, agentKeyID, userID)
	if err != nil {
		return "", err
	}
	host := oauthclient.Host(a.Resource)
	cur, err := s.access(a)
	if err != nil {
		return "", err
	}
	if (stale == "" || cur != stale) && !s.expiring(a) {
		return cur, nil // refreshed already
	}
	if a.Refresh == nil {
		if stale == "" && s.o.Now().Before(a.ExpiresAt) {
			return cur, nil // good a little longer; no way to refresh it
		}
		why := "the token expired and there is no refresh token"
		if stale != "" {
			why = "the remote refused the token and there is no refresh token"
		}
		return "", s.giveUp(ctx, a, why)
	}
	rt, err := s.o.Box.Open(a.Refresh, refreshContext(a.AgentKeyID, a.UserID))
	if err != nil {
		return "", fmt.Errorf("open the %s account's refresh token (is the secret key file the one it was sealed with?): %w", host, err)
	}
	// One refresh across gateways: an authorization server that rotates
	// refresh tokens takes a second use of one as theft and revokes the
	// whole grant, the winner's new token with it. So a gateway first
	// claims the refresh (ClaimedUntil, written under the version compare:
	// one gateway's claim lands), and the others wait for its tokens.
	if a.ClaimedUntil.After(s.o.Now()) {
		return s.awaitRefresh(ctx, a, cur, stale)
	}
	claim := a
	claim.ClaimedUntil = s.o.Now().Add(claimLife)
	won, err := s.o.Store.UpdateUpstreamAccount(ctx, claim)
	if err != nil {
		return "", fmt.Errorf("claim the refresh of the %s token: %w", host, err)
	}
	if !won {
		return s.awaitRefresh(ctx, a, cur, stale)
	}
	a = claim
	a.Version++
	t, err := s.refreshClaimed(ctx, a, host, string(rt))
	if err != nil && !errors.Is(err, ErrReconnect) {
		// Let the next call (here or on another gateway) try at once.
		release := a
		release.ClaimedUntil = time.Time{}
		if _, rerr := s.o.Store.UpdateUpstreamAccount(context.WithoutCancel(ctx), release); rerr != nil {
			s.log.Warn("upstream: could not release a refresh claim; it lapses by itself", "host", host, "err", rerr)
		}
	}
	return t, err
}

// refreshClaimed refreshes the account a, whose refresh this gateway
// claimed, with refresh token rt, and writes the new tokens (ending the
// claim).
func (s *Service) refreshClaimed(ctx context.Context, a store.UpstreamAccount, host, rt string) (string, error) {
	c, err := s.clientFor(ctx, a.Resource, a.ClientID)
	if errors.Is(err, errClientGone) {
		return "", s.giveUp(ctx, a, err.Error())
	}
	if err != nil {
		return "", err
	}
	t, err := c.Refresh(ctx, s.hc, rt)
	if oauthclient.InvalidClient(err) {
		s.forgetClient(ctx, a.Resource, a.ClientID)
		return "", s.giveUp(ctx, a, err.Error())
	}
	if oauthclient.InvalidGrant(err) {
		// Another gateway may have refreshed (and rotated the refresh
		// token) a moment ago: wait a little for its write.
		if tok, ok := s.awaitOther(ctx, a); ok {
			return tok, nil
		}
		return "", s.giveUp(ctx, a, err.Error())
	}
	if err != nil {
		s.log.Warn("upstream: refresh failed", "host", host, "agentKey", a.AgentKeyID, "user", a.UserID, "err", err)
		return "", err
	}
	next := a
	next.ClaimedUntil = time.Time{}
	s.seal(&next, t)
	if next.Refresh == nil {
		next.Refresh = a.Refresh // the old refresh token stays good
	}
	if v, ok := t.Extra("scope").(string); ok && v != "" {
		next.Scope = v
	}
	won, err := s.o.Store.UpdateUpstreamAccount(ctx, next)
	if err != nil {
		return "", fmt.Errorf("keep the refreshed %s token: %w", host, err)
	}
	if won {
		s.log.Info("upstream: token refreshed", "host", host, "agentKey", a.AgentKeyID, "user", a.UserID)
		return t.AccessToken, nil
	}
	// Another gateway refreshed first (or the account went): use its
	// token.
	b, err := s.account(ctx, a.ProjectID, a.AgentKeyID, a.UserID)
	if err != nil {
		return "", err
	}
	s.log.Info("upstream: another gateway refreshed the token first", "host", host, "agentKey", a.AgentKeyID, "user", a.UserID)
	return s.access(b)
}

// awaitRefresh waits, after another gateway claimed the account's
// refresh, for the token it gets (the stored access token is no longer
// cur). When the account goes (the other gateway's refresh was refused)
// the person must connect again; when no new token comes within
// claimLife (that gateway stopped mid-refresh), this one refreshes.
func (s *Service) awaitRefresh(ctx context.Context, a store.UpstreamAccount, cur, stale string) (string, error) {
	deadline := s.o.Now().Add(claimLife)
	for {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(claimPoll):
		}
		b, err := s.o.Store.UpstreamAccount(ctx, a.AgentKeyID, a.UserID)
		if errors.Is(err, store.ErrNotFound) {
			return "", fmt.Errorf("%w: the authorization server of %s refused to refresh the token", ErrReconnect, oauthclient.Host(a.Resource))
		}
		if err != nil {
			return "", fmt.Errorf("read the upstream account: %w", err)
		}
		if t, err := s.access(b); err != nil || t != cur {
			return t, err
		}
		if !b.ClaimedUntil.After(s.o.Now()) || s.o.Now().After(deadline) {
			// The claim was released (that refresh failed) or lapsed (that
			// gateway stopped): refresh here.
			return s.doRefresh(ctx, a.ProjectID, a.AgentKeyID, a.UserID, stale)
		}
	}
}

// awaitOther polls the account for raceGrace for a write by someone else
// (its Version moved on), and returns that write's token.
func (s *Service) awaitOther(ctx context.Context, a store.UpstreamAccount) (string, bool) {
	deadline := time.Now().Add(raceGrace)
	for {
		b, err := s.o.Store.UpstreamAccount(ctx, a.AgentKeyID, a.UserID)
		if err != nil {
			return "", false
		}
		if b.Version != a.Version {
			t, err := s.access(b)
			return t, err == nil
		}
		if time.Now().After(deadline) {
			return "", false
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-time.After(raceGrace / 10):
		}
	}
}

// giveUp deletes the account the upstream no longer honours and says the
// person must connect again.
func (s *Service) giveUp(ctx context.Context, a store.UpstreamAccount, why string) error {
	host := oauthclient.Host(a.Resource)
	if _, err := s.o.Store.DeleteUpstreamAccounts(ctx, store.UpstreamFilter{AgentKeyID: a.AgentKeyID, UserID: a.UserID}); err != nil {
		return fmt.Errorf("forget the %s account: %w", host, err)
	}
	s.log.Info("upstream: account dropped; the person must connect again", "host", host, "agentKey", a.AgentKeyID, "user", a.UserID, "why", why)
	return fmt.Errorf("%w: %s", ErrReconnect, why)
}

// Disconnect forgets the person's account at the agent key's remote, and
// says whether there was one.
func (s *Service) Disconnect(ctx context.Context, agentKeyID string, userID int64) (bool, error) {
	if agentKeyID == "" || userID == 0 {
		return false, errors.New("disconnect: an agent key and a person are both needed")
	}
	n, err := s.o.Store.DeleteUpstreamAccounts(ctx, store.UpstreamFilter{AgentKeyID: agentKeyID, UserID: userID})
	if err != nil {
		return false, fmt.Errorf("disconnect: %w", err)
	}
	return n > 0, nil
}

// Account is an upstream account as people may see it: no tokens.
type Account struct {
	ProjectID                       int64
	AgentKeyID                      string
	UserID                          int64
	Resource, Subject, Scope        string
	ExpiresAt, CreatedAt, UpdatedAt time.Time
}

// Accounts lists the accounts matching f, by agent key then person.
func (s *Service) Accounts(ctx context.Context, f store.UpstreamFilter) ([]Account, error) {
	as, err := s.o.Store.UpstreamAccounts(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]Account, 0, len(as))
	for _, a := range as {
		out = append(out, Account{ProjectID: a.ProjectID, AgentKeyID: a.AgentKeyID, UserID: a.UserID, Resource: a.Resource,
			Subject: a.Subject, Scope: a.Scope, ExpiresAt: a.ExpiresAt, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt})
	}
	return out, nil
}

// Reseal seals again, with the key file's first key, every stored value
// sealed with an older one (after a key rotation), and returns how many
// values it sealed again. A value no key opens is left as it is and
// counted in the error (the person connects again); the others are still
// sealed again. A store error ends it.
func (s *Service) Reseal(ctx context.Context) (int, error) {
	n, failed := 0, 0
	var first error
	fail := func(err error) {
		if failed++; first == nil {
			first = err
		}
	}
	as, err := s.o.Store.UpstreamAccounts(ctx, store.UpstreamFilter{})
	if err != nil {
		return 0, fmt.Errorf("reseal: %w", err)
	}
	for _, a := range as {
		for range 3 { // a write racing ours: read again and retry
			next, k, err := s.resealAccount(a)
			if err != nil {
				fail(err)
				break
			}
			if k == 0 {
				break
			}
			ok, err := s.o.Store.UpdateUpstreamAccount(ctx, next)
			if err != nil {
				return n, fmt.Errorf("reseal: %w", err)
			}
			if ok {
				n += k
				break
			}
			if a, err = s.o.Store.UpstreamAccount(ctx, a.AgentKeyID, a.UserID); err != nil {
				break // gone
			}
		}
	}
	cs, err := s.o.Store.UpstreamClients(ctx)
	if err != nil {
		return n, fmt.Errorf("reseal: %w", err)
	}
	for _, c := range cs {
		if c.Secret == nil || s.o.Box.Current(c.Secret) {
			continue
		}
		plain, err := s.o.Box.Open(c.Secret, clientContext(c.Resource))
		if err != nil {
			fail(fmt.Errorf("reseal the client secret of %s: %w", oauthclient.Host(c.Resource), err))
			continue
		}
		c.Secret = s.o.Box.Seal(plain, clientContext(c.Resource))
		if err := s.o.Store.PutUpstreamClient(ctx, c); err != nil {
			return n, fmt.Errorf("reseal: %w", err)
		}
		n++
	}
	if failed > 0 {
		return n, fmt.Errorf("reseal: %d sealed values open with no key of the secret key file, and stay as they are (the first: %w)", failed, first)
	}
	return n, nil
}

// resealAccount returns a with its values sealed by the first key, and how
// many it sealed again.
func (s *Service) resealAccount(a store.UpstreamAccount) (store.UpstreamAccount, int, error) {
	k := 0
	for _, v := range []struct {
		val *[]byte
		ctx string
	}{{&a.Access, accessContext(a.AgentKeyID, a.UserID)}, {&a.Refresh, refreshContext(a.AgentKeyID, a.UserID)}} {
		if *v.val == nil || s.o.Box.Current(*v.val) {
			continue
		}
		plain, err := s.o.Box.Open(*v.val, v.ctx)
		if err != nil {
			return a, 0, fmt.Errorf("reseal the %s account of user %d: %w", oauthclient.Host(a.Resource), a.UserID, err)
		}
		*v.val = s.o.Box.Seal(plain, v.ctx)
		k++
	}
	return a, k, nil
}
