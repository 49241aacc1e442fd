package store

import "time"

// User is a person who signs in to the dashboard.
type User struct {
	ID    int64
	Email string // unique without regard to case; stored as given
	// Name is how the person calls themselves (set with SetUserName):
	// agents see it as the caller's name; "" until they give one.
	Name string
	// Admin may invite users and make admin API tokens.
	Admin     bool
	CreatedAt time.Time
}

// MaxUserName is the longest name a person may give, in bytes.
const MaxUserName = 100

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
	ID    string // public id, "inv_…"
	Email string // the address it was made for; empty means anyone
	Admin bool   // the user it creates is an admin
	// ProjectID and Role, when set, make the new user a member of that
	// project with that role.
	ProjectID int64
	Role      Role
	CreatedBy int64 // user id; 0 for the setup link
	CreatedAt time.Time
	ExpiresAt time.Time // required
	UsedAt    time.Time // zero while unused
}

// APIToken is a bearer token for the admin API (the CLI and scripts). An
// instance token (ProjectID 0) acts with admin rights; a project token acts
// only on its project, with its role.
type APIToken struct {
	ID        string // public id, "tok_…"
	Name      string // a label for people
	ProjectID int64  // 0: an instance token
	Role      Role   // the project token's role; empty for an instance token
	CreatedBy int64  // user id; 0 when made by the CLI on the store file
	CreatedAt time.Time
	RevokedAt time.Time // zero while live
}

// Revoked reports whether the token has been revoked.
func (t APIToken) Revoked() bool { return !t.RevokedAt.IsZero() }

// Role is what a member may do in a project. Instance admins may do
// everything everywhere.
type Role string

// Roles, from least to most.
const (
	// RoleViewer sees tools, agents, keys, logs, usage and the audit log;
	// changes nothing.
	RoleViewer Role = "viewer"
	// RoleEditor also changes tool controls, settings, approvals, agent
	// metadata and replicas; not members, keys, tokens or connected apps.
	RoleEditor Role = "editor"
	// RoleOwner may do everything in the project, members and keys too.
	RoleOwner Role = "owner"
)

// Roles lists the roles from least to most.
var Roles = []Role{RoleViewer, RoleEditor, RoleOwner}

func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleEditor:
		return 2
	case RoleOwner:
		return 3
	}
	return 0
}

// Valid reports whether r is one of [Roles].
func (r Role) Valid() bool { return r.rank() > 0 }

// AtLeast reports whether r may do what need may; an invalid role may do
// nothing.
func (r Role) AtLeast(need Role) bool { return r.Valid() && r.rank() >= need.rank() }

// Member is a person's role in a project.
type Member struct {
	ProjectID int64
	UserID    int64
	Email     string // the user's, filled in by the store
	Role      Role
	CreatedAt time.Time // when they joined; set by the store
}
