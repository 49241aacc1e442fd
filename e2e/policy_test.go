package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/store"
)

// The project's policy on the call path (docs/policy.md): rules on call,
// result and list, and interceptors, through a real gateway, a real agent
// and go-sdk clients, at both protocol eras.

// eras are the protocol versions the policy is tested at: a 2025 session
// and the stateless 2026 protocol.
var eras = []string{"2025-11-25", "2026-07-28"}

// policyAgent is the agent of the policy tests; reached counts the calls
// that reached it, by tool.
type policyAgent struct {
	pay, transfer, profile, signup, report atomic.Int32
}

type payInput struct {
	Amount int    `json:"amount"`
	Note   string `json:"note,omitempty"`
}

type transferInput struct {
	To string `json:"to"`
}

type profileOutput struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

type noInput struct{}

type signupInput struct {
	RequestID string `json:"requestId"`
}

func startPolicyAgent(e *env) *policyAgent {
	pa := &policyAgent{}
	e.startAgent(core.Options{Name: "shop"}, func(a *core.Agent) {
		must(e.t, core.AddTool(a, "pay", "Pays an amount.", func(ctx context.Context, in payInput) (string, error) {
			pa.pay.Add(1)
			if in.Note != "" {
				return fmt.Sprintf("paid %d (%s)", in.Amount, in.Note), nil
			}
			return fmt.Sprintf("paid %d", in.Amount), nil
		}))
		must(e.t, core.AddTool(a, "transfer", "Transfers the shop.", func(ctx context.Context, in transferInput) (string, error) {
			pa.transfer.Add(1)
			return "transferred to " + in.To, nil
		}, core.Destructive()))
		must(e.t, core.AddTool(a, "profile", "Shows the customer's profile.", func(ctx context.Context, _ noInput) (profileOutput, error) {
			pa.profile.Add(1)
			return profileOutput{Name: "Ann", Email: "ann@example.com"}, nil
		}, core.ReadOnly()))
		must(e.t, core.AddTool(a, "signup", "Signs Ann up; repeat-safe.", func(ctx context.Context, in signupInput) (string, error) {
			pa.signup.Add(1)
			return "signed up ann@example.com (" + in.RequestID + ")", nil
		}, core.IdempotencyKey("requestId")))
		must(e.t, core.AddTool(a, "report", "Builds a report.", func(ctx context.Context, _ noInput) (string, error) {
			pa.report.Add(1)
			return "Report for ann@example.com: 3 orders.", nil
		}, core.TaskSupport(core.TaskOptional)))
	})
	return pa
}

// setPolicy saves doc as the project's policy and waits until the
// gateway applies it: until applied reports true (the controls refresh
// within a second).
func (e *env) setPolicy(doc string, applied func() bool) {
	e.t.Helper()
	ctx := context.Background()
	cur, err := e.store.Policy(ctx, e.project.ID)
	must(e.t, err)
	if _, err := policy.Parse([]byte(doc)); err != nil {
		e.t.Fatalf("the test's policy: %v", err)
	}
	_, err = e.store.SavePolicy(ctx, e.project.ID, cur.Version, json.RawMessage(doc), "test")
	must(e.t, err)
	waitFor(e.t, "the gateway to apply the policy", applied)
}

