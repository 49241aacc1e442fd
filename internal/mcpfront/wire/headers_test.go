package wire

import (
	"net/http"
	"testing"
)

func TestEarlyHeaders(t *testing.T) {
	h := func(kv ...string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				r.Header.Del(kv[i])
			} else {
				r.Header.Set(kv[i], kv[i+1])
			}
		}
		return r
	}
	tests := []struct {
		name   string
		r      *http.Request
		modern bool
		ok     bool
	}{
		{"modern", h("Mcp-Protocol-Version", "2026-07-28"), true, true},
		{"modern, charset and wildcards", h("Mcp-Protocol-Version", "2026-07-28", "Content-Type", "application/json; charset=utf-8", "Accept", "*/*"), true, true},
		{"modern, a later version", h("Mcp-Protocol-Version", "2027-01-01"), true, false},
		{"modern, no version header", h(), true, false},
		{"session, no version header", h(), false, true},
		{"session, 2025-06-18", h("Mcp-Protocol-Version", "2025-06-18"), false, true},
		{"session, an unknown version", h("Mcp-Protocol-Version", "2025-05-01"), false, false},
		{"session, 2026-07-28", h("Mcp-Protocol-Version", "2026-07-28"), false, false},
		{"JSON only", h("Accept", "application/json"), false, false},
		{"SSE only", h("Accept", "text/event-stream"), false, false},
		{"not JSON", h("Content-Type", "text/plain"), false, false},
		{"a stream to resume", h("Last-Event-ID", "x"), false, false},
	}
	for _, tt := range tests {
		if got := PlainHeaders(tt.r, tt.modern); got != tt.ok {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.ok)
		}
	}
}
