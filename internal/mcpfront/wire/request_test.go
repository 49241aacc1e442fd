package wire

import "testing"

// TestDecodeRequest: the one reading of a POST's body gives every later
// step what it routes on, as go-sdk will read it (the last of a repeated
// member, escaped keys decoded), and says when the early path must leave a
// request to go-sdk (not plain).
func TestDecodeRequest(t *testing.T) {
	for _, tt := range []struct {
		body                     string
		id, method, name, args   string
		version, requestID, caps string
		plain, extraTop, extraP  bool
	}{
		{body: `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"capabilities":{"tasks":{}}}}`,
			id: "7", method: "initialize", caps: `{"tasks":{}}`, plain: true, extraP: true},
		{body: `{"method":"tools/call","params":{"name":"add","arguments":{"a":1}},"id":"x"}`,
			id: `"x"`, method: "tools/call", name: `"add"`, args: `{"a":1}`, plain: true},
		{body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			id: "1", method: "tools/call", name: `"a"`, version: `"2026-07-28"`, plain: true},
		{body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12}}`,
			method: "notifications/cancelled", requestID: "12", plain: true, extraP: true},
		// A repeated member: go-sdk reads the last one; not plain.
		{body: `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"b"}}`,
			id: "1", method: "tools/call", name: `"b"`},
		// Escaped keys are decoded, and the request is not plain.
		{body: `{"jsonrpc":"2.0","id":2,"me\u0074hod":"tools/call","params":{"name":"c","arguments":{"big":true}}}`,
			id: "2", method: "tools/call", name: `"c"`, args: `{"big":true}`},
		{body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","extra":1,"params":{"name":"d","requestState":"s"}}`,
			id: "3", method: "tools/call", name: `"d"`, plain: true, extraTop: true, extraP: true},
		{body: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`},
		{body: `not json`},
		{body: ``},
	} {
		req := Decode([]byte(tt.body))
		got := []string{string(req.ID), req.Method, string(req.Name), string(req.Args), string(req.Version), string(req.RequestID), string(req.Capabilities)}
		want := []string{tt.id, tt.method, tt.name, tt.args, tt.version, tt.requestID, tt.caps}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("decodeRequest(%s): member %d = %q, want %q", tt.body, i, got[i], want[i])
			}
		}
		if req.Plain != tt.plain || req.ExtraTop != tt.extraTop || req.ExtraParams != tt.extraP {
			t.Errorf("decodeRequest(%s): plain %v extraTop %v extraParams %v, want %v %v %v", tt.body,
				req.Plain, req.ExtraTop, req.ExtraParams, tt.plain, tt.extraTop, tt.extraP)
		}
		if want := tt.id; want == "" && string(req.CallID()) != "null" || want != "" && string(req.CallID()) != want {
			t.Errorf("decodeRequest(%s).callID() = %s, want %q (or null)", tt.body, req.CallID(), want)
		}
	}
	var none *Request
	if string(none.CallID()) != "null" || none.ToolName() != "" {
		t.Error("a GET (no request) has an id or a tool name")
	}
	if Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"tasks":null}}}`)).DeclaresTasks() {
		t.Error("capabilities.tasks null declares tasks")
	}
	if !Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"tasks":{"requests":{}}}}}`)).DeclaresTasks() {
		t.Error("capabilities.tasks {...} does not declare tasks")
	}
}