// tryCall calls a tool; the error is a protocol error.
func tryCall(cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// policyOf returns the Policy column of the newest call log record of
// tool, waiting for one that is not "".
func (e *env) policyOf(tool string) string {
	e.t.Helper()
	return poll(e.t, "a call log record of "+tool+" with a policy", 0, func() (string, bool) {
		for _, c := range e.calls() {
			if c.Name == tool && c.Policy != "" {
				return c.Policy, true
			}
		}
		return "", false
	})
}

func TestPolicyArgumentDeny(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pa := startPolicyAgent(e)
	const want = "Payments over 500 need an owner (asked for 600)."
	probe := e.connect("2026-07-28", e.clientKey, nil)
	e.setPolicy(`{"rules":[{"name":"amount-limit","on":"call","tools":["pay"],
		"when":"args.amount > 500 && caller.role != \"owner\"","effect":"deny",
		"message":"Payments over 500 need an owner (asked for {{args.amount}})."}]}`, func() bool {
		r, err := tryCall(probe, "pay", map[string]any{"amount": 600})
		return err == nil && r.IsError
	})
	before := pa.pay.Load()
	for _, v := range eras {
		t.Run(v, func(t *testing.T) {
			cs := e.connect(v, e.clientKey, nil)
			r := call(t, cs, "pay", map[string]any{"amount": 600})
			if !r.IsError || text(r) != want {
				t.Errorf("pay 600 = %q (isError %v), want the rule's message %q", text(r), r.IsError, want)
			}
			if r := call(t, cs, "pay", map[string]any{"amount": 100}); r.IsError || text(r) != "paid 100" {
				t.Errorf("pay 100 = %q (isError %v), want it paid", text(r), r.IsError)
			}
		})
	}
	if got := pa.pay.Load() - before; got != 2 {
		t.Errorf("the agent was reached %d times, want 2 (the allowed calls only)", got)
	}
	if got := e.policyOf("pay"); got != `deny by rule "amount-limit"` {
		t.Errorf("call log policy = %q", got)
	}
	body := e.scrape(e.adminToken())
	if n, _ := metric(body, "spacefix_policy_decisions_total", "project="+e.project.Name, "rule=amount-limit", "effect=deny", "mode=enforce"); n < 2 {
		t.Errorf("spacefix_policy_decisions_total of amount-limit = %v, want at least the 2 refusals", n)
	}
	if n, ok := metric(body, "spacefix_calls_total", "project="+e.project.Name, "tool=pay", "outcome=error"); ok {
		t.Errorf("spacefix_calls_total counts %v refused calls, want none: they reached no agent", n)
	}
}

// TestPolicyBrokenRefusesEveryCall: a saved policy this build cannot
// compile refuses every call of the project, with words that say what to
// do (fail closed: its rules may have denied).
func TestPolicyBrokenRefusesEveryCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pa := startPolicyAgent(e)
	probe := e.connect("2026-07-28", e.clientKey, nil)
	e.setPolicy(`{"rules":[{"name":"half","on":"call","when":"args.amount >","effect":"deny"}]}`, func() bool {
		r, err := tryCall(probe, "profile", map[string]any{})
		return err == nil && r.IsError
	})
	before := pa.profile.Load()
	for _, v := range eras {
		t.Run(v, func(t *testing.T) {
			cs := e.connect(v, e.clientKey, nil)
			if r := call(t, cs, "profile", map[string]any{}); !r.IsError || text(r) != access.PolicyBrokenMessage {
				t.Errorf("profile = %q (isError %v), want %q", text(r), r.IsError, access.PolicyBrokenMessage)
			}
		})
	}
	if n := pa.profile.Load() - before; n != 0 {
		t.Errorf("the agent was reached %d times, want never", n)
	}
}

func TestPolicyRuleErrorFailsClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pa := startPolicyAgent(e)
	probe := e.connect("2026-07-28", e.clientKey, nil)
	e.setPolicy(`{"rules":[{"name":"broken","on":"call","tools":["pay"],"when":"args.missing.x > 1","effect":"deny"}]}`, func() bool {
		r, err := tryCall(probe, "pay", map[string]any{"amount": 1})
		return err == nil && r.IsError
	})
	const want = `This call was refused by rule "broken" of the project's policy, which could not be evaluated.`
	before := pa.pay.Load()
	for _, v := range eras {
		t.Run(v, func(t *testing.T) {
			cs := e.connect(v, e.clientKey, nil)
			if r := call(t, cs, "pay", map[string]any{"amount": 1}); !r.IsError || text(r) != want {
				t.Errorf("pay = %q (isError %v), want %q", text(r), r.IsError, want)
			}
		})
	}
	if n := pa.pay.Load() - before; n != 0 {
		t.Errorf("the agent was reached %d times, want never", n)
	}
}

