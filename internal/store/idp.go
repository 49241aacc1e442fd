package store

import (
	"context"
	"time"
)

// IdP is a company identity provider this gateway trusts, instance-wide,
// to vouch for people with Identity Assertion JWT Authorization Grants
// (ID-JAG; the JWT bearer grant at the gateway's token endpoint).
type IdP struct {
	Issuer string // the IdP's issuer URL, exactly as its tokens carry it; the key
	// JWKSURI is where its signing keys are; "" means the jwks_uri of its
	// metadata (RFC 8414 or OpenID Connect discovery).
	JWKSURI string
	// AllowedClients are the OAuth client ids (registered ids or Client ID
	// Metadata Document URLs) its grants may be presented by; none means any.
	AllowedClients []string
	// ProvisionProjectID and ProvisionRole, when set, are the project people
	// signed in by this IdP reach, and the role a person the gateway does not
	// know yet is created with there. 0 and "": only people the gateway knows.
	ProvisionProjectID int64
	ProvisionRole      Role
	CreatedAt          time.Time // set by the store
}

// IdPs keeps the trusted identity providers and which person each of their
// subjects is.
type IdPs interface {
	// CreateIdP adds an IdP; ErrExists when its issuer is there already.
	CreateIdP(ctx context.Context, p IdP) (IdP, error)
	// IdP returns the IdP of an issuer, or ErrNotFound.
	IdP(ctx context.Context, issuer string) (IdP, error)
	// IdPs lists the IdPs by issuer.
	IdPs(ctx context.Context) ([]IdP, error)
	// DeleteIdP removes an IdP and the links of its subjects; ErrNotFound
	// when there is none.
	DeleteIdP(ctx context.Context, issuer string) error
	// LinkIdentity records that the IdP's subject is the user, replacing an
	// earlier link of the subject.
	LinkIdentity(ctx context.Context, issuer, subject string, userID int64) error
	// IdentityUser returns the user linked to the IdP's subject, or
	// ErrNotFound.
	IdentityUser(ctx context.Context, issuer, subject string) (int64, error)
}

// UsedOnce remembers values that may be presented only once until they
// expire: the jti of ID-JAGs and of DPoP proofs. Kept in the store so that
// every gateway sharing it refuses a value any of them saw.
type UsedOnce interface {
	// UseOnce records key until expires and reports true, or reports
	// false when key is recorded already and has not expired.
	UseOnce(ctx context.Context, key string, expires time.Time) (bool, error)
	// PruneUsedOnce deletes the values that expired before t.
	PruneUsedOnce(ctx context.Context, before time.Time) (int64, error)
}
