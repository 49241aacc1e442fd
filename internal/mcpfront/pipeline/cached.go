package pipeline

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
)

// cachedResult is a cached tool result in the forms hits need: decoded,
// for hits go-sdk serves, and encoded as each era's JSON-RPC result, for
// early answers.
type cachedResult struct {
	res    *mcp.CallToolResult
	legacy []byte // 2025-06-18 and 2025-11-25
	modern []byte // 2026-07-28: serverInfo in _meta, resultType "complete"
}

// Size is what the cache counts for the decoded and encoded forms.
func (c *cachedResult) Size() int64 { return int64(2*len(c.legacy) + len(c.modern)) }

// newCachedResult encodes out, a successful result with no input requests,
// for both eras.
func (f *Pipeline) newCachedResult(out *mcp.CallToolResult) *cachedResult {
	legacy, err1 := wire.EncodeResult(out, false, f.impl)
	modern, err2 := wire.EncodeResult(out, true, f.impl)
	if err1 != nil || err2 != nil {
		return &cachedResult{res: out}
	}
	return &cachedResult{res: out, legacy: legacy, modern: modern}
}
