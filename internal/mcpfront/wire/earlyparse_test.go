package wire

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
		{"a member twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"id":2}`, false, false, "", ""},
		{"a name twice", call("1", `"name":"u","name":"t"`), false, false, "", ""},
		{"a key with an escape", `{"jsonrpc":"2.0","id":1,"method":"tools/call","para\u006ds":{"name":"t"}}`, false, false, "", ""},
		{"whitespace everywhere", "{ \"jsonrpc\" : \"2.0\" ,\n\t\"id\" : 3 , \"method\":\"tools/call\",\"params\":{ \"name\" : \"t\" , \"arguments\" : { \"a\" : [ 1 , \"}\" ] } } }", false, true, "3", `{ "a" : [ 1 , "}" ] }`},
		{"a name with escapes", call("1", `"name":"\u0074"`), false, true, "1", ""},
		{"strings with braces and escapes around", call(`"x"`, `"arguments":{"s":"\"}{[","t":"\\"},"name":"t","_meta":{"k":"}\""}`), false, true, `"x"`, `{"s":"\"}{[","t":"\\"}`},
		{"empty", ``, false, false, "", ""},
	}
	for _, tt := range tests {
		// A member twice, or a key with an escape: the reference reads
		// them as encoding/json does; parseEarly leaves them to go-sdk.
		dup := map[string]bool{"a member twice": true, "a name twice": true, "a key with an escape": true}[tt.name]
		if _, ok := parseEarlyReference([]byte(tt.body), tt.modern); ok != tt.ok && !dup {
			t.Errorf("%s: the reference parser says %v, want %v", tt.name, ok, tt.ok)
		}
		c, ok := ParseCall(Decode([]byte(tt.body)), tt.modern)
		if ok != tt.ok {
			t.Errorf("%s: ok = %v, want %v", tt.name, ok, tt.ok)
			continue
		}
		if ok && (string(c.ID) != tt.id || string(c.Args) != tt.args || c.Name != "t") {
			t.Errorf("%s: id %s, args %s, name %q; want %s, %s, t", tt.name, c.ID, c.Args, c.Name, tt.id, tt.args)
		}
	}
}

// parseEarlyReference is the plain reading parseEarly must agree with:
// every member decoded with encoding/json into maps.
func parseEarlyReference(body []byte, modern bool) (Call, bool) {
	var msg map[string]json.RawMessage
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &msg) != nil || len(msg) != 4 {
		return Call{}, false
	}
	if string(msg["jsonrpc"]) != `"2.0"` || string(msg["method"]) != `"tools/call"` || !PlainID(msg["id"]) {
		return Call{}, false
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil {
		return Call{}, false
	}
	call := Call{ID: msg["id"], Args: params["arguments"]}
	for k := range params {
		if k != "name" && k != "arguments" && k != "_meta" {
			return Call{}, false
		}
	}
	if (len(call.Args) > 0 && call.Args[0] != '{' && string(call.Args) != "null") || json.Unmarshal(params["name"], &call.Name) != nil || call.Name == "" {
		return Call{}, false
	}
	raw, hasMeta := params["_meta"]
	var meta map[string]json.RawMessage
	if hasMeta && (len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &meta) != nil) {
		return Call{}, false
	}
	call.Meta = raw
	if l, ok := meta[metaLogLevel]; ok {
		json.Unmarshal(l, &call.LogLevel)
	}
	version, hasVersion := meta[metaProtocolVersion]
	if !modern {
		return call, !hasVersion
	}
	return call, hasMeta && modernMeta(version, meta[mcp.MetaKeyClientCapabilities], meta[mcp.MetaKeyClientInfo])
}

// FuzzParseEarly: parseEarly never panics on any body, and whatever it
// takes, the plain reading takes too, with the same id, name, arguments,
// _meta and log level.
func FuzzParseEarly(f *testing.F) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_order","arguments":{"id":"1042"},` + meta + `}}`,
		`{"jsonrpc":"2.0","id":"a b","method":"tools/call","params":{"name":"t","arguments":{"x":[1,{"y":"}"}]},"_meta":{"progressToken":3}}}`,
		`{"method":"tools/call","params":{"name":"test_simple_text"},"jsonrpc":"2.0","id":1}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":null,"_meta":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\u00e9","requestState":"s"}}`,
		`{ "jsonrpc" : "2.0" , "id" : -4 , "method" : "tools/call" , "params" : { "name" : "t" } }`,
		`[{"jsonrpc":"2.0"}]`, `{}`, `{"a":}`, ``,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, modern bool) {
		got, ok := ParseCall(Decode(body), modern)
		if !ok {
			return
		}
		want, wok := parseEarlyReference(body, modern)
		if !wok {
			t.Fatalf("parseEarly took %q (modern %v), the plain reading does not", body, modern)
		}
		if !bytes.Equal(got.ID, want.ID) || got.Name != want.Name || !bytes.Equal(got.Args, want.Args) ||
			!bytes.Equal(got.Meta, want.Meta) || got.LogLevel != want.LogLevel {
			t.Fatalf("parseEarly(%q) = %+v; the plain reading %+v", body, got, want)
		}
	})
}

// BenchmarkParseEarly: a go-sdk client's 2026-07-28 tools/call, read by
// parseEarly and by the plain encoding/json reading it replaced.
func BenchmarkParseEarly(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"spacefix-bench","version":"dev"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"echo","arguments":{"text":"hello"}}}`)
	for _, p := range []struct {
		name  string
		parse func([]byte, bool) (Call, bool)
	}{{"in-place", func(b []byte, modern bool) (Call, bool) { return ParseCall(Decode(b), modern) }}, {"maps", parseEarlyReference}} {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := p.parse(body, true); !ok {
					b.Fatal("not taken")
				}
			}
		})
	}
}
