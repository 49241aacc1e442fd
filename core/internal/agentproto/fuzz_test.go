package agentproto

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzAgentMessage decodes arbitrary WebSocket frames as the gateway reads
// an agent's and an SDK reads the gateway's: the envelope, then the payload
// of each kind of result and the welcome. Decoding must never panic, and
// what decodes must survive a round trip unchanged (the gateway re-encodes
// messages it passes on).
func FuzzAgentMessage(f *testing.F) {
	for _, s := range []string{
		`{"type":"result","id":"c-1","result":{"content":[{"type":"text","text":"{\"id\":\"1042\"}"}],"structuredContent":{"id":"1042"},"isError":false}}`,
		`{"type":"result","id":"c-2","result":{"text":"[1,2]","mimeType":"application/json"}}`,
		`{"type":"result","id":"c-3","result":{"description":"d","messages":[{"role":"user","content":{"type":"text","text":"hi"}}]}}`,
		`{"type":"result","id":"c-4","result":{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}}`,
		`{"type":"error","id":"c-1","message":"no order with id 1042: ask the user to confirm the id"}`,
		`{"type":"progress","id":"c-1","message":"fetched 120 of 400 rows"}`,
		`{"type":"set_enabled","name":"search_orders","enabled":false}`,
		`{"type":"drain"}`,
		`{"type":"confirm","id":"c-1","input":"i-1","message":"Cancel order 1042?"}`,
		`{"type":"confirmed","id":"c-1","input":"i-1","accepted":true}`,
		`{"type":"call","id":"c-1","kind":"tool","name":"search_orders","args":{"customer":"ada"},"deadline":1764672000123,"caller":{"keyId":"key_1","keyName":"claude"}}`,
		`{"type":"cancel","id":"c-1","reason":"timeout"}`,
		`{"type":"welcome","welcome":{"protocol":1,"replica":"r-1","project":"p","agent":"key_1","callWaitMs":60000,"heartbeatMs":5000}}`,
		`{"type":"goodbye","message":"the gateway is restarting"}`,
		`{"type":"result","id":"c-1","result":null}`,
		`{"type":"result","result":{"content":[null,{"type":"text"}]}}`,
		`{"type":7}`, `"result"`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		var m Message
		if json.Unmarshal(frame, &m) != nil {
			return
		}
		roundTrip(t, &m)
		if m.Welcome != nil {
			roundTrip(t, m.Welcome)
		}
		if len(m.Result) > 0 {
			if r := new(ToolResult); json.Unmarshal(m.Result, r) == nil {
				roundTrip(t, r)
			}
			if r := new(ResourceResult); json.Unmarshal(m.Result, r) == nil {
				roundTrip(t, r)
			}
			if r := new(PromptResult); json.Unmarshal(m.Result, r) == nil {
				roundTrip(t, r)
			}
		}
	})
}

// roundTrip checks that v, decoded from JSON, encodes and decodes back to
// an equal value.
func roundTrip[T any](t *testing.T, v *T) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("Marshal(%+v): %v", v, err)
	}
	again := new(T)
	if err := json.Unmarshal(b, again); err != nil {
		t.Fatalf("Unmarshal(Marshal(%+v)): %v\n%s", v, err, b)
	}
	b2, _ := json.Marshal(again)
	if !reflect.DeepEqual(b, b2) {
		t.Errorf("round trip changed %T:\n%s\n%s", v, b, b2)
	}
}
