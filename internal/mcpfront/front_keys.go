package mcpfront

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	sfauth "github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/oauth"
	"github.com/spacefix/spacefix/internal/store"
)

// keyError is the 401 text a client reads; it unwraps to auth.ErrInvalidToken
// so go-sdk answers 401.
type keyError string

func (e keyError) Error() string { return string(e) }
func (e keyError) Unwrap() error { return auth.ErrInvalidToken }

func (f *Front) verifyToken(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
	if f.oauth != nil && oauth.IsAccessToken(token) {
		return f.verifyOAuth(ctx, token, r)
	}
	k, err := f.verifier.Verify(ctx, token)
	if errors.Is(err, sfauth.ErrUnknownKey) {
		return nil, keyError("Unknown or revoked client key. Create one with: spacefix keys create --kind client")
	}
	if err != nil {
		f.log.Error("verify client key", "err", err)
		return nil, fmt.Errorf("the gateway could not check the key; try again")
	}
	if k.Kind != store.KindClient {
		return nil, keyError("This is an agent key. MCP clients need a client key: spacefix keys create --kind client")
	}
	return pipeline.TokenInfo(k, nil), nil
}

// getServer returns the server of the calling key's view. go-sdk calls it
// for every request, so it must be cheap.
func (f *Front) getServer(r *http.Request) *mcp.Server {
	k, ok := pipeline.KeyFrom(auth.TokenInfoFromContext(r.Context()))
	if !ok {
		return nil
	}
	return f.viewFor(k).server
}