func TestPolicyHide(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	startPolicyAgent(e)
	probe := e.connect("2026-07-28", e.clientKey, nil)
	e.setPolicy(`{"rules":[{"name":"owners-only","on":"list","tools":["transfer"],"when":"caller.role != \"owner\"","effect":"hide"}]}`, func() bool {
		_, err := tryCall(probe, "transfer", map[string]any{"to": "x"})
		return err != nil
	})
	for _, v := range eras {
		t.Run(v, func(t *testing.T) {
			cs := e.connect(v, e.clientKey, nil)
			names := toolNames(t, cs)
			if strings.Contains(strings.Join(names, ","), "transfer") || len(names) == 0 {
				t.Errorf("tools = %v, want transfer hidden and the rest listed", names)
			}
			_, errHidden := tryCall(cs, "transfer", map[string]any{"to": "x"})
			_, errUnknown := tryCall(cs, "no_such_tool", map[string]any{"to": "x"})
			if errHidden == nil || errUnknown == nil {
				t.Fatalf("calls answered %v and %v, want protocol errors", errHidden, errUnknown)
			}
			if got, want := errHidden.Error(), strings.ReplaceAll(errUnknown.Error(), "no_such_tool", "transfer"); got != want {
				t.Errorf("a hidden tool's call = %q, want an unknown tool's words %q", got, want)
			}
		})
	}
}

// A rule on list that reads the time hides a tool once its time comes,
// at the next tools/list of the same session, with no change of the
// policy or the tools in between.
func TestPolicyHideByTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	startPolicyAgent(e)
	probe := e.connect("2026-07-28", e.clientKey, nil)
	from := time.Now().Add(3 * time.Second).UTC().Truncate(time.Second)
	e.setPolicy(fmt.Sprintf(`{"rules":[
	  {"name":"no-transfers-from","on":"list","tools":["transfer"],"when":"now >= timestamp(\"%s\")","effect":"hide"},
	  {"name":"probe","on":"call","tools":["pay"],"effect":"deny"}]}`, from.Format(time.RFC3339)), func() bool {
		r, err := tryCall(probe, "pay", map[string]any{"amount": 1})
		return err == nil && r.IsError
	})
	sessions := map[string]*mcp.ClientSession{}
	for _, v := range eras {
		sessions[v] = e.connect(v, e.clientKey, nil)
		names := toolNames(t, sessions[v])
		if time.Now().After(from) {
			t.Skipf("the machine took until %v to list, past the rule's time %v", time.Now(), from)
		}
		if !slices.Contains(names, "transfer") {
			t.Fatalf("%s before %v: tools = %v, want transfer listed", v, from, names)
		}
	}
	time.Sleep(time.Until(from) + 100*time.Millisecond)
	for _, v := range eras {
		if names := toolNames(t, sessions[v]); slices.Contains(names, "transfer") || !slices.Contains(names, "pay") {
			t.Errorf("%s after %v: tools = %v, want transfer hidden and pay listed", v, from, names)
		}
		if _, err := tryCall(sessions[v], "transfer", map[string]any{"to": "x"}); err == nil {
			t.Errorf("%s after %v: a call of transfer was answered, want an unknown tool", v, from)
		}
	}
}

// confirmingClient connects at v with an elicitation handler that gives
// the answer answer returns, and counts the questions.
func confirmingClient(e *env, v string, asked *atomic.Int32, answer func() *mcp.ElicitResult) *mcp.ClientSession {
	return e.connect(v, e.clientKey, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return answer(), nil
		},
	})
}

