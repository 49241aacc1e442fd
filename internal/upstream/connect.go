package upstream

// Connecting a person's account: the connect link's sealed state, Begin
// (discovery, the client, PKCE) and Complete at the callback.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/spacefix/spacefix/internal/oauthclient"
	"github.com/spacefix/spacefix/internal/store"
)

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
	hc := s.http(ctx, resource)
	challenges, unauthorized, err := oauthclient.Probe(ctx, hc, resource)
	if err != nil {
		return "", err
	}
	if !unauthorized {
		return "", fmt.Errorf("%s did not ask for a sign-in: there is no account to connect", host)
	}
	srv, err := oauthclient.Discover(ctx, hc, resource, challenges, oauthclient.DiscoverOptions{RefreshTokens: true})
	if err != nil {
		return "", err
	}
	c, err := s.client(ctx, hc, resource, srv)
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
	t, err := c.Exchange(ctx, s.http(ctx, st.Resource), code, st.Verifier, st.Indicator)
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
