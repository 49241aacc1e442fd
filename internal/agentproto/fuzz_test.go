package agentproto

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzRegistration decodes arbitrary registration bodies as the gateway's
// register handler does and checks them against two sets of limits. A body
// comes from whoever holds an agent key: it must never panic, and a
// registration Validate accepts must keep the rules it promises (valid,
// distinct names within the limits).
func FuzzRegistration(f *testing.F) {
	for _, s := range []string{
		`{"protocol":1,"sdk":"go/0.1.0","name":"orders","tools":[{"name":"search_orders","description":"List orders.",` +
			`"inputSchema":{"type":"object","properties":{"customer":{"type":"string"}},"required":["customer"]},` +
			`"annotations":{"readOnlyHint":true},"timeoutMs":30000}]}`,
		`{"protocol":1,"name":"crm","namespace":true,"instance":"eu-1","version":"1.2.3","displayName":"CRM","author":"Ada",` +
			`"tools":[{"name":"a","description":"d","inputSchema":{"type":"object"},"disabled":true}],` +
			`"resources":[{"uri":"orders://open","name":"Open orders","mimeType":"application/json"}],` +
			`"prompts":[{"name":"summary","arguments":[{"name":"id","required":true}]}]}`,
		`{"protocol":1,"tools":[]}`,
		`{"protocol":2,"tools":[]}`,
		`{"protocol":1,"tools":[{"name":"a","inputSchema":{"type":"object"}},{"name":"a","inputSchema":{"type":"object"}}]}`,
		`{"protocol":1,"tools":[{"name":"spacefix_x","inputSchema":{"type":"object"}}]}`,
		`{"protocol":1,"tools":[{"name":"a__b","inputSchema":{"type":"object"}}]}`,
		`{"protocol":1,"tools":[{"name":"a","inputSchema":{"type":["object","null"]}}]}`,
		`{"protocol":1,"tools":[{"name":"a","inputSchema":[]}]}`,
		`{"protocol":1,"tools":[{"name":"a","inputSchema":{"type":"object"},"timeoutMs":-1}]}`,
		`{"protocol":1,"resources":[{"uri":"no scheme","name":"x"}]}`,
		`{"protocol":1,"resources":[{"uri":"a://b"},{"uri":"a://b","name":"x"}]}`,
		`{"protocol":1,"namespace":true}`,
		`{"protocol":1,"instance":"` + strings.Repeat("i", 65) + `"}`,
		`{"protocol":1.5}`, `null`, `[]`, `{"tools":null}`, `{"protocol":1,"tools":[null]}`,
	} {
		f.Add([]byte(s))
	}
	small := Limits{MaxTools: 1, MaxSchema: 40, MaxResources: 1, MaxRegister: 1 << 10}
	f.Fuzz(func(t *testing.T, body []byte) {
		reg := new(Registration)
		if json.Unmarshal(body, reg) != nil {
			return
		}
		for _, lim := range []Limits{DefaultLimits(), small} {
			msg := reg.Validate(lim)
			if msg == "" {
				checkAccepted(t, reg, lim)
			} else if !strings.HasSuffix(msg, ".") {
				t.Errorf("Validate(%s) = %q: a refusal is a sentence ending with a period", body, msg)
			}
			// What the gateway keeps and hands on must judge the same,
			// but for sizes: encoding a raw schema again escapes <, > and
			// & (testdata/fuzz/FuzzRegistration/e0dfd8778be2390d).
			lim.MaxSchema = 1 << 30
			msg = reg.Validate(lim)
			b, err := json.Marshal(reg)
			if err != nil {
				t.Fatalf("Marshal of a decoded registration: %v", err)
			}
			again := new(Registration)
			if err := json.Unmarshal(b, again); err != nil {
				t.Fatalf("Unmarshal(Marshal(reg)): %v\n%s", err, b)
			}
			if got := again.Validate(lim); got != msg {
				t.Errorf("Validate after a round trip = %q, first %q\nbody %s", got, msg, body)
			}
		}
	})
}

// checkAccepted checks what Validate promises of a registration it accepts.
func checkAccepted(t *testing.T, reg *Registration, lim Limits) {
	t.Helper()
	if reg.Protocol != Version || len(reg.Tools) > lim.MaxTools || len(reg.Resources) > lim.MaxResources {
		t.Errorf("accepted protocol %d, %d tools, %d resources with limits %+v", reg.Protocol, len(reg.Tools), len(reg.Resources), lim)
	}
	seen := map[string]bool{}
	for _, tl := range reg.Tools {
		if CheckToolName("tool", tl.Name) != "" || seen[tl.Name] || len(tl.InputSchema) > lim.MaxSchema ||
			tl.TimeoutMs < 0 || tl.TimeoutMs > MaxToolTimeoutMs || !isObjectSchema(tl.InputSchema) {
			t.Errorf("accepted tool %+v", tl)
		}
		seen[tl.Name] = true
	}
	for _, p := range reg.Prompts {
		if CheckToolName("prompt", p.Name) != "" {
			t.Errorf("accepted prompt name %q", p.Name)
		}
	}
}

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
