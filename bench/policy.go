package bench

import (
	"encoding/json"
	"fmt"
)

// SideGatewayPolicy names the gateway target whose project has the policy
// [FiftyRules]; its goroutines carry the pprof label side=gateway.
const SideGatewayPolicy = "gateway-50-rules"

// FiftyRules is a policy of 50 rules that every call of echo evaluates and
// none decides: 40 on call, reading the arguments and the caller, and 10
// on result, reading the result's text. The worst case for a policy that
// lets a call through: no rule stops the search early.
func FiftyRules() json.RawMessage {
	type rule struct {
		Name   string   `json:"name"`
		On     string   `json:"on"`
		Tools  []string `json:"tools"`
		When   string   `json:"when"`
		Effect string   `json:"effect"`
		Redact []string `json:"redact,omitempty"`
	}
	var rules []rule
	for i := range 40 {
		rules = append(rules, rule{Name: fmt.Sprintf("call-%d", i), On: "call", Tools: []string{"ec*"},
			When: fmt.Sprintf(`args.text == "never-%d" && caller.role != "owner"`, i), Effect: "deny"})
	}
	for i := range 10 {
		rules = append(rules, rule{Name: fmt.Sprintf("result-%d", i), On: "result", Tools: []string{"echo"},
			When: fmt.Sprintf(`result.text.contains("never-%d")`, i), Effect: "redact", Redact: []string{"never"}})
	}
	b, err := json.Marshal(map[string]any{"rules": rules})
	if err != nil {
		panic(err)
	}
	return b
}
