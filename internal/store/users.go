package store

import "time"

// User is a person who signs in to the dashboard.
type User struct {
	ID    int64
	Email string // unique without regard to case; stored as given
	// Admin may invite users and make admin API tokens.
	Admin     bool
	CreatedAt time.Time
}

// Session is a signed-in browser. Its token lives only in the cookie; the
// store keeps the token's SHA-256.
type Session struct {
	UserID    int64
	CreatedAt time.Time // set by the store
	ExpiresAt time.Time // required
}

// Invite is a one-time link to create a user. The first-run setup link is
// an invite with Admin set.
type Invite struct {
	ID        string // public id, "inv_…"
	Email     string // the address it was made for; empty means anyone
	Admin     bool   // the user it creates is an admin
	CreatedBy int64  // user id; 0 for the setup link
	CreatedAt time.Time
	ExpiresAt time.Time // required
	UsedAt    time.Time // zero while unused
}

// APIToken is a bearer token for the admin API (the CLI and scripts). It
// acts with admin rights.
type APIToken struct {
	ID        string // public id, "tok_…"
	Name      string // a label for people
	CreatedBy int64  // user id; 0 when made by the CLI on the store file
	CreatedAt time.Time
	RevokedAt time.Time // zero while live
}

// Revoked reports whether the token has been revoked.
func (t APIToken) Revoked() bool { return !t.RevokedAt.IsZero() }