func TestPolicyConfirm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pa := startPolicyAgent(e)
	probe := e.connect("2026-07-28", e.clientKey, nil)
	e.setPolicy(`{"rules":[{"name":"approve-transfers","on":"call","tools":["transfer"],"effect":"confirm",
		"message":"Transfer the shop to {{args.to}}?"}]}`, func() bool {
		r, err := tryCall(probe, "transfer", map[string]any{"to": "probe"})
		return err != nil || r.IsError || r.InputRequests != nil
	})
	cases := []struct {
		name   string
		answer *mcp.ElicitResult
		want   string
		runs   bool
	}{
		{"yes", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, "transferred to bob", true},
		{"decline", &mcp.ElicitResult{Action: "decline"}, `The call was not run: the user did not confirm it (rule "approve-transfers" of the project's policy asks first).`, false},
		{"empty", &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, "", false},
	}
	for _, v := range eras {
		t.Run(v, func(t *testing.T) {
			for _, c := range cases {
				var asked atomic.Int32
				cs := confirmingClient(e, v, &asked, func() *mcp.ElicitResult { return c.answer })
				before := pa.transfer.Load()
				r, err := tryCall(cs, "transfer", map[string]any{"to": "bob"})
				ran := pa.transfer.Load() > before
				switch {
				case asked.Load() != 1:
					t.Errorf("%s: the user was asked %d times, want once", c.name, asked.Load())
				case ran != c.runs:
					t.Errorf("%s: the call ran: %v, want %v", c.name, ran, c.runs)
				case c.runs && (err != nil || r.IsError || text(r) != c.want):
					t.Errorf("%s: %v %q, want %q", c.name, err, textOf(r), c.want)
				case !c.runs && err == nil && !r.IsError:
					t.Errorf("%s: %q, want a refusal", c.name, text(r))
				case c.want != "" && err == nil && text(r) != c.want:
					t.Errorf("%s: %q, want %q", c.name, text(r), c.want)
				}
			}
		})
	}
}

func textOf(r *mcp.CallToolResult) string {
	if r == nil {
		return ""
	}
	return text(r)
}

func TestPolicyRedactAndAudit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pa := startPolicyAgent(e)
	probe := e.connect("2026-07-28", e.clientKey, nil)
	e.setPolicy(`{"rules":[
		{"name":"would-stop","on":"call","tools":["pay"],"when":"args.amount > 10","effect":"deny","mode":"audit"},
		{"name":"pii","on":"result","tools":["profile","report"],"effect":"redact","redact":["[\\w.]+@[\\w.]+\\w"]}]}`, func() bool {
		r, err := tryCall(probe, "profile", map[string]any{})
		return err == nil && strings.Contains(text(r), "[redacted]")
	})
	for _, v := range eras {
		t.Run(v, func(t *testing.T) {
			cs := e.connect(v, e.clientKey, nil)
			r := call(t, cs, "profile", map[string]any{})
			if strings.Contains(text(r), "ann@") || !strings.Contains(text(r), "[redacted]") {
				t.Errorf("profile text = %q, want the address redacted", text(r))
			}
			sc, _ := json.Marshal(r.StructuredContent)
			if string(sc) != `{"email":"[redacted]","name":"Ann"}` {
				t.Errorf("profile structuredContent = %s, want the address redacted", sc)
			}
			// Audit mode: recorded, not enforced.
			if r := call(t, cs, "pay", map[string]any{"amount": 50}); r.IsError || text(r) != "paid 50" {
				t.Errorf("pay under an audit rule = %q (isError %v), want it paid", text(r), r.IsError)
			}
		})
	}
	if pa.pay.Load() != 2 {
		t.Errorf("pay reached the agent %d times, want 2", pa.pay.Load())
	}
	if got := e.policyOf("pay"); got != `audit: rule "would-stop" would deny` {
		t.Errorf("call log policy of pay = %q", got)
	}
	if got := e.policyOf("profile"); got != `redact by rule "pii"` {
		t.Errorf("call log policy of profile = %q", got)
	}
}

