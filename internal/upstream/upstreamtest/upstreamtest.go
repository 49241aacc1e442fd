// Package upstreamtest is a fake of the gateway's upstream accounts (what
// [upstream.Service] keeps of each person's sign-in to a bridged remote),
// for tests of the call path in front of a per-person bridge.
package upstreamtest

import (
	"context"
	"fmt"
	"sync"

	"github.com/spacefix/spacefix/internal/upstream"
)

// ConnectURL is where [Accounts] sends a person to sign in, before the
// agent key's id.
const ConnectURL = "https://gw.example.com/connect/"

// Accounts are the upstream accounts of one bridged agent key: one token
// per person, by user id. It is safe for concurrent use.
type Accounts struct {
	agentKey  string
	mu        sync.Mutex
	tokens    map[int64]string
	reconnect map[int64]bool   // the upstream refused the account: connect again
	refreshTo map[int64]string // what a refresh gives; none: ErrReconnect
	refreshed []string         // the stale tokens Refresh was given
}

// New returns the accounts of agentKey, with tokens by user id. A refresh
// is refused (the person must connect again) until [Accounts.RefreshGives]
// says what it gives.
func New(agentKey string, tokens map[int64]string) *Accounts {
	return &Accounts{agentKey: agentKey, tokens: tokens, reconnect: map[int64]bool{}, refreshTo: map[int64]string{}}
}

// Token is the person's token, [upstream.ErrReconnect] after
// [Accounts.Refuse], or [upstream.ErrNotConnected].
func (u *Accounts) Token(_ context.Context, _ int64, agentKeyID string, userID int64, _ string) (string, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if agentKeyID != u.agentKey {
		return "", fmt.Errorf("token of agent key %q, want %q", agentKeyID, u.agentKey)
	}
	if u.reconnect[userID] {
		return "", upstream.ErrReconnect
	}
	tok, ok := u.tokens[userID]
	if !ok {
		return "", upstream.ErrNotConnected
	}
	return tok, nil
}

// Refresh records the stale token and gives what [Accounts.RefreshGives]
// set; without it, the person's token is dropped and the answer is
// [upstream.ErrReconnect].
func (u *Accounts) Refresh(_ context.Context, _ int64, _ string, userID int64, _, stale string) (string, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.refreshed = append(u.refreshed, stale)
	tok, ok := u.refreshTo[userID]
	if !ok {
		delete(u.tokens, userID)
		return "", upstream.ErrReconnect
	}
	u.tokens[userID] = tok
	return tok, nil
}

// ConnectURL is where a person signs in to the agent key's remote.
func (u *Accounts) ConnectURL(agentKeyID string) string { return ConnectURL + agentKeyID }

// SetToken sets userID's token, as a sign-in would.
func (u *Accounts) SetToken(userID int64, tok string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.tokens[userID] = tok
}

// Refuse makes userID's account one the upstream would not refresh: the
// person must connect again.
func (u *Accounts) Refuse(userID int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reconnect[userID] = true
}

// RefreshGives sets what the next refreshes of userID's token give; ""
// refuses them (the person must connect again).
func (u *Accounts) RefreshGives(userID int64, tok string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if tok == "" {
		delete(u.refreshTo, userID)
		return
	}
	u.refreshTo[userID] = tok
}

// Refreshes returns the stale tokens refreshes were given, in order.
func (u *Accounts) Refreshes() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.refreshed...)
}
