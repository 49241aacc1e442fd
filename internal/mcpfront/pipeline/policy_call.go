package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/interceptors"
	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/store"
)

// What the project's policy (package policy, docs/policy.md) reads of one
// call, and what it did with it. A call's [callPolicy] is built once, at
// the policy point (stage_policy.go), from the same facts the agent's
// [agentproto.Caller] carries; the policy stage, the result's shaping and
// a task's or job's end read it. Nil when the project has no policy.

// callPolicy is one call as the policy sees it, and the words of what it
// did, for the call log (store.Call.Policy).
type callPolicy struct {
	f       *Pipeline
	project int64
	p       *policy.Policy      // nil: interceptors only
	chain   *interceptors.Chain // nil: no interceptors
	in      policy.Input
	ic      *interceptors.InvokeContext
	words   []string
	// who is why the call's person could not be looked up (errWho): the
	// rules cannot read who calls, so the call is refused, and so is the
	// answer of a settled call, rather than judged as an anonymous caller.
	who error
	// pending is the call's log record, held by [Pipeline.toolResult] until
	// the result's rules have run, so that the record says what they did.
	pending *store.Call
}

// PolicyOptions are what the policy point needs from the gateway.
type PolicyOptions struct {
	// HTTPClient dials interceptor servers, under the gateway's egress
	// policy; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Observe counts decisions and interceptor latency (/metrics); nil
	// means not counted.
	Observe PolicyObserver
}

// PolicyObserver counts what the policy did; its methods are called on
// the call path and must be quick and safe for concurrent use.
type PolicyObserver interface {
	// ObserveDecision counts a rule's decision: effect is what the rule
	// did (or would have, mode "audit").
	ObserveDecision(projectID int64, rule, effect, mode string)
	// ObserveInterceptor counts one interceptor's run.
	ObserveInterceptor(projectID int64, interceptor string, d time.Duration, failed bool)
}

// policyFor returns c's policy, building it the first time; nil when the
// project has none on calls (rules on list act in the tool's admission).
func (f *Pipeline) policyFor(ctx context.Context, c *Call) *callPolicy {
	if c.pol != nil || c.controls == nil || c.controls.Policy == nil || !PolicyOnCalls(c.controls) {
		return c.pol
	}
	caller, who := f.Caller(ctx, c.key, nil)
	if who != nil {
		caller = agentproto.Caller{KeyID: c.key.ID, KeyName: c.key.Name, Project: c.key.ProjectName}
	}
	args := c.args
	if args == nil && c.req != nil {
		args = c.req.Args // a resumed call: as the client sent them again
	}
	c.pol = &callPolicy{
		f: f, project: c.key.ProjectID, p: c.controls.Policy,
		chain: f.policy.chain(c.key.ProjectID, c.controls, f.Bridged(c.key.ProjectID)),
		in:    policy.Input{Caller: policyCaller(caller), Tool: c.controls.PolicyTool(c.tool), Args: args},
		ic:    InvokeContext(caller),
		who:   who,
	}
	return c.pol
}

// policyCaller is who calls, as rules see it.
func policyCaller(c agentproto.Caller) policy.Caller {
	pc := policy.Caller{Role: c.Role, KeyID: c.KeyID, KeyName: c.KeyName, Scopes: c.Scopes, Project: c.Project}
	if c.Person != nil {
		pc.PersonID, pc.PersonEmail, pc.PersonName = c.Person.ID, c.Person.Email, c.Person.Name
	}
	if c.App != nil {
		pc.AppID, pc.AppName = c.App.ID, c.App.Name
	}
	return pc
}

// InvokeContext is who calls, as interceptors see it: a person by id, or
// a client key by id.
func InvokeContext(c agentproto.Caller) *interceptors.InvokeContext {
	p := &interceptors.Principal{Type: "service", ID: c.KeyID}
	if c.Person != nil {
		p = &interceptors.Principal{Type: "user", ID: c.Person.ID}
	}
	return &interceptors.InvokeContext{Principal: p}
}

