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
