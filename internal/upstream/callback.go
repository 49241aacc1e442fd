package upstream

// The callback: where the remote's authorization server sends the person
// back with a code. A code is a bearer credential of the person's grant
// until it is spent, so a callback refused in the browser still spends it,
// and one opened again for its flow spends nothing twice.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/oauthclient"
	"github.com/spacefix/spacefix/internal/store"
)

// Connected is what [Service.Complete] did.
type Connected struct {
	// Account is the person's account, tokens sealed.
	Account store.UpstreamAccount
	// ReturnTo is where the person was going (returnTo of Begin).
	ReturnTo string
	// Again says the callback of this flow was opened before (a reload, a
	// restored tab): Account is what it connected then, and nothing was
	// exchanged or written now.
	Again bool
}

// Complete finishes connecting at the callback: it opens state and, when
// this flow connected the account already, says so (Again). Otherwise it
// checks the state is userID's (the person signed in now) and not expired,
// checks the response's iss when the authorization server sends one,
// exchanges the code and stores the account, its tokens sealed and the
// flow named. A callback refused for its person or its age still spends
// its code (exchanged, and what it bought dropped), so that the link
// cannot connect anyone later; one refused for its issuer does not (the
// code may be another server's, and must not reach this one's token
// endpoint). A callback without a code is refused.
func (s *Service) Complete(ctx context.Context, userID int64, rawState, code, iss string) (Connected, error) {
	st, err := s.openState(rawState)
	if err != nil {
		return Connected{}, err
	}
	host := oauthclient.Host(st.Resource)
	if code == "" {
		return Connected{}, fmt.Errorf("%w: the answer from %s carries no code; start connecting your %s account again", ErrState, host, host)
	}
	unlock := s.lockFlow(st.Nonce)
	defer unlock()
	// The callback opened again must not spend the code twice: an
	// authorization server takes a reused code as stolen and revokes what
	// it granted. The account this very flow wrote is the one it connected.
	if a, err := s.o.Store.UpstreamAccount(ctx, st.AgentKey, st.User); err == nil && a.Flow == st.Nonce {
		if st.User != userID {
			return Connected{}, fmt.Errorf("%w: another person started it; sign in as yourself and start connecting your %s account again", ErrState, host)
		}
		return Connected{Account: a, ReturnTo: st.ReturnTo, Again: true}, nil
	}
	if s.o.Now().Unix() > st.Expires {
		s.spend(ctx, st, code, "it expired")
		return Connected{}, fmt.Errorf("%w: it expired (a connect link lasts %d minutes); start connecting your %s account again",
			ErrState, int(stateLife/time.Minute), host)
	}
	if st.User != userID {
		s.spend(ctx, st, code, "another person opened it")
		return Connected{}, fmt.Errorf("%w: another person started it; sign in as yourself and start connecting your %s account again", ErrState, host)
	}
	srv := oauthclient.Server{Resource: st.Indicator, Issuer: st.Issuer, IssParameter: st.IssParam}
	if err := srv.CheckIssuer(iss); err != nil {
		return Connected{}, err
	}
	c, err := s.clientFor(ctx, st.Resource, st.ClientID)
	if err != nil {
		return Connected{}, err
	}
	t, err := c.Exchange(ctx, s.http(ctx, st.Resource), code, st.Verifier, st.Indicator)
	if oauthclient.InvalidClient(err) {
		s.forgetClient(ctx, st.Resource, c.ID)
	}
	if err != nil {
		return Connected{}, err
	}
	if t.AccessToken == "" {
		return Connected{}, &oauthclient.Refused{Host: host, Code: "no access token"}
	}
	a := store.UpstreamAccount{
		ProjectID: st.Project, AgentKeyID: st.AgentKey, UserID: st.User, Resource: st.Resource,
		ClientID: c.ID, Subject: subject(t), Scope: scope(t, st.Scopes), Flow: st.Nonce,
	}
	s.seal(&a, t)
	if err := s.o.Store.PutUpstreamAccount(ctx, a); err != nil {
		return Connected{}, fmt.Errorf("keep the %s account: %w", host, err)
	}
	stored, err := s.o.Store.UpstreamAccount(ctx, a.AgentKeyID, a.UserID)
	if err != nil {
		return Connected{}, fmt.Errorf("read the %s account back: %w", host, err)
	}
	s.log.Info("upstream: account connected", "host", host, "agentKey", a.AgentKeyID, "user", a.UserID)
	return Connected{Account: stored, ReturnTo: st.ReturnTo}, nil
}

// openState opens a callback's sealed state.
func (s *Service) openState(rawState string) (state, error) {
	sealed, err := base64.RawURLEncoding.DecodeString(rawState)
	if err != nil || rawState == "" {
		return state{}, fmt.Errorf("%w: it was not made by this gateway; start connecting again", ErrState)
	}
	plain, err := s.o.Box.Open(sealed, stateContext)
	if err != nil {
		return state{}, fmt.Errorf("%w: it was not made by this gateway (or with another secret key); start connecting again", ErrState)
	}
	var st state
	if err := json.Unmarshal(plain, &st); err != nil {
		return state{}, fmt.Errorf("%w: start connecting again", ErrState)
	}
	return st, nil
}

// spend exchanges the code of a refused callback and drops what it
// bought: a code left unspent would connect whoever opens the link next.
// Failing to spend it (the code expired, the server refused) is logged
// only: the person's answer is the refusal either way.
func (s *Service) spend(ctx context.Context, st state, code, why string) {
	host := oauthclient.Host(st.Resource)
	c, err := s.clientFor(ctx, st.Resource, st.ClientID)
	if err == nil {
		_, err = c.Exchange(ctx, s.http(ctx, st.Resource), code, st.Verifier, st.Indicator)
	}
	if err != nil {
		s.log.Info("upstream: the code of a refused callback could not be spent", "host", host, "why", why, "err", err)
		return
	}
	s.log.Info("upstream: spent the code of a refused callback and dropped its tokens", "host", host, "why", why)
}

// lockFlow holds the flow named nonce for one callback at a time in this
// gateway (a double click opens two): the second then finds what the
// first connected.
func (s *Service) lockFlow(nonce string) (unlock func()) {
	s.mu.Lock()
	f := s.callbacks[nonce]
	if f == nil {
		f = &flowLock{}
		s.callbacks[nonce] = f
	}
	f.n++
	s.mu.Unlock()
	f.mu.Lock()
	return func() {
		f.mu.Unlock()
		s.mu.Lock()
		if f.n--; f.n == 0 {
			delete(s.callbacks, nonce)
		}
		s.mu.Unlock()
	}
}

// flowLock is one flow's lock and how many callbacks hold or wait for it.
type flowLock struct {
	mu sync.Mutex
	n  int
}
