package wire

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EraFields removes what protocol 2026-07-28 added to list results, ttlMs
// and cacheScope, from the results of older sessions: go-sdk writes them at
// every version, and a 2025-era schema has no such fields.
// [mcp.ServerOptions.SetCacheable] cannot drop them (ttlMs is always
// written), so the results of older sessions are wrapped in types that
// marshal without them.
func EraFields(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || res == nil || modernSession(req) {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.ListToolsResult:
			return LegacyTools{r}, nil
		case *mcp.ListResourcesResult:
			return LegacyResources{r}, nil
		case *mcp.ListResourceTemplatesResult:
			return LegacyTemplates{r}, nil
		case *mcp.ListPromptsResult:
			return LegacyPrompts{r}, nil
		case *mcp.ReadResourceResult:
			return LegacyRead{r}, nil
		}
		return res, nil
	}
}

// modernSession reports whether req speaks 2026-07-28 or later. A request
// of the new protocol carries its version, which go-sdk keeps as the
// session's initialize parameters.
func modernSession(req mcp.Request) bool {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok {
		return true
	}
	ip := ss.InitializeParams()
	return ip == nil || ip.ProtocolVersion >= ModernVersion
}

type (
	LegacyTools     struct{ *mcp.ListToolsResult }
	LegacyResources struct {
		*mcp.ListResourcesResult
	}
	LegacyTemplates struct {
		*mcp.ListResourceTemplatesResult
	}
	LegacyPrompts struct{ *mcp.ListPromptsResult }
	LegacyRead    struct{ *mcp.ReadResourceResult }
)

func (r LegacyTools) MarshalJSON() ([]byte, error) { return withoutCacheFields(r.ListToolsResult) }
func (r LegacyResources) MarshalJSON() ([]byte, error) {
	return withoutCacheFields(r.ListResourcesResult)
}
func (r LegacyTemplates) MarshalJSON() ([]byte, error) {
	return withoutCacheFields(r.ListResourceTemplatesResult)
}
func (r LegacyPrompts) MarshalJSON() ([]byte, error) { return withoutCacheFields(r.ListPromptsResult) }
func (r LegacyRead) MarshalJSON() ([]byte, error)    { return withoutCacheFields(r.ReadResourceResult) }

func withoutCacheFields(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "ttlMs")
	delete(m, "cacheScope")
	return json.Marshal(m)
}