// decide reads the rules at point on and notes the decision and the
// audit-mode hits.
func (pc *callPolicy) decide(on string) policy.Decision {
	d := pc.p.Decide(on, &pc.in)
	for _, h := range d.Audit {
		would := h.Effect
		if h.Failed {
			would = "fail (refuse)"
		}
		pc.words = append(pc.words, fmt.Sprintf("audit: rule %q would %s", h.Rule, would))
		pc.observe(h.Rule, h.Effect, policy.Audit)
	}
	if d.Effect != "" {
		pc.observe(d.Rule, d.Effect, policy.Enforce)
		if d.Effect != policy.Allow {
			pc.note(fmt.Sprintf("%s by rule %q", d.Effect, d.Rule))
		}
	}
	return d
}

// note adds what decided to the call's words, before the audit hits.
func (pc *callPolicy) note(s string) {
	pc.words = append([]string{s}, pc.words...)
}

func (pc *callPolicy) observe(rule, effect, mode string) {
	if o := pc.f.policy.opts.Observe; o != nil {
		o.ObserveDecision(pc.project, rule, effect, mode)
	}
}

// String is the call's words for the call log: "" when no rule or
// interceptor did anything.
func (pc *callPolicy) String() string {
	if pc == nil {
		return ""
	}
	return strings.Join(pc.words, "; ")
}

// intercept runs the project's interceptors on event and phase over
// payload, noting what they did; blocked is the message the caller reads.
func (pc *callPolicy) intercept(ctx context.Context, hk *interceptors.Hooked, payload json.RawMessage) (_ json.RawMessage, blocked string) {
	ic := *pc.ic
	ic.Timestamp = time.Now().UTC().Format(time.RFC3339Nano)
	out, o := hk.Run(ctx, payload, &ic)
	if obs := pc.f.policy.opts.Observe; obs != nil {
		for _, r := range o.Ran {
			obs.ObserveInterceptor(pc.project, r.By, r.Duration, r.Err != nil)
		}
	}
	for _, a := range o.Audit {
		pc.words = append(pc.words, fmt.Sprintf("audit: interceptor %q would %s", a.By, a.Effect))
	}
	if o.Blocked {
		pc.note(fmt.Sprintf("blocked by interceptor %q", o.By))
		return nil, o.Message
	}
	return out, ""
}

// logRefusal records a call the policy refused before any agent: in the
// call log, not billed, with what decided.
func (f *Pipeline) logRefusal(c *Call, msg string) {
	f.calls.Add(store.Call{
		Time: c.start, ProjectID: c.key.ProjectID, Kind: agentproto.KindTool, Name: c.tool.Name,
		KeyID: c.key.ID, Agent: c.tool.AgentKey, Duration: time.Since(c.start), Outcome: store.OutcomeError,
		Error: msg, Policy: c.pol.String(),
	})
}

// refuse answers c, not sent, with msg as a tool error, logged.
func (f *Pipeline) refuse(c *Call, msg string) *mcp.CallToolResult {
	if c.call != nil {
		c.call.Release()
	}
	f.logRefusal(c, msg)
	return ErrorResult(msg)
}

// taskShaper is what a task's or a job's end runs (tasks.Spec.Shape): the
// result rules and interceptors on its result, and the call's words.
func (pc *callPolicy) taskShaper() func(context.Context, json.RawMessage) (json.RawMessage, string) {
	if pc == nil {
		return nil
	}
	return func(ctx context.Context, raw json.RawMessage) (json.RawMessage, string) {
		if raw == nil {
			return nil, pc.String()
		}
		out, err := DecodeResult(raw)
		switch {
		case err != nil && (pc.p.Has(policy.OnResult) || pc.chain != nil):
			// Unshaped, it would reach the client as is (tasks/result
			// hands on what the runtime keeps): refused as a plain
			// call's unreadable result is.
			b, _ := json.Marshal(ErrorResult("The agent sent a result the gateway could not read: " + err.Error()))
			return b, pc.String()
		case err != nil:
			return raw, pc.String()
		}
		shaped := pc.shape(ctx, out)
		if shaped == out {
			return raw, pc.String()
		}
		b, err := json.Marshal(shaped)
		if err != nil {
			b, _ = json.Marshal(ErrorResult(msgUnreadable))
		}
		return b, pc.String()
	}
}
