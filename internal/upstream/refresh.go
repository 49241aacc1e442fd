package upstream

// Refreshing an account: one refresh at a time per account in a gateway,
// claimed in the store across gateways.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spacefix/spacefix/internal/oauthclient"
	"github.com/spacefix/spacefix/internal/store"
)

// refresh runs (or joins) the one refresh of the account in this gateway.
// With stale set it refreshes when the stored token is stale; without, when
// the stored token expires soon.
func (s *Service) refresh(ctx context.Context, projectID int64, agentKeyID string, userID int64, resource, stale string) (string, error) {
	key := agentKeyID + "\x00" + strconv.FormatInt(userID, 10) + "\x00" + resource
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
			f.token, f.err = s.doRefresh(fctx, projectID, agentKeyID, userID, resource, stale)
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

func (s *Service) doRefresh(ctx context.Context, projectID int64, agentKeyID string, userID int64, resource, stale string) (string, error) {
	a, err := s.account(ctx, projectID, agentKeyID, userID, resource)
	if err != nil {
		return "", err
	}
	host := oauthclient.Host(a.Resource)
	cur, err := s.accessOrDrop(ctx, a)
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
		return "", s.dropUnreadable(ctx, a, fmt.Errorf("open the %s account's refresh token: %w", host, errUnreadable))
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
	if errors.Is(err, errUnreadable) {
		return "", s.dropUnreadable(ctx, a, err)
	}
	if errors.Is(err, errClientGone) {
		return "", s.giveUp(ctx, a, err.Error())
	}
	if err != nil {
		return "", err
	}
	t, err := c.Refresh(ctx, s.http(ctx, a.Resource), rt)
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
	b, err := s.account(ctx, a.ProjectID, a.AgentKeyID, a.UserID, a.Resource)
	if err != nil {
		return "", err
	}
	s.log.Info("upstream: another gateway refreshed the token first", "host", host, "agentKey", a.AgentKeyID, "user", a.UserID)
	return s.accessOrDrop(ctx, b)
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
		if b.Resource != a.Resource { // connected again, elsewhere
			return "", fmt.Errorf("%w at %s", ErrNotConnected, oauthclient.Host(a.Resource))
		}
		if t, err := s.accessOrDrop(ctx, b); err != nil || t != cur {
			return t, err
		}
		if !b.ClaimedUntil.After(s.o.Now()) || s.o.Now().After(deadline) {
			// The claim was released (that refresh failed) or lapsed (that
			// gateway stopped): refresh here.
			return s.doRefresh(ctx, a.ProjectID, a.AgentKeyID, a.UserID, a.Resource, stale)
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
			if b.Resource != a.Resource {
				return "", false
			}
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