// TestPolicyReplayShaped: a repeat's replay of a request id is the
// agent's recorded result, shaped by the result rules on its way out like
// any answer, and its call log record says so.
func TestPolicyReplayShaped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pa := startPolicyAgent(e)
	probe := e.connect("2026-07-28", e.clientKey, nil)
	probes := 0 // a new request id each time: the probe is never a replay
	e.setPolicy(`{"rules":[{"name":"pii","on":"result","tools":["signup"],"effect":"redact","redact":["[\\w.]+@[\\w.]+\\w"]}]}`, func() bool {
		probes++
		r, err := tryCall(probe, "signup", map[string]any{"requestId": fmt.Sprint("probe-", probes)})
		return err == nil && strings.Contains(text(r), "[redacted]")
	})
	for _, v := range eras {
		t.Run(v, func(t *testing.T) {
			cs := e.connect(v, e.clientKey, nil)
			id := "req-" + v
			before := pa.signup.Load()
			for range 2 {
				if r := call(t, cs, "signup", map[string]any{"requestId": id}); r.IsError || text(r) != "signed up [redacted] ("+id+")" {
					t.Errorf("signup = %q (isError %v), want it redacted", text(r), r.IsError)
				}
			}
			if n := pa.signup.Load() - before; n != 1 {
				t.Errorf("signup reached the agent %d times, want once (the second is a replay)", n)
			}
		})
	}
	replays := 0
	for _, c := range e.calls() {
		if c.Name == "signup" && c.Replay && c.Policy == `redact by rule "pii"` {
			replays++
		}
	}
	if replays != 2 {
		t.Errorf("%d replays logged with the rule, want 2", replays)
	}
}

// TestPolicyCacheShapesEachAnswer: a cached result is the agent's own,
// shaped for each caller on the way out: a redaction for keys does not
// reach the cache.
func TestPolicyCacheShapesEachAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pa := startPolicyAgent(e)
	ctx := context.Background()
	_, err := e.store.SaveToolSettings(ctx, store.ToolSettings{ProjectID: e.project.ID, Tool: "profile", CacheSeconds: 60})
	must(t, err)
	_, other := e.newKey(store.Key{Name: "auditor", Kind: store.KindClient})
	probe := e.connect("2026-07-28", e.clientKey, nil)
	e.setPolicy(`{"rules":[{"name":"pii","on":"result","tools":["profile"],"when":"caller.key.name != \"auditor\"","effect":"redact","redact":["[\\w.]+@[\\w.]+\\w"]}]}`, func() bool {
		r, err := tryCall(probe, "profile", map[string]any{})
		return err == nil && strings.Contains(text(r), "[redacted]")
	})
	for _, v := range eras {
		t.Run(v, func(t *testing.T) {
			if r := call(t, e.connect(v, e.clientKey, nil), "profile", map[string]any{}); !strings.Contains(text(r), "[redacted]") {
				t.Errorf("the client key's profile = %q, want redacted", text(r))
			}
			if r := call(t, e.connect(v, other, nil), "profile", map[string]any{}); !strings.Contains(text(r), "ann@example.com") {
				t.Errorf("the auditor's profile = %q, want the address", text(r))
			}
		})
	}
	if n := pa.profile.Load(); n > 2 {
		t.Errorf("profile reached the agent %d times, want the cache to answer", n)
	}
}

