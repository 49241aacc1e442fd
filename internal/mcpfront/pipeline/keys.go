package pipeline

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/textfmt"
)

// Who calls, and the request a call came in: what the endpoint's entries
// hand the pipeline in the key's token info.

const tokenKey = "spacefix.key"

// TokenInfo is the token info of a request made with client key k: the
// key, for [KeyFrom], and the request value's place (wire.Read).
func TokenInfo(k store.Key, scopes []string) *auth.TokenInfo {
	return &auth.TokenInfo{UserID: k.ID, Scopes: scopes, Extra: map[string]any{tokenKey: k}}
}

// KeyFrom returns the client key a request was made with.
func KeyFrom(ti *auth.TokenInfo) (store.Key, bool) {
	if ti == nil {
		return store.Key{}, false
	}
	k, ok := ti.Extra[tokenKey].(store.Key)
	return k, ok
}

// TokenOf returns the token info of a request go-sdk serves, or nil.
func TokenOf(extra *mcp.RequestExtra) *auth.TokenInfo {
	if extra == nil {
		return nil
	}
	return extra.TokenInfo
}

// HangUp returns the context of the HTTP request a call came in, which
// ends when its client hangs up; nil if there is none.
func HangUp(token *auth.TokenInfo) context.Context {
	if req := wire.Of(token); req != nil {
		return req.Ctx
	}
	return nil
}

// TrimName keeps a name printable in messages: valid UTF-8, and its first
// 100 characters with "…" when longer.
func TrimName(s string) string {
	s = strings.ToValidUTF8(s, "?")
	if c := textfmt.Cut(s, 100); c != s {
		s = c + "…"
	}
	return s
}
