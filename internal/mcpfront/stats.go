package mcpfront

import "github.com/spacefix/spacefix/internal/mcpfront/wire"

// SessionCounts returns how many MCP sessions are open, by era: the
// protocol version a 2025 session negotiated, or 2026-07-28 for stateless
// requests being served (each holds a go-sdk session of its own while it
// runs, or is a tool call answered before go-sdk). Metrics call it at
// scrape time.
func (f *Front) SessionCounts() map[string]int {
	f.mu.Lock()
	vs := make([]*view, 0, len(f.views))
	for _, v := range f.views {
		vs = append(vs, v)
	}
	f.mu.Unlock()
	out := map[string]int{}
	for _, v := range vs {
		for s := range v.server.Sessions() {
			era := wire.ModernVersion
			if p := s.InitializeParams(); p != nil && p.ProtocolVersion != "" && p.ProtocolVersion < wire.ModernVersion {
				era = p.ProtocolVersion
			}
			out[era]++
		}
	}
	if n := f.earlyNow.Load(); n > 0 {
		out[wire.ModernVersion] += int(n)
	}
	return out
}
