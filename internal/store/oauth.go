package store

import (
	"errors"
	"time"
)

// ErrUsed: a single-use OAuth secret (an authorization code or a refresh
// token) was presented again. [Store.UseOAuthToken] returns it together with
// the token, so the caller can revoke the grant it belongs to.
var ErrUsed = errors.New("already used")

// Kinds of [OAuthToken].
const (
	OAuthCode    = "code"    // an authorization code, single-use, about a minute
	OAuthAccess  = "access"  // an access token, presented on every MCP request
	OAuthRefresh = "refresh" // a refresh token, single-use: each use makes a new one
)

// OAuthClient is an app that registered itself by dynamic client
// registration (RFC 7591). Apps that name themselves by a Client ID
// Metadata Document are not stored: any gateway fetches the document.
type OAuthClient struct {
	ID         string // "client_…"
	Metadata   []byte // the registration as accepted, JSON
	SecretHash []byte // SHA-256 of the client secret; nil for a public client
	CreatedAt  time.Time
}

// OAuthGrant is one person's consent for one app to reach one project: a
// connected app. Its tokens work until it is revoked.
type OAuthGrant struct {
	ID          string // "app_…"; MCP requests made with its tokens act as a client key of this id
	ProjectID   int64
	ProjectName string // filled on reads
	UserID      int64  // who approved
	UserEmail   string // filled on reads
	UserName    string // filled on reads: the approver's name, "" if none
	ClientID    string // a registered client's id or a metadata document's URL
	ClientName  string // as the app gave it; unverified
	Scope       string // "mcp:read" or "mcp:read mcp:write"
	Resource    string // the canonical MCP URL the tokens are bound to (RFC 8707)
	CreatedAt   time.Time
	LastUsedAt  time.Time // zero until a token of it is first used
	RevokedAt   time.Time // zero while live
}

// Revoked reports whether the grant has been revoked.
func (g OAuthGrant) Revoked() bool { return !g.RevokedAt.IsZero() }

// OAuthToken is an authorization code, access token or refresh token. The
// secret lives only with the client; the store keeps its SHA-256.
type OAuthToken struct {
	Kind    string // OAuthCode, OAuthAccess or OAuthRefresh
	GrantID string // a code names the grant its exchange will create
	// Data is a code's authorization request, or the DPoP key binding of an
	// access or refresh token ({"jkt": …}), JSON; nil otherwise.
	Data      []byte
	CreatedAt time.Time
	ExpiresAt time.Time // required
	UsedAt    time.Time // zero until used (codes and refresh tokens)
}
