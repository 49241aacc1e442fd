// Package users is sign-in for the dashboard and the admin API: people with
// argon2id password hashes, browser sessions, one-time invite links (the
// first-run setup link is one) and admin API tokens.
//
// Every secret this package makes (session tokens, invite links, API
// tokens) is 130 bits of randomness and stored only as its SHA-256, like
// agent and client keys; passwords are stored only as argon2id hashes. None
// of them is ever logged.
package users

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/store"
)

// Lifetimes.
const (
	// SessionLifetime bounds a sign-in: its cookie ends with the browser
	// session, or with "keep me signed in" survives browser restarts, and
	// the session ends after this at the latest either way.
	SessionLifetime = 30 * 24 * time.Hour
	InviteLifetime  = 7 * 24 * time.Hour
	SetupLifetime   = 24 * time.Hour
)

// Secret prefixes, so that leaked secrets are recognisable.
const (
	tokenPrefix   = "sfx_admin_"
	sessionPrefix = "sfx_session_"
)

// Problem is a mistake the person can fix; its text is written for them
// and safe to show.
type Problem string

func (p Problem) Error() string { return string(p) }

// Errors callers branch on.
var (
	ErrBadCredentials error = Problem("Wrong email or password.")
	ErrBadInvite      error = Problem("This link is unknown, used or expired. Ask an admin for a new invite.")
	ErrUnknownToken         = errors.New("unknown or revoked admin API token")
	ErrNoSession            = errors.New("not signed in")
	errEmailTaken     error = Problem("A user with this email exists already. Sign in instead.")
)

// SetupStore is what [SetupPath] reads and writes.
type SetupStore interface {
	store.Users
	store.Invites
}

// SignUpStore is what [SignUp] touches: the invite, the new user and, for
// a project invite, the membership.
type SignUpStore interface {
	store.Users
	store.Invites
	store.Members
}

// SessionStore is what [SessionUser] reads.
type SessionStore interface {
	store.Sessions
	UserByID(ctx context.Context, id int64) (store.User, error)
}

// SetupPath creates a one-time setup link for the first admin when the
// store has no user yet, and returns its path ("/setup/…"); it returns ""
// when a user exists. serve prints the link on every start until someone
// has used one.
func SetupPath(ctx context.Context, st SetupStore) (string, error) {
	us, err := st.Users(ctx)
	if err != nil {
		return "", fmt.Errorf("setup link: %w", err)
	}
	if len(us) > 0 {
		return "", nil
	}
	secret, err := createInvite(ctx, st, store.Invite{Admin: true, ExpiresAt: time.Now().Add(SetupLifetime)})
	if err != nil {
		return "", fmt.Errorf("setup link: %w", err)
	}
	return "/setup/" + secret, nil
}

// Invite creates a one-time link for a new user and returns its path
// ("/join/…"). email, if not empty, is the only address that may use it.
func Invite(ctx context.Context, st store.Invites, by store.User, email string, admin bool) (string, error) {
	return invite(ctx, st, store.Invite{Email: email, Admin: admin, CreatedBy: by.ID})
}

// InviteToProject is [Invite] for a new member of a project: the user it
// creates joins the project with the role.
func InviteToProject(ctx context.Context, st store.Invites, by store.User, email string, projectID int64, role store.Role) (string, error) {
	if projectID == 0 || !role.Valid() {
		return "", fmt.Errorf("invite: project %d, role %q", projectID, role)
	}
	return invite(ctx, st, store.Invite{Email: email, CreatedBy: by.ID, ProjectID: projectID, Role: role})
}

func invite(ctx context.Context, st store.Invites, inv store.Invite) (string, error) {
	inv.ExpiresAt = time.Now().Add(InviteLifetime)
	secret, err := createInvite(ctx, st, inv)
	if err != nil {
		return "", fmt.Errorf("invite: %w", err)
	}
	return "/join/" + secret, nil
}

func createInvite(ctx context.Context, st store.Invites, inv store.Invite) (string, error) {
	secret := rand.Text()
	inv.ID = "inv_" + strings.ToLower(rand.Text()[:12])
	if _, err := st.CreateInvite(ctx, inv, auth.Hash(secret)); err != nil {
		return "", err
	}
	return secret, nil
}

// CheckInvite returns the live invite of a link's secret, or ErrBadInvite.
func CheckInvite(ctx context.Context, st store.Invites, secret string) (store.Invite, error) {
	inv, err := st.InviteByHash(ctx, auth.Hash(secret))
	if errors.Is(err, store.ErrNotFound) {
		return store.Invite{}, ErrBadInvite
	}
	return inv, err
}

