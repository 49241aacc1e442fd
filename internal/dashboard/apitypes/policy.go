package apitypes

import (
	"encoding/json"
	"time"
)

// PolicyVersions is the answer of GET …/policy/versions: the saved
// versions of a project's policy, newest first.
type PolicyVersions struct {
	Versions []PolicyVersion `json:"versions"`
}

// PolicyVersion is one saved version: its number, when and by whom.
type PolicyVersion struct {
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updatedAt"`
	UpdatedBy string    `json:"updatedBy"`
}

// PolicyError is why a policy document was refused (PUT …/policy answers
// it with a 400; POST …/policy/check lists them). For a rule, Rule is its
// name, Index its position from 0, Field the part at fault and, for an
// expression, Line and Column its position in "when" (from 1; 0 when not
// about the expression). For an interceptor entry, Index is -1 and
// Interceptor its position from 0. For the document as a whole (not JSON,
// too many rules) Index is -1 and the rest empty.
type PolicyError struct {
	Error       string `json:"error"`
	Rule        string `json:"rule"`
	Index       int    `json:"index"`
	Field       string `json:"field"`
	Line        int    `json:"line"`
	Column      int    `json:"column"`
	Interceptor *int   `json:"interceptor,omitempty"`
}

// PolicyCheck is the answer of POST …/policy/check: OK, or every error
// found, rule by rule.
type PolicyCheck struct {
	OK     bool          `json:"ok"`
	Errors []PolicyError `json:"errors,omitempty"`
}

// PolicyTest is the body of POST …/policy/test: what the policy would
// decide for this caller calling this tool with these arguments. AsKey (a
// client key's id) or AsPerson (a member's e-mail) names the caller;
// with neither, the signed-in person. Document, when given, is a draft
// tried instead of the saved policy. Result, when given, is a sample of
// the tool's result (an MCP CallToolResult: content, structuredContent,
// isError) for the rules on result.
type PolicyTest struct {
	Tool     string          `json:"tool"`
	Args     json.RawMessage `json:"args,omitempty"`
	AsKey    string          `json:"asKey,omitempty"`
	AsPerson string          `json:"asPerson,omitempty"`
	Document json.RawMessage `json:"document,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
}

// PolicyTestResult is the answer of POST …/policy/test: what the caller's
// tools/list and a tools/call would meet, and, when the test gave a
// sample result, what the rules on result make of it.
type PolicyTestResult struct {
	List   PolicyDecision      `json:"list"`
	Call   PolicyDecision      `json:"call"`
	Result *PolicyResultShaped `json:"result,omitempty"`
}

// PolicyResultShaped is what the rules on result decide for a sample
// result (Effect "none", "allow", "deny" or "redact") and Shaped, the
// result as the caller would get it: the sample itself, redacted, or the
// tool error of a deny. Interceptors do not run.
type PolicyResultShaped struct {
	PolicyDecision
	Shaped json.RawMessage `json:"shaped"`
}

// PolicyDecision is what the policy decides at one point. Effect is
// "none" when no rule decided; on list "allow" or "hide", on call
// "allow", "deny" or "confirm". Message is the refusal or the question
// (templated); Failed says the deciding rule could not be evaluated (the
// call is refused); Audit is what audit-mode rules would have done.
type PolicyDecision struct {
	Effect  string      `json:"effect"`
	Rule    string      `json:"rule"`
	Message string      `json:"message,omitempty"`
	Failed  bool        `json:"failed,omitempty"`
	Audit   []PolicyHit `json:"audit"`
}

// PolicyHit is what one audit-mode rule would have done.
type PolicyHit struct {
	Rule   string `json:"rule"`
	Effect string `json:"effect"`
	Failed bool   `json:"failed"`
}
