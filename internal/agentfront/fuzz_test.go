package agentfront

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// FuzzRegistration decodes arbitrary registration bodies as the gateway's
// register handler does and checks them against two sets of limits. A body
// comes from whoever holds an agent key: it must never panic, and a
// registration validate accepts must keep the rules it promises (valid,
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
		reg := new(agentproto.Registration)
		if json.Unmarshal(body, reg) != nil {
			return
		}
		for _, lim := range []Limits{DefaultLimits(), small} {
			msg := refusal(validate(reg, lim))
			if msg == "" {
				checkAccepted(t, reg, lim)
			} else if !strings.HasSuffix(msg, ".") {
				t.Errorf("Validate(%s) = %q: a refusal is a sentence ending with a period", body, msg)
			}
			// What the gateway keeps and hands on must judge the same,
			// but for sizes: encoding a raw schema again escapes <, > and
			// & (testdata/fuzz/FuzzRegistration/e0dfd8778be2390d).
			lim.MaxSchema = 1 << 30
			msg = refusal(validate(reg, lim))
			b, err := json.Marshal(reg)
			if err != nil {
				t.Fatalf("Marshal of a decoded registration: %v", err)
			}
			again := new(agentproto.Registration)
			if err := json.Unmarshal(b, again); err != nil {
				t.Fatalf("Unmarshal(Marshal(reg)): %v\n%s", err, b)
			}
			if got := refusal(validate(again, lim)); got != msg {
				t.Errorf("Validate after a round trip = %q, first %q\nbody %s", got, msg, body)
			}
		}
	})
}

// checkAccepted checks what validate promises of a registration it accepts.
func checkAccepted(t *testing.T, reg *agentproto.Registration, lim Limits) {
	t.Helper()
	if reg.Protocol != agentproto.Version || len(reg.Tools) > lim.MaxTools || len(reg.Resources) > lim.MaxResources {
		t.Errorf("accepted protocol %d, %d tools, %d resources with limits %+v", reg.Protocol, len(reg.Tools), len(reg.Resources), lim)
	}
	seen := map[string]bool{}
	for _, tl := range reg.Tools {
		if agentproto.CheckToolName("tool", tl.Name) != nil || seen[tl.Name] || len(tl.InputSchema) > lim.MaxSchema ||
			tl.TimeoutMs < 0 || tl.TimeoutMs > agentproto.MaxToolTimeoutMs || !isObjectSchema(tl.InputSchema) {
			t.Errorf("accepted tool %+v", tl)
		}
		seen[tl.Name] = true
	}
	for _, p := range reg.Prompts {
		if agentproto.CheckToolName("prompt", p.Name) != nil {
			t.Errorf("accepted prompt name %q", p.Name)
		}
	}
}

// refusal is the message of a *RegistrationError, "" for nil; any other
// error is reported as a programming error.
func refusal(err error) string {
	if err == nil {
		return ""
	}
	var re *RegistrationError
	if !errors.As(err, &re) {
		return "not a *RegistrationError: " + err.Error()
	}
	return re.Message
}
