package oauth

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"strings"

	"github.com/spacefix/spacefix/internal/store"
)

// enterpriseGrant turns a checked ID-JAG into a grant and an access token:
// the person (by issuer and subject, else by a verified e-mail, else
// provisioned when the IdP entry says so), the project they reach, and the
// scope narrowed to their role there.
func (s *Server) enterpriseGrant(r *http.Request, c *client, p store.IdP, cl *idJAGClaims, jkt string) (*tokenResponse, error) {
	ctx := r.Context()
	u, err := s.person(r, p, cl)
	if err != nil {
		return nil, err
	}
	projectID, role, err := s.projectOf(r, p, u)
	if err != nil {
		return nil, err
	}
	scope := normalScope(cl.Scope)
	if asked := r.PostFormValue("scope"); asked != "" && !Writes(normalScope(asked)) {
		scope = ScopeRead // the client may ask for less than the IdP allowed (RFC 7521 section 4.1)
	}
	if !u.Admin && !role.AtLeast(store.RoleEditor) {
		scope = ScopeRead // a viewer can give an app only what a viewer has
	}
	g, err := s.st.CreateOAuthGrant(ctx, store.OAuthGrant{
		ID: newID("app_"), ProjectID: projectID, UserID: u.ID, ClientID: c.ID, ClientName: c.DisplayName(),
		Scope: scope, Resource: s.Resource(r),
	})
	if err != nil {
		return nil, err
	}
	if older, err := s.st.OAuthGrants(ctx, g.ProjectID); err == nil {
		for _, o := range older {
			if o.ID != g.ID && o.ClientID == g.ClientID && o.UserID == g.UserID {
				s.revokeGrant(r, o.ID, "replaced by a new sign-in")
			}
		}
	}
	s.log.Info("OAuth app connected by an identity provider", "grant", g.ID, "project", g.ProjectName, "client", g.ClientName,
		"user", g.UserEmail, "issuer", p.Issuer, "scope", g.Scope)
	if _, err := s.st.AppendAudit(ctx, store.NewAuditEntry(g.ProjectID, u.Email, clientAddr(r), "oauth.jwt_bearer", g.ClientName, nil,
		map[string]any{"id": g.ID, "client": g.ClientName, "clientId": g.ClientID, "issuer": p.Issuer, "subject": cl.Subject,
			"scope": g.Scope, "readOnly": !Writes(g.Scope)})); err != nil {
		s.log.Error("audit log: entry not saved", "action", "oauth.jwt_bearer", "grant", g.ID, "err", err)
	}
	return s.issueAccess(ctx, g, jkt)
}

// person finds the person an ID-JAG speaks for, linking the subject to
// them the first time.
func (s *Server) person(r *http.Request, p store.IdP, cl *idJAGClaims) (store.User, error) {
	ctx := r.Context()
	id, err := s.st.IdentityUser(ctx, p.Issuer, cl.Subject)
	if err == nil {
		u, err := s.st.UserByID(ctx, id)
		if !errors.Is(err, store.ErrNotFound) {
			return u, err
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return store.User{}, err
	}
	email := strings.TrimSpace(cl.Email)
	if email != "" && verified(cl.EmailVerified) {
		u, _, err := s.st.UserByEmail(ctx, email)
		if err == nil {
			return u, s.st.LinkIdentity(ctx, p.Issuer, cl.Subject, u.ID)
		}
		if !errors.Is(err, store.ErrNotFound) {
			return store.User{}, err
		}
	}
	if p.ProvisionProjectID == 0 {
		return store.User{}, badAssertion("The person %q of %s is not known to this gateway. Invite them to a project with the e-mail address the identity provider sends (as a verified email claim), or let the identity provider's entry provision people: spacefix idp add --provision PROJECT:ROLE.", cl.Subject, p.Issuer)
	}
	if a, err := mail.ParseAddress(email); email == "" || err != nil || a.Address != email {
		return store.User{}, badAssertion("The assertion has no usable email claim, so the gateway cannot create the person %q of %s. Configure the identity provider to include email.", cl.Subject, p.Issuer)
	}
	// A password nobody knows: people of the identity provider reach the
	// gateway through it, and the dashboard's password sign-in stays closed
	// to them.
	if s.hashPassword == nil {
		return store.User{}, errors.New("provision a person: no Options.HashPassword")
	}
	u, err := s.st.CreateUser(ctx, store.User{Email: email}, s.hashPassword(rand.Text()))
	if errors.Is(err, store.ErrExists) {
		return store.User{}, badAssertion("A person with the e-mail %q exists already, and the identity provider does not mark the address verified, so the gateway will not treat them as one. Mark email_verified at the identity provider.", email)
	}
	if err != nil {
		return store.User{}, err
	}
	s.log.Info("person provisioned by an identity provider", "user", u.Email, "issuer", p.Issuer)
	if _, err := s.st.AppendAudit(ctx, store.NewAuditEntry(p.ProvisionProjectID, "idp "+p.Issuer, clientAddr(r), "user.provision", u.Email, nil,
		map[string]any{"email": u.Email, "issuer": p.Issuer, "subject": cl.Subject})); err != nil {
		s.log.Error("audit log: entry not saved", "action", "user.provision", "user", u.Email, "err", err)
	}
	return u, s.st.LinkIdentity(ctx, p.Issuer, cl.Subject, u.ID)
}

func verified(v any) bool { return v == true || v == "true" }

// projectOf decides the project a token of the person reaches: the IdP
// entry's provisioning project (the person joins it with its role when
// not a member), else the person's only project.
func (s *Server) projectOf(r *http.Request, p store.IdP, u store.User) (int64, store.Role, error) {
	ctx := r.Context()
	if p.ProvisionProjectID != 0 {
		m, err := s.st.Member(ctx, p.ProvisionProjectID, u.ID)
		if err == nil {
			return m.ProjectID, m.Role, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return 0, "", err
		}
		if u.Admin {
			return p.ProvisionProjectID, store.RoleOwner, nil
		}
		m, err = s.st.SetMember(ctx, store.Member{ProjectID: p.ProvisionProjectID, UserID: u.ID, Role: p.ProvisionRole})
		if err != nil {
			return 0, "", fmt.Errorf("add %s to project %d: %w", u.Email, p.ProvisionProjectID, err)
		}
		if _, err := s.st.AppendAudit(ctx, store.NewAuditEntry(p.ProvisionProjectID, "idp "+p.Issuer, clientAddr(r), "member.add", u.Email, nil,
			map[string]any{"email": u.Email, "role": m.Role})); err != nil {
			s.log.Error("audit log: entry not saved", "action", "member.add", "user", u.Email, "err", err)
		}
		return m.ProjectID, m.Role, nil
	}
	ms, err := s.st.Memberships(ctx, u.ID)
	if err != nil {
		return 0, "", err
	}
	switch len(ms) {
	case 1:
		return ms[0].ProjectID, ms[0].Role, nil
	case 0:
		return 0, "", badAssertion("%s is not a member of any project. A project owner adds them, or the identity provider's entry names a project: spacefix idp add --provision PROJECT:ROLE.", u.Email)
	}
	return 0, "", badAssertion("%s is a member of %d projects, and the identity provider's entry names none; the gateway cannot tell which one the app should reach. Give the entry a project: spacefix idp add --provision PROJECT:ROLE.", u.Email, len(ms))
}
