package upstream

// The OAuth clients the gateway registers at remotes' authorization
// servers, one per remote and redirect URI, kept in the store.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/spacefix/spacefix/internal/oauthclient"
	"github.com/spacefix/spacefix/internal/store"
)

// client returns the upstream client for resource at srv's authorization
// server, registering one (and keeping it) when there is none yet, or the
// one kept is another authorization server's.
func (s *Service) client(ctx context.Context, hc *http.Client, resource string, srv *oauthclient.Server) (oauthclient.Client, error) {
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
			c, err := s.open(kept, srv.Host())
			if !errors.Is(err, errUnreadable) {
				return c, err
			}
			// Its secret was sealed with a key file no longer here: a
			// client the gateway cannot use, registered anew.
			s.log.Warn("upstream: the secret key file does not open the kept client's secret; registering a new client", "host", srv.Host())
		}
	}
	c, err := oauthclient.Register(ctx, hc, srv, oauthclient.RegisterOptions{RedirectURI: redirect, ClientName: clientName})
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
			return oauthclient.Client{}, fmt.Errorf("open the upstream client secret of %s: %w", host, errUnreadable)
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