// TestPolicyTasksAndJobs: a task-augmented call (both eras) and a job are
// denied by a call rule; a job's result is redacted as it ends.
func TestPolicyTasksAndJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	startPolicyAgent(e)
	probe := e.connect("2026-07-28", e.clientKey, nil)
	const denied = "Reports are closed today."
	e.setPolicy(`{"rules":[{"name":"no-reports","on":"call","tools":["report"],"when":"\"closed\" in args","effect":"deny","message":"`+denied+`"},
		{"name":"pii","on":"result","tools":["report"],"effect":"redact","redact":["[\\w.]+@[\\w.]+\\w"]}]}`, func() bool {
		r, err := tryCall(probe, "report", map[string]any{})
		return err == nil && strings.Contains(text(r), "[redacted]")
	})
	// report takes no arguments but "closed": the schema allows extras.
	t.Run("2026-07-28 task", func(t *testing.T) {
		c := e.extClient(e.clientKey)
		a := c.do(extRequest{method: "tools/call", params: map[string]any{"name": "report", "arguments": map[string]any{"closed": true}}})
		r := c.ok(a, "tools/call report")
		if r["isError"] != true || !strings.Contains(fmt.Sprint(r["content"]), denied) {
			t.Errorf("task-augmented call = %v, want the rule's refusal", r)
		}
		task := c.start("report", map[string]any{})
		id, _ := task["taskId"].(string)
		done := c.waitStatus(id, "completed")
		if got := resultText(done); got != "Report for [redacted]: 3 orders." {
			t.Errorf("the task's result = %q, want redacted", got)
		}
	})
	t.Run("2025-11-25 task", func(t *testing.T) {
		tc := e.tasksClient(e.clientKey, nil)
		// A 2025 task's refusal is a JSON-RPC error, as the session's
		// other refusals of a task (tasks_session_call.go).
		a := tc.callAsTask("report", `{"closed":true}`, `{"ttl":60000}`)
		if a.Error == nil || a.Error.Message != denied {
			t.Errorf("task-augmented call = %s %v, want the rule's refusal", a.Result, a.Error)
		}
	})
	for _, v := range eras {
		t.Run(v+" job", func(t *testing.T) {
			cs := e.connect(v, e.clientKey, nil) // no tasks: report runs as a job
			if r := call(t, cs, "report", map[string]any{"closed": true}); !r.IsError || text(r) != denied {
				t.Errorf("job call = %q (isError %v), want the rule's refusal", text(r), r.IsError)
			}
			if r := call(t, cs, "report", map[string]any{}); r.IsError || text(r) != "Report for [redacted]: 3 orders." {
				t.Errorf("job result = %q (isError %v), want redacted", text(r), r.IsError)
			}
		})
	}
}

// TestPolicyPeopleRoles: OAuth people in three roles, each through their
// own app's grant, at both eras: an amount limit only owners pass, and a
// tool hidden from viewers (absent from their tools/list, unknown when
// called), listed for the others.
func TestPolicyPeopleRoles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	startPolicyAgent(e)
	ctx := context.Background()
	people := map[store.Role]*person{}
	for _, role := range []store.Role{store.RoleOwner, store.RoleEditor, store.RoleViewer} {
		email := string(role) + "@example.com"
		p := newUser(t, e, email, false)
		u, _, err := e.store.UserByEmail(ctx, email)
		must(t, err)
		_, err = e.store.SetMember(ctx, store.Member{ProjectID: e.project.ID, UserID: u.ID, Role: role})
		must(t, err)
		if role == store.RoleViewer {
			p.access.Store("read")
		}
		people[role] = p
	}
	probe := e.connect("2026-07-28", e.clientKey, nil)
	e.setPolicy(`{"rules":[
		{"name":"viewers-no-profile","on":"list","tools":["profile"],"when":"caller.role == \"viewer\"","effect":"hide"},
		{"name":"amount-limit","on":"call","tools":["pay"],"when":"args.amount > 500 && caller.role != \"owner\"","effect":"deny",
		 "message":"Payments over 500 need an owner; {{caller.person.email}} is not one."}]}`, func() bool {
		r, err := tryCall(probe, "pay", map[string]any{"amount": 600})
		return err == nil && r.IsError
	})
	for _, v := range eras {
		t.Run(v, func(t *testing.T) {
			sessions := map[store.Role]*mcp.ClientSession{}
			for role, p := range people {
				cs, err := p.oauthClient(v)
				if err != nil {
					t.Fatalf("%s connects: %v", role, err)
				}
				sessions[role] = cs
			}
			if r := call(t, sessions[store.RoleOwner], "pay", map[string]any{"amount": 600}); r.IsError || text(r) != "paid 600" {
				t.Errorf("the owner's pay 600 = %q (isError %v), want paid", text(r), r.IsError)
			}
			const want = "Payments over 500 need an owner; editor@example.com is not one."
			if r := call(t, sessions[store.RoleEditor], "pay", map[string]any{"amount": 600}); !r.IsError || text(r) != want {
				t.Errorf("the editor's pay 600 = %q (isError %v), want %q", text(r), r.IsError, want)
			}
			for role, cs := range sessions {
				listed := slices.Contains(toolNames(t, cs), "profile")
				if listed == (role == store.RoleViewer) {
					t.Errorf("%s: profile listed %v, want %v", role, listed, role != store.RoleViewer)
				}
			}
			_, errHidden := tryCall(sessions[store.RoleViewer], "profile", map[string]any{})
			_, errUnknown := tryCall(sessions[store.RoleViewer], "no_such_tool", map[string]any{})
			if errHidden == nil || errUnknown == nil || errHidden.Error() != strings.ReplaceAll(errUnknown.Error(), "no_such_tool", "profile") {
				t.Errorf("the viewer's call of profile = %v, want an unknown tool's words (%v)", errHidden, errUnknown)
			}
			if r := call(t, sessions[store.RoleEditor], "profile", map[string]any{}); r.IsError {
				t.Errorf("the editor's profile = %q, want it answered", text(r))
			}
		})
	}
}

