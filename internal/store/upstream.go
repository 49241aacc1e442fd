package store

import (
	"context"
	"time"
)

// UpstreamAccounts keeps each person's own account at a bridged remote
// that runs per person (issue 28): the tokens the gateway got when the
// person connected, sealed by internal/secrets (the store never sees them
// in the clear), and the upstream OAuth clients the gateway registered to
// get them. Deleting a user, removing a member from a project and
// deleting an agent key delete the matching accounts in the same
// transaction.
type UpstreamAccounts interface {
	// PutUpstreamAccount inserts a's (AgentKeyID, UserID) account or
	// replaces the one stored; the stored Version becomes the old one + 1,
	// or 1 for a new row. CreatedAt is kept from an older row, and set
	// (with UpdatedAt) by the store when zero.
	PutUpstreamAccount(ctx context.Context, a UpstreamAccount) error
	// UpdateUpstreamAccount replaces the stored account of a's
	// (AgentKeyID, UserID) only while its Version is a.Version, and stores
	// Version+1: of two gateways that refresh one account at once, one
	// wins and the other re-reads. False when the Version differs or the
	// account is gone.
	UpdateUpstreamAccount(ctx context.Context, a UpstreamAccount) (bool, error)
	// UpstreamAccount returns a person's account for an agent key, or
	// ErrNotFound.
	UpstreamAccount(ctx context.Context, agentKeyID string, userID int64) (UpstreamAccount, error)
	// UpstreamAccounts lists the accounts matching f, by agent key, then
	// user.
	UpstreamAccounts(ctx context.Context, f UpstreamFilter) ([]UpstreamAccount, error)
	// DeleteUpstreamAccounts deletes the accounts matching f and says how
	// many went. A zero filter deletes nothing (a guard, not "all").
	DeleteUpstreamAccounts(ctx context.Context, f UpstreamFilter) (int, error)
	// UpstreamClient returns the upstream OAuth client registered for a
	// resource and redirect URI, or ErrNotFound.
	UpstreamClient(ctx context.Context, resource, redirectURI string) (UpstreamClient, error)
	// PutUpstreamClient stores c under (Resource, RedirectURI), replacing
	// an earlier one. CreatedAt is set by the store when zero.
	PutUpstreamClient(ctx context.Context, c UpstreamClient) error
	// UpstreamClients lists every upstream client, by resource then
	// redirect URI (for key rotation).
	UpstreamClients(ctx context.Context) ([]UpstreamClient, error)
}

// UpstreamAccount is one person's account at the remote of a bridged
// agent key. Access and Refresh are sealed (internal/secrets), never
// plain.
type UpstreamAccount struct {
	ProjectID  int64
	AgentKeyID string    // the bridged agent's key
	UserID     int64     // the person
	Resource   string    // the remote MCP URL
	Access     []byte    // sealed by internal/secrets (never plain)
	Refresh    []byte    // sealed; nil when none
	ExpiresAt  time.Time // zero: unknown
	Scope      string
	ClientID   string // the upstream client that holds the grant
	Subject    string // what the person connected as, if the upstream said (may be "")

	CreatedAt, UpdatedAt time.Time
	// ClaimedUntil, when after now, says a gateway is refreshing the
	// tokens (and the others wait for its write) until then; zero: none.
	ClaimedUntil time.Time
	// Version is bumped by every write; UpdateUpstreamAccount compares it.
	Version int64
	// Flow names the connect flow that wrote the account (the nonce of
	// its sealed state): the callback of that flow opened again finds
	// the account it connected. PutUpstreamAccount writes it;
	// UpdateUpstreamAccount keeps it. "" for accounts of older gateways.
	Flow string
}

// UpstreamFilter selects upstream accounts. Zero fields match all.
type UpstreamFilter struct {
	ProjectID  int64
	AgentKeyID string
	UserID     int64
}

// IsZero reports whether f selects every account.
func (f UpstreamFilter) IsZero() bool { return f == UpstreamFilter{} }

// UpstreamClient is an OAuth client the gateway registered (or names, by
// CIMD) at a remote's authorization server, per resource and redirect URI.
type UpstreamClient struct {
	Resource, RedirectURI     string // key
	Issuer, AuthURL, TokenURL string
	ClientID                  string
	Secret                    []byte // sealed; nil for a public client
	Scopes                    []string
	CreatedAt                 time.Time
	// Indicator is the resource (RFC 8707) the tokens are asked for and
	// refreshed with: the remote's protected resource metadata's, which
	// may differ from Resource (the remote URL). "" sends none.
	Indicator string
}
