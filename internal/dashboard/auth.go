package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/oauth"
	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/users"
)

// SessionCookieName is the name of the session cookie of the gateway whose
// base URL is base. Browsers keep cookies per host, not per port: two
// gateways on one host (127.0.0.1:8080 and :8081) under one name would
// replace each other's cookie, and a person signed in at both would be
// signed out of one. So the port is part of the name; a gateway on the
// scheme's default port (behind a proxy on 443) keeps spacefix_session.
func SessionCookieName(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Port() == "" {
		return "spacefix_session"
	}
	return "spacefix_session_" + u.Port()
}

// sessionCookie is the name of this gateway's session cookie, from the URL
// clients reach it at: the same on every replica behind one public URL.
func (d *Dashboard) sessionCookie(r *http.Request) string {
	return SessionCookieName(d.base(r))
}

// Sign-in attempts allowed per minute, per client address and per email.
const (
	signInsPerAddr  = 20
	signInsPerEmail = 10
)

// principal is who makes a request: a signed-in user, or an API token (an
// instance token acts as an admin; a project token only in its project).
type principal struct {
	user  store.User      // zero ID for a token
	token *store.APIToken // nil for a session
}

// admin reports whether p is an instance admin.
func (p principal) admin() bool {
	if p.token != nil {
		return p.token.ProjectID == 0
	}
	return p.user.Admin
}

// name says who acted, for logs and the audit log.
func (p principal) name() string {
	if p.token != nil {
		if p.token.Name != "" {
			return "token " + p.token.ID + " (" + p.token.Name + ")"
		}
		return "token " + p.token.ID
	}
	return p.user.Email
}

type principalKey struct{}

func withPrincipal(ctx context.Context, p principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

func principalFrom(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

// authenticate finds the principal of a request: a Bearer admin token, else
// the session cookie. ok is false when there is neither or it is not live;
// err is set only when the store failed.
func (d *Dashboard) authenticate(r *http.Request) (p principal, ok bool, err error) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, err := users.VerifyAPIToken(r.Context(), d.st, auth.BearerToken(h))
		if errors.Is(err, users.ErrUnknownToken) {
			return principal{}, false, nil
		}
		if err != nil {
			return principal{}, false, err
		}
		return principal{token: &tok}, true, nil
	}
	c, err := r.Cookie(d.sessionCookie(r))
	if err != nil {
		return principal{}, false, nil
	}
	u, err := users.SessionUser(r.Context(), d.st, c.Value)
	if errors.Is(err, users.ErrNoSession) {
		return principal{}, false, nil
	}
	if err != nil {
		return principal{}, false, err
	}
	return principal{user: u}, true, nil
}

// secureRequest reports whether the browser reached us over TLS, directly
// or through a proxy that says so. The gateway's edge owns
// X-Forwarded-Proto: it deletes what a client sent and sets "https" itself
// when the public URL is https or a proxy in --trusted-proxies says so, so
// the header read here is never a client's claim.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// setSession sets the session cookie: a browser-session cookie, or with
// keep ("keep me signed in") one that lasts until the session expires.
func (d *Dashboard) setSession(w http.ResponseWriter, r *http.Request, token string, expires time.Time, keep bool) {
	c := &http.Cookie{
		Name: d.sessionCookie(r), Value: token, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secureRequest(r),
	}
	if keep {
		c.Expires = expires
	}
	http.SetCookie(w, c)
}

func (d *Dashboard) clearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: d.sessionCookie(r), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secureRequest(r),
	})
}

// clientAddr is the address sign-in attempts are counted by.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// allowSignIn counts an attempt; a refusal is a [users.Problem] that says
// when to try again.
func (d *Dashboard) allowSignIn(r *http.Request, email string) error {
	for _, lim := range []struct {
		key string
		n   int
	}{{"addr:" + clientAddr(r), signInsPerAddr}, {"email:" + strings.ToLower(email), signInsPerEmail}} {
		if ok, retry := d.signIns.Allow(lim.key, lim.n); !ok {
			return users.Problem(fmt.Sprintf("Too many sign-in attempts. Try again in %d seconds.", ratelimit.Seconds(retry)))
		}
	}
	return nil
}

type loginData struct {
	Email, Error, Next string
	App                string // the app asking, when next is an OAuth request
	Setup              bool   // no user exists yet
	Keep               bool   // "keep me signed in" is ticked
	KeepDays           int    // how long that keeps one signed in
}

func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	data := loginData{Next: safeNext(r.URL.Query().Get("next")), KeepDays: int(users.SessionLifetime.Hours() / 24)}
	data.App = d.askingApp(r, data.Next)
	if us, err := d.st.Users(r.Context()); err == nil && len(us) == 0 {
		data.Setup = true
	}
	d.renderBare(w, r, http.StatusOK, "login", "Sign in", data)
}

func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	email, password := strings.TrimSpace(r.PostFormValue("email")), r.PostFormValue("password")
	data := loginData{Email: email, Next: safeNext(r.PostFormValue("next")), Keep: r.PostFormValue("keep") != "",
		KeepDays: int(users.SessionLifetime.Hours() / 24)}
	data.App = d.askingApp(r, data.Next)
	if err := d.allowSignIn(r, email); err != nil {
		data.Error = err.Error()
		d.renderBare(w, r, http.StatusTooManyRequests, "login", "Sign in", data)
		return
	}
	u, err := users.SignIn(r.Context(), d.st, email, password)
	if errors.Is(err, users.ErrBadCredentials) {
		data.Error = err.Error()
		d.renderBare(w, r, http.StatusUnauthorized, "login", "Sign in", data)
		return
	}
	if err != nil {
		d.serverError(w, r, "sign in", err)
		return
	}
	d.startSession(w, r, u, data.Next, data.Keep)
}