// TestPolicyConfirmBound: the user's yes to a policy's question, as a
// 2026-07-28 client sends it back (requestState and inputResponses), runs
// the very call it was asked about only: another key, or the same state
// with other arguments, is asked again and nothing runs.
func TestPolicyConfirmBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pa := startPolicyAgent(e)
	probe := e.connect("2026-07-28", e.clientKey, nil)
	e.setPolicy(`{"rules":[{"name":"approve-transfers","on":"call","tools":["transfer"],"effect":"confirm"}]}`, func() bool {
		r, err := tryCall(probe, "transfer", map[string]any{"to": "probe"})
		return err == nil && r.IsError
	})
	const cannot = `This call needs the user's confirmation (rule "approve-transfers" of the project's policy), and the MCP client cannot ask the user: it does not support elicitation. Use a client that can, or ask an owner about the rule.`
	if r := call(t, probe, "transfer", map[string]any{"to": "x"}); text(r) != cannot {
		t.Errorf("a client without elicitation = %q, want %q", text(r), cannot)
	}
	const caps = `{"elicitation":{}}`
	type answer struct {
		Result struct {
			IsError       bool           `json:"isError"`
			InputRequests map[string]any `json:"inputRequests"`
			RequestState  string         `json:"requestState"`
		} `json:"result"`
	}
	send := func(key, params string) (answer, string) {
		t.Helper()
		resp, body := modernCallCaps(t, e, key, "tools/call", "transfer", params, caps)
		var a answer
		if resp.StatusCode != 200 || json.Unmarshal(sseData(body), &a) != nil {
			t.Fatalf("tools/call transfer = %d %s", resp.StatusCode, body)
		}
		return a, string(sseData(body))
	}
	first, _ := send(e.clientKey, `{"name":"transfer","arguments":{"to":"bob"}}`)
	if first.Result.RequestState == "" || first.Result.InputRequests["policy-confirm"] == nil {
		t.Fatalf("the first call = %+v, want the policy's question", first.Result)
	}
	yes := `,"requestState":"` + first.Result.RequestState + `","inputResponses":{"policy-confirm":{"action":"accept","content":{"confirm":true}}}}`
	before := pa.transfer.Load()
	if a, _ := send(e.clientKey, `{"name":"transfer","arguments":{"to":"mallory"}`+yes); a.Result.InputRequests == nil {
		t.Errorf("the yes given for bob, sent with other arguments: %+v, want the question again", a.Result)
	}
	_, other := e.newKey(store.Key{Name: "other", Kind: store.KindClient})
	if a, _ := send(other, `{"name":"transfer","arguments":{"to":"bob"}`+yes); a.Result.InputRequests == nil {
		t.Errorf("the yes given to one key, sent by another: %+v, want the question again", a.Result)
	}
	if n := pa.transfer.Load() - before; n != 0 {
		t.Fatalf("the agent was reached %d times, want never", n)
	}
	if a, body := send(e.clientKey, `{"name":"transfer","arguments":{"to":"bob"}`+yes); a.Result.IsError || !strings.Contains(body, "transferred to bob") {
		t.Errorf("the yes for this very call = %s, want it run", body)
	}
	if got := e.policyOf("transfer"); got != `confirm by rule "approve-transfers": confirmed` {
		t.Errorf("call log policy = %q", got)
	}
}
