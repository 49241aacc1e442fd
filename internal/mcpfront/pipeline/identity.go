package pipeline

import (
	"context"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/identity"
)

// Identity tokens (docs/identity.md): an agent key with an identity
// audience (store.Key.IdentityAudience) gets, with every call, read, get
// and completion sent to its replicas, a short-lived JWT the gateway signs
// that says who is calling, for the provider to pass to its own backend.
// A token asserts the caller, not the call: the signer reuses one per
// caller and audience until a minute before it expires (its jti is its
// own; the call id is in the call message). A key without an audience
// costs nothing: no hook, no signing, no allocation.

// identityTokens returns the hook that gives the identity token of a call
// by caller to a replica of agentKey in project projectID; nil when the
// gateway signs no tokens or the key asked for none.
func (f *Pipeline) identityTokens(ctx context.Context, projectID int64, agentKey string, caller agentproto.Caller) func(callID string, deadline time.Time) string {
	if f.identity == nil {
		return nil
	}
	aud := f.controls.Get(ctx, projectID).AgentKeys[agentKey].IdentityAudience
	if aud == "" {
		return nil
	}
	claims := identityClaims(caller, aud)
	return func(callID string, _ time.Time) string {
		tok, err := f.identity.Token(claims)
		if err != nil {
			// The call goes without: the provider's backend refuses it,
			// which is what the provider asked for.
			f.log.Error("sign a call's identity token", "agentKey", agentKey, "call", callID, "err", err)
			return ""
		}
		return tok
	}
}

// identityClaims is what the token of a call by c says, for audience aud
// (all but the token's id and lifetime).
func identityClaims(c agentproto.Caller, aud string) identity.Claims {
	claims := identity.Claims{
		Subject:  "key:" + c.KeyID,
		Project:  c.Project,
		Scope:    strings.Join(c.Scopes, " "),
		Audience: aud,
	}
	if c.Person != nil {
		claims.Subject, claims.Email, claims.Name = c.Person.ID, c.Person.Email, c.Person.Name
	}
	if c.App != nil {
		claims.ClientID = c.App.ID
	}
	return claims
}
