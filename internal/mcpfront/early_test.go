package mcpfront

import (
	"net/http"
	"testing"
)

func TestParseEarly(t *testing.T) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	call := func(id, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{` + params + `}}`
	}
	tests := []struct {
		name   string
		body   string
		modern bool
		ok     bool
		id     string
		args   string
	}{
		{"modern", call("7", `"name":"t","arguments":{"a":1},`+meta), true, true, "7", `{"a":1}`},
		{"modern, client info", call(`"x y"`, `"name":"t",`+`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}}}`), true, true, `"x y"`, ""},
		{"modern without _meta", call("1", `"name":"t","arguments":{}`), true, false, "", ""},
		{"modern, another version", call("1", `"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}`), true, false, "", ""},
		{"modern, capabilities not an object", call("1", `"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]}`), true, false, "", ""},
		{"modern, capabilities of the wrong shape", call("1", `"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":5}}`), true, false, "", ""},
		{"modern, client info of the wrong shape", call("1", `"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":"me","io.modelcontextprotocol/clientCapabilities":{}}`), true, false, "", ""},
		{"session", call("1", `"name":"t","arguments":{"a":[1,2]}`), false, true, "1", `{"a":[1,2]}`},
		{"session, null arguments", call("-3", `"name":"t","arguments":null`), false, true, "-3", "null"},
		{"session, progress token", call("1", `"name":"t","_meta":{"progressToken":"p"}`), false, true, "1", ""},
		{"session claiming 2026-07-28", call("1", `"name":"t",`+meta), false, false, "", ""},
		{"session, _meta not an object", call("1", `"name":"t","_meta":5`), false, false, "", ""},
		{"arguments not an object", call("1", `"name":"t","arguments":[1]`), false, false, "", ""},
		{"no name", call("1", `"arguments":{}`), false, false, "", ""},
		{"a name that is not a string", call("1", `"name":5`), false, false, "", ""},
		{"a retry with requestState", call("1", `"name":"t","requestState":"s"`), false, false, "", ""},
		{"unknown params", call("1", `"name":"t","task":{}`), false, false, "", ""},
		{"another method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"t"}}`, false, false, "", ""},
		{"a notification", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"},"x":1}`, false, false, "", ""},
		{"another JSON-RPC version", `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"t"}}`, false, false, "", ""},
		{"unknown members", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"x":1}`, false, false, "", ""},
		{"a batch", `[` + call("1", `"name":"t"`) + `]`, false, false, "", ""},
		{"an id with an escape", call(`"a\u0062"`, `"name":"t"`), false, false, "", ""},
		{"a fractional id", call("1.5", `"name":"t"`), false, false, "", ""},
		{"an id with a leading zero", call("01", `"name":"t"`), false, false, "", ""},
		{"a huge id", call("12345678901234567", `"name":"t"`), false, false, "", ""},
		{"a null id", call("null", `"name":"t"`), false, false, "", ""},
		{"an object id", call("{}", `"name":"t"`), false, false, "", ""},
		{"not JSON", `{"jsonrpc":"2.0",`, false, false, "", ""},
		{"empty", ``, false, false, "", ""},
	}
	for _, tt := range tests {
		c, ok := parseEarly([]byte(tt.body), tt.modern)
		if ok != tt.ok {
			t.Errorf("%s: ok = %v, want %v", tt.name, ok, tt.ok)
			continue
		}
		if ok && (string(c.id) != tt.id || string(c.args) != tt.args || c.name != "t") {
			t.Errorf("%s: id %s, args %s, name %q; want %s, %s, t", tt.name, c.id, c.args, c.name, tt.id, tt.args)
		}
	}
}

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
		if got := earlyHeaders(tt.r, tt.modern); got != tt.ok {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.ok)
		}
	}
}
