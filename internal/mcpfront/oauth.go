package mcpfront

import (
	"context"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/oauth"
	"github.com/spacefix/spacefix/internal/store"
)

// What a client reads when its OAuth token cannot do something.
const (
	msgBadOAuthToken     = "The OAuth access token is unknown, expired or revoked, or was issued for another URL. Sign in again (your MCP client does this when it sees this 401)."
	msgInsufficientScope = "This tool changes things, and the OAuth token may only read (scope mcp:read). Sign in again and allow read and write."
)

// verifyOAuth checks an OAuth access token. The key it returns stands for
// the token's grant: a client key of the grant's id, read-only without
// mcp:write, so that one policy (access.For) serves keys and tokens.
func (f *Front) verifyOAuth(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
	g, err := f.oauth.Verify(ctx, token, f.oauth.Resource(r))
	if errors.Is(err, oauth.ErrInvalidToken) {
		return nil, keyError(msgBadOAuthToken)
	}
	if err != nil {
		f.log.Error("verify OAuth token", "err", err)
		return nil, errors.New("the gateway could not check the token; try again")
	}
	if err := checkBinding(r, g); err != nil {
		return nil, err
	}
	k := store.Key{ID: g.ID, ProjectID: g.ProjectID, Kind: store.KindClient, Name: g.Client, ReadOnly: !g.Write, OAuth: true}
	scopes := []string{oauth.ScopeRead}
	if g.Write {
		scopes = append(scopes, oauth.ScopeWrite)
	}
	return pipeline.TokenInfo(k, scopes), nil
}

// challenge makes every 401 of the endpoint say where to get a token
// (RFC 9728 section 5.1), which starts an OAuth client's sign-in.
func (f *Front) challenge(next http.Handler) http.Handler {
	if f.oauth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&challengeWriter{ResponseWriter: w, f: f, r: r}, r)
	})
}

// challengeWriter adds the WWW-Authenticate challenge to a 401. It wraps
// the response only while the token is checked: dispatch unwraps it.
type challengeWriter struct {
	http.ResponseWriter
	f *Front
	r *http.Request
}

func (c *challengeWriter) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		c.Header().Set("WWW-Authenticate", c.f.oauth.Challenge(c.r))
		c.Header().Add("WWW-Authenticate", c.f.oauth.DPoPChallenge(c.r, nil))
	}
	c.ResponseWriter.WriteHeader(code)
}

// needsWrite reports whether a request of a read-only OAuth token is a
// tools/call of a tool the token would reach with mcp:write: such a call
// gets 403 insufficient_scope, so the client can ask for more, instead of
// "not found".
func (f *Front) needsWrite(ctx context.Context, req *wire.Request, k store.Key) bool {
	name := req.ToolName()
	if name == "" {
		return false
	}
	t := f.reg.Snapshot(k.ProjectID).Tools[name]
	if t == nil {
		return false
	}
	c := f.controls.Get(ctx, k.ProjectID)
	writer := k
	writer.ReadOnly = false
	return !access.For(k, c).Permits(t) && access.For(writer, c).Permits(t)
}
