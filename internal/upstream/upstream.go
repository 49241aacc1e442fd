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
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/egress"
	"github.com/spacefix/spacefix/internal/oauthclient"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
)

// Options configure a [Service].
type Options struct {
	Store     store.UpstreamAccounts
	Box       *secrets.Box
	PublicURL func() string // the gateway's public base URL, no trailing slash
	// Egress is the address policy of every dial to a remote, its
	// metadata and its authorization server (`--upstream-allow-loopback`,
	// `--upstream-allow-private`); the zero policy dials public addresses
	// only. There is no way to hand the service a client of its own: every
	// upstream request goes through the policy.
	Egress egress.Policy
	Log    *slog.Logger
	Now    func() time.Time // nil: time.Now
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

// errUnreadable says a value the store keeps for an account (a token, the
// client's secret) does not open with the secret key file: the file was
// lost or replaced since. The account must be connected again.
var errUnreadable = errors.New("the secret key file does not open it (lost or replaced since it was sealed)")

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
	log *slog.Logger
	// hc dials under the policy; hcPrivate too, with private ranges
	// allowed, for a remote at a private address (see [Service.http]).
	hc, hcPrivate *http.Client

	mu        sync.Mutex
	flights   map[string]*flight // per account: the refresh running now
	reg       map[string]*sync.Mutex
	callbacks map[string]*flowLock // per connect flow (its nonce): the callback running now
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
	private := o.Egress
	private.PrivateRemote = true
	return &Service{o: o, hc: o.Egress.Client(), hcPrivate: private.Client(), log: o.Log,
		flights: map[string]*flight{}, reg: map[string]*sync.Mutex{}, callbacks: map[string]*flowLock{}}
}

// http is the client for requests about the remote at resource: to it, to
// the metadata it names and to its authorization server. Private ranges
// are allowed when the remote itself is at a private address (or the
// operator lists them).
func (s *Service) http(ctx context.Context, resource string) *http.Client {
	if s.o.Egress.ForRemote(ctx, resource).PrivateRemote {
		return s.hcPrivate
	}
	return s.hc
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

// Token returns the person's current access token for the agent key's
// remote at resource (the URL the calling replica's bridge reaches),
// refreshing it first when it expires within 60 s (one refresh at a time
// per account in this gateway; a write that loses to another gateway's
// re-reads and uses the winner's token). ErrNotConnected: no account, or
// one connected for another resource (the bridge now runs with another
// --remote: that server never gets this account's tokens); ErrReconnect:
// the upstream refused to refresh, or the secret key file no longer opens
// the account (the account is deleted).
func (s *Service) Token(ctx context.Context, projectID int64, agentKeyID string, userID int64, resource string) (string, error) {
	a, err := s.account(ctx, projectID, agentKeyID, userID, resource)
	if err != nil {
		return "", err
	}
	if !s.expiring(a) {
		return s.accessOrDrop(ctx, a)
	}
	return s.refresh(ctx, projectID, agentKeyID, userID, resource, "")
}

// Refresh is for an upstream 401 with the token stale, at resource: it
// refreshes unless the stored token differs from stale already (another
// call refreshed it), and returns the token to use.
func (s *Service) Refresh(ctx context.Context, projectID int64, agentKeyID string, userID int64, resource, stale string) (string, error) {
	t, err := s.refresh(ctx, projectID, agentKeyID, userID, resource, stale)
	if err == nil && t == stale {
		// It joined a Token flight that found stale still good by its
		// expiry: refresh once more, on our own terms.
		t, err = s.refresh(ctx, projectID, agentKeyID, userID, resource, stale)
	}
	return t, err
}

// account reads the person's account, which must be in projectID and
// connected for resource: an account is bound to the remote it was
// connected at, for every use and every refresh.
func (s *Service) account(ctx context.Context, projectID int64, agentKeyID string, userID int64, resource string) (store.UpstreamAccount, error) {
	a, err := s.o.Store.UpstreamAccount(ctx, agentKeyID, userID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && a.ProjectID != projectID) {
		return store.UpstreamAccount{}, ErrNotConnected
	}
	if err != nil {
		return store.UpstreamAccount{}, fmt.Errorf("read the upstream account: %w", err)
	}
	if a.Resource != resource {
		s.log.Info("upstream: the account was connected for another remote than the bridge's; the person must connect at this one",
			"connectedFor", oauthclient.Host(a.Resource), "bridgeRemote", oauthclient.Host(resource), "agentKey", agentKeyID, "user", userID)
		return store.UpstreamAccount{}, fmt.Errorf("%w at %s (the account is %s's)", ErrNotConnected, oauthclient.Host(resource), oauthclient.Host(a.Resource))
	}
	return a, nil
}

func (s *Service) expiring(a store.UpstreamAccount) bool {
	return !a.ExpiresAt.IsZero() && !s.o.Now().Add(refreshBefore).Before(a.ExpiresAt)
}

func (s *Service) access(a store.UpstreamAccount) (string, error) {
	t, err := s.o.Box.Open(a.Access, accessContext(a.AgentKeyID, a.UserID))
	if err != nil {
		return "", fmt.Errorf("open the %s account's token: %w", oauthclient.Host(a.Resource), errUnreadable)
	}
	return string(t), nil
}

// accessOrDrop is a's access token; when the secret key file does not
// open it, the account is of no use to anyone: it is dropped, and the
// person asked to connect again (ErrReconnect).
func (s *Service) accessOrDrop(ctx context.Context, a store.UpstreamAccount) (string, error) {
	t, err := s.access(a)
	if errors.Is(err, errUnreadable) {
		return "", s.dropUnreadable(ctx, a, err)
	}
	return t, err
}

// dropUnreadable gives up the account a whose sealed values (or its
// client's secret) the secret key file does not open (err says which),
// and tells the operator at WARN.
func (s *Service) dropUnreadable(ctx context.Context, a store.UpstreamAccount, err error) error {
	s.log.Warn("upstream: the secret key file does not open an account; it is dropped and the person asked to connect again (was the key file lost or replaced?)",
		"host", oauthclient.Host(a.Resource), "agentKey", a.AgentKeyID, "user", a.UserID, "err", err)
	return s.giveUp(ctx, a, err.Error())
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
	// Unreadable says the secret key file does not open the account's
	// token (lost or replaced since): it serves no call, and its first
	// use drops it. Pages offer Connect for it.
	Unreadable bool
}

// Accounts lists the accounts matching f, by agent key then person.
func (s *Service) Accounts(ctx context.Context, f store.UpstreamFilter) ([]Account, error) {
	as, err := s.o.Store.UpstreamAccounts(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]Account, 0, len(as))
	for _, a := range as {
		_, err := s.access(a)
		out = append(out, Account{ProjectID: a.ProjectID, AgentKeyID: a.AgentKeyID, UserID: a.UserID, Resource: a.Resource,
			Subject: a.Subject, Scope: a.Scope, ExpiresAt: a.ExpiresAt, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt,
			Unreadable: errors.Is(err, errUnreadable)})
	}
	return out, nil
}