func (d *Dashboard) startSession(w http.ResponseWriter, r *http.Request, u store.User, next string, keep bool) {
	token, expires, err := users.NewSession(r.Context(), d.st, u.ID)
	if err != nil {
		d.serverError(w, r, "start session", err)
		return
	}
	d.setSession(w, r, token, expires, keep)
	d.log.Info("dashboard sign-in", "user", u.Email)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(d.sessionCookie(r)); err == nil {
		if err := users.EndSession(r.Context(), d.st, c.Value); err != nil {
			d.log.Error("end session", "err", err)
		}
	}
	d.clearSession(w, r)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

type joinData struct {
	Email, Error string
	Setup        bool // the first-run link: the user becomes admin
	Fixed        bool // the invite is for Email only
	// Invite is set for a project invite: the project, and the way for a
	// person with an account to sign in and accept.
	Invite *inviteOffer
}

func (d *Dashboard) joinPage(w http.ResponseWriter, r *http.Request) {
	inv, err := users.CheckInvite(r.Context(), d.st, r.PathValue("secret"))
	if errors.Is(err, users.ErrBadInvite) {
		d.renderBare(w, r, http.StatusNotFound, "join", "Link expired", joinData{Error: err.Error()})
		return
	}
	if err != nil {
		d.serverError(w, r, "check invite", err)
		return
	}
	d.invitePage(w, r, inv, http.StatusOK, joinData{Email: inv.Email, Setup: strings.HasPrefix(r.URL.Path, "/setup/"), Fixed: inv.Email != ""})
}

func (d *Dashboard) join(w http.ResponseWriter, r *http.Request) {
	secret := r.PathValue("secret")
	email, password := strings.TrimSpace(r.PostFormValue("email")), r.PostFormValue("password")
	data := joinData{Email: email, Setup: strings.HasPrefix(r.URL.Path, "/setup/")}
	if err := d.allowSignIn(r, email); err != nil {
		data.Error = err.Error()
		d.renderBare(w, r, http.StatusTooManyRequests, "join", "Create your account", data)
		return
	}
	if password != r.PostFormValue("confirm") {
		data.Error = "The two passwords differ. Type the same password twice."
		d.renderBare(w, r, http.StatusBadRequest, "join", "Create your account", data)
		return
	}
	u, err := users.SignUp(r.Context(), d.st, secret, email, password)
	var problem users.Problem
	if errors.As(err, &problem) {
		data.Error = problem.Error()
		if inv, err := users.CheckInvite(r.Context(), d.st, secret); err == nil {
			data.Fixed = inv.Email != ""
			d.invitePage(w, r, inv, http.StatusBadRequest, data)
			return
		}
		d.renderBare(w, r, http.StatusBadRequest, "join", "Create your account", data)
		return
	}
	if err != nil {
		d.serverError(w, r, "sign up", err)
		return
	}
	d.log.Info("dashboard user created", "user", u.Email, "admin", u.Admin)
	if data.Setup && u.Admin {
		d.ownOwnerless(r, u)
	}
	if ms, err := d.st.Memberships(r.Context(), u.ID); err == nil {
		ar := r.WithContext(withPrincipal(r.Context(), principal{user: u}))
		for _, m := range ms {
			d.audit(ar, m.ProjectID, "member.join", u.Email, nil, memberAudit{u.Email, m.Role})
		}
	}
	d.startSession(w, r, u, "/", false)
}

// ownOwnerless makes the first admin, who ran setup, the owner of the
// projects that have no member yet (the first project, made when the
// store was): "creators become first owner" holds for it too, and its
// Members page names someone to ask. A failure is logged; the admin may
// do everything anyway.
func (d *Dashboard) ownOwnerless(r *http.Request, u store.User) {
	ps, err := d.st.Projects(r.Context())
	if err != nil {
		d.log.Error("setup: list projects", "err", err)
		return
	}
	for _, p := range ps {
		ms, err := d.st.Members(r.Context(), p.ID)
		if err == nil && len(ms) == 0 {
			_, err = d.st.SetMember(r.Context(), store.Member{ProjectID: p.ID, UserID: u.ID, Role: store.RoleOwner})
		}
		if err != nil {
			d.log.Error("setup: make the first admin an owner", "project", p.Name, "err", err)
		}
	}
}

// askingApp is the name of the app whose OAuth request sent the person
// to sign in (next is that request), or "". The request is checked as
// the consent page checks it, so a hand-made link cannot put a name here
// that no registered app has.
func (d *Dashboard) askingApp(r *http.Request, next string) string {
	u, err := url.Parse(next)
	if d.oauth == nil || err != nil || u.Path != oauth.AuthorizePath {
		return ""
	}
	ar := r.Clone(r.Context())
	ar.Method, ar.URL, ar.Body, ar.Form, ar.PostForm = http.MethodGet, u, http.NoBody, nil, nil
	a, err := d.oauth.ParseAuthorize(ar)
	if err != nil {
		return ""
	}
	return a.ClientName
}

// safeNext keeps a post-sign-in redirect on this site.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if next == "" || err != nil || u.IsAbs() || u.Host != "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}