// SignUp uses an invite link to create a user with a password. Mistakes the
// person can fix come back as a [Problem].
func SignUp(ctx context.Context, st SignUpStore, secret, email, password string) (store.User, error) {
	addr, err := mail.ParseAddress(strings.TrimSpace(email))
	if err != nil || addr.Name != "" {
		return store.User{}, Problem("Enter an email address such as ada@example.com.")
	}
	if err := CheckPasswordRules(password); err != nil {
		return store.User{}, err
	}
	inv, err := CheckInvite(ctx, st, secret)
	if err != nil {
		return store.User{}, err
	}
	if inv.Email != "" && !strings.EqualFold(inv.Email, addr.Address) {
		return store.User{}, Problem(fmt.Sprintf("This invite is for %s. Sign up with that address.", inv.Email))
	}
	if _, _, err := st.UserByEmail(ctx, addr.Address); err == nil {
		return store.User{}, errEmailTaken
	}
	hash := HashPassword(password)
	if inv, err = st.UseInvite(ctx, auth.Hash(secret)); errors.Is(err, store.ErrNotFound) {
		return store.User{}, ErrBadInvite
	} else if err != nil {
		return store.User{}, err
	}
	u, err := st.CreateUser(ctx, store.User{Email: addr.Address, Admin: inv.Admin}, hash)
	if errors.Is(err, store.ErrExists) {
		return store.User{}, errEmailTaken
	}
	if err != nil || inv.ProjectID == 0 {
		return u, err
	}
	// A project deleted since the invite leaves the user without it.
	if _, err := st.SetMember(ctx, store.Member{ProjectID: inv.ProjectID, UserID: u.ID, Role: inv.Role}); err != nil && !errors.Is(err, store.ErrNotFound) {
		return u, fmt.Errorf("sign up: join project %d: %w", inv.ProjectID, err)
	}
	return u, nil
}

// SignIn checks an email and password; wrong ones give ErrBadCredentials,
// after the same work as right ones.
func SignIn(ctx context.Context, st store.Users, email, password string) (store.User, error) {
	u, hash, err := st.UserByEmail(ctx, email)
	if errors.Is(err, store.ErrNotFound) {
		CheckPassword(dummyHash(), password)
		return store.User{}, ErrBadCredentials
	}
	if err != nil {
		return store.User{}, err
	}
	ok, err := CheckPassword(hash, password)
	if err != nil {
		return store.User{}, fmt.Errorf("sign in user %d: %w", u.ID, err)
	}
	if !ok {
		return store.User{}, ErrBadCredentials
	}
	return u, nil
}

// NewSession starts a session for a user and returns the token for its
// cookie and when it expires.
func NewSession(ctx context.Context, st store.Sessions, userID int64) (token string, expires time.Time, err error) {
	token = sessionPrefix + rand.Text()
	sess, err := st.CreateSession(ctx, store.Session{UserID: userID, ExpiresAt: time.Now().Add(SessionLifetime)}, auth.Hash(token))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("new session: %w", err)
	}
	return token, sess.ExpiresAt, nil
}

// SessionUser returns the user of a live session token, or ErrNoSession.
func SessionUser(ctx context.Context, st SessionStore, token string) (store.User, error) {
	if token == "" {
		return store.User{}, ErrNoSession
	}
	sess, err := st.SessionByHash(ctx, auth.Hash(token))
	if errors.Is(err, store.ErrNotFound) {
		return store.User{}, ErrNoSession
	}
	if err != nil {
		return store.User{}, err
	}
	u, err := st.UserByID(ctx, sess.UserID)
	if errors.Is(err, store.ErrNotFound) {
		return store.User{}, ErrNoSession
	}
	return u, err
}

// EndSession signs a session out.
func EndSession(ctx context.Context, st store.Sessions, token string) error {
	return st.DeleteSession(ctx, auth.Hash(token))
}

// CreateAPIToken makes an instance admin API token and returns it with its
// secret, which is shown once and never again. by is 0 when the CLI makes
// it.
func CreateAPIToken(ctx context.Context, st store.APITokens, name string, by int64) (store.APIToken, string, error) {
	return createToken(ctx, st, store.APIToken{Name: name, CreatedBy: by})
}

// CreateProjectToken makes an API token that acts only on one project, with
// a role there, and returns it with its secret.
func CreateProjectToken(ctx context.Context, st store.APITokens, name string, by, projectID int64, role store.Role) (store.APIToken, string, error) {
	if projectID == 0 || !role.Valid() {
		return store.APIToken{}, "", fmt.Errorf("create API token: project %d, role %q", projectID, role)
	}
	return createToken(ctx, st, store.APIToken{Name: name, CreatedBy: by, ProjectID: projectID, Role: role})
}

func createToken(ctx context.Context, st store.APITokens, tok store.APIToken) (store.APIToken, string, error) {
	secret := tokenPrefix + rand.Text()
	tok.ID = "tok_" + strings.ToLower(rand.Text()[:12])
	tok, err := st.CreateAPIToken(ctx, tok, auth.Hash(secret))
	if err != nil {
		return store.APIToken{}, "", fmt.Errorf("create API token: %w", err)
	}
	return tok, secret, nil
}

// VerifyAPIToken returns the live token whose secret is presented, or
// ErrUnknownToken.
func VerifyAPIToken(ctx context.Context, st store.APITokens, secret string) (store.APIToken, error) {
	if !strings.HasPrefix(secret, tokenPrefix) {
		return store.APIToken{}, ErrUnknownToken
	}
	tok, err := st.APITokenByHash(ctx, auth.Hash(secret))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.APIToken{}, ErrUnknownToken
	case err != nil:
		return store.APIToken{}, err
	case tok.Revoked():
		return store.APIToken{}, ErrUnknownToken
	}
	return tok, nil
}
