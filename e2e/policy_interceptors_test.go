package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/interceptors"
)

// guardServer is a real interceptor server (go-sdk, streamable HTTP on
// loopback) with a validator, two mutators, a slow validator and a
// mutator of tools/list.
func guardServer(t *testing.T) string {
	t.Helper()
	emails := regexp.MustCompile(`[\w.+-]+@[\w-]+\.[\w.]+\w`)
	yes, no := true, false
	stop := make(chan struct{}) // ends the slow interceptor's waits
	infos := []interceptors.Info{
		{Name: "no-999", Type: interceptors.Validation, Hook: interceptors.Hook{Events: []string{"tools/call"}, Phase: interceptors.PhaseRequest}},
		{Name: "notes", Type: interceptors.Mutation, Hook: interceptors.Hook{Events: []string{"tools/call"}, Phase: interceptors.PhaseRequest}},
		{Name: "slow", Type: interceptors.Validation, Hook: interceptors.Hook{Events: []string{"tools/call"}, Phase: interceptors.PhaseRequest}},
		{Name: "emails", Type: interceptors.Mutation, Hook: interceptors.Hook{Events: []string{"tools/call"}, Phase: interceptors.PhaseResponse}},
		{Name: "shadow", Type: interceptors.Validation, Mode: "audit", Hook: interceptors.Hook{Events: []string{"tools/call"}, Phase: interceptors.PhaseRequest}},
		{Name: "no-codes", Type: interceptors.Validation, Hook: interceptors.Hook{Events: []string{"tools/call"}, Phase: interceptors.PhaseResponse}},
		{Name: "no-transfer", Type: interceptors.Mutation, Hook: interceptors.Hook{Events: []string{"tools/list"}, Phase: interceptors.PhaseResponse}},
	}
	invoke := func(p *interceptors.InvokeParams) (*interceptors.InvokeResult, error) {
		switch p.Name {
		case "no-999":
			if strings.Contains(string(p.Payload), `"amount":999`) {
				return &interceptors.InvokeResult{Valid: &no, Messages: []interceptors.Message{{Message: "amounts of 999 are not allowed", Severity: "error"}}}, nil
			}
			return &interceptors.InvokeResult{Valid: &yes}, nil
		case "notes":
			var call struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			}
			if json.Unmarshal(p.Payload, &call) != nil || call.Arguments["note"] == nil {
				return &interceptors.InvokeResult{Modified: &no}, nil
			}
			switch call.Arguments["note"] {
			case "rewrite":
				call.Arguments["note"] = "rewritten by the interceptor"
			case "break":
				call.Arguments["amount"] = "not a number"
			default:
				return &interceptors.InvokeResult{Modified: &no}, nil
			}
			b, _ := json.Marshal(call)
			return &interceptors.InvokeResult{Modified: &yes, Payload: b}, nil
		case "slow":
			if strings.Contains(string(p.Payload), `"note":"slow"`) {
				select {
				case <-time.After(2 * time.Second):
				case <-stop:
				}
			}
			return &interceptors.InvokeResult{Valid: &yes}, nil
		case "shadow":
			if strings.Contains(string(p.Payload), `"note":"shadow"`) {
				return &interceptors.InvokeResult{Valid: &no, Messages: []interceptors.Message{{Message: "shadows are frowned upon", Severity: "error"}}}, nil
			}
			return &interceptors.InvokeResult{Valid: &yes}, nil
		case "no-codes":
			if strings.Contains(string(p.Payload), "secret-code") {
				return &interceptors.InvokeResult{Valid: &no, Messages: []interceptors.Message{{Message: "results must not carry codes", Severity: "error"}}}, nil
			}
			return &interceptors.InvokeResult{Valid: &yes}, nil
		case "emails":
			out := emails.ReplaceAllString(string(p.Payload), "[email]")
			changed := out != string(p.Payload)
			return &interceptors.InvokeResult{Modified: &changed, Payload: json.RawMessage(out)}, nil
		case "no-transfer":
			var list map[string]any
			if json.Unmarshal(p.Payload, &list) != nil {
				return &interceptors.InvokeResult{Modified: &no}, nil
			}
			tools, _ := list["tools"].([]any)
			list["tools"] = slices.DeleteFunc(tools, func(v any) bool {
				m, _ := v.(map[string]any)
				return m["name"] == "transfer"
			})
			b, _ := json.Marshal(list)
			return &interceptors.InvokeResult{Modified: &yes, Payload: b}, nil
		}
		return &interceptors.InvokeResult{Valid: &yes}, nil
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "e2e-guard", Version: "1"}, nil)
	must(t, mcp.AddReceivingCustomMethod(s, interceptors.MethodList, func(context.Context, *mcp.ServerSession, *interceptors.ListParams) (*interceptors.ListResult, error) {
		return &interceptors.ListResult{Interceptors: infos}, nil
	}))
	must(t, mcp.AddReceivingCustomMethod(s, interceptors.MethodInvoke, func(_ context.Context, _ *mcp.ServerSession, p *interceptors.InvokeParams) (*interceptors.InvokeResult, error) {
		return invoke(p)
	}))
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(stop) }) // first: the server's Close waits for its handlers
	return hs.URL
}

// TestPolicyInterceptors: a validator blocks, a mutator rewrites the
// arguments (validated again) and the result, one that does not answer in
// time blocks (fail closed), and tools/list passes through them, at both
// eras.
func TestPolicyInterceptors(t *testing.T) {
	t.Parallel()
	url := guardServer(t) // first: it stops after the gateway, which ends its session there
	e := newEnv(t, withConfig(func(c *gateway.Config) { c.UpstreamAllowLoopback = true }))
	pa := startPolicyAgent(e)
	probe := e.connect("2026-07-28", e.clientKey, nil)
	e.setPolicy(`{"rules":[],"interceptors":[{"name":"guard","url":"`+url+`","timeout":"300ms"}]}`, func() bool {
		r, err := tryCall(probe, "pay", map[string]any{"amount": 999})
		return err == nil && r.IsError
	})
	for _, v := range eras {
		t.Run(v, func(t *testing.T) {
			cs := e.connect(v, e.clientKey, nil)
			before := pa.pay.Load()
			const blocked = `This call was refused by interceptor "no-999": amounts of 999 are not allowed`
			if r := call(t, cs, "pay", map[string]any{"amount": 999}); !r.IsError || text(r) != blocked {
				t.Errorf("pay 999 = %q (isError %v), want %q", text(r), r.IsError, blocked)
			}
			const late = `This call was refused: interceptor "slow" of the project's policy did not answer in time (300ms).`
			if r := call(t, cs, "pay", map[string]any{"amount": 1, "note": "slow"}); !r.IsError || text(r) != late {
				t.Errorf("a slow interceptor: %q (isError %v), want %q", text(r), r.IsError, late)
			}
			if r := call(t, cs, "pay", map[string]any{"amount": 1, "note": "break"}); !r.IsError || !strings.Contains(text(r), "rewrote this call's arguments into ones the tool does not take") {
				t.Errorf("a rewrite the schema refuses: %q (isError %v)", text(r), r.IsError)
			}
			if n := pa.pay.Load() - before; n != 0 {
				t.Errorf("refused calls reached the agent %d times", n)
			}
			if r := call(t, cs, "pay", map[string]any{"amount": 5, "note": "rewrite"}); r.IsError || text(r) != "paid 5 (rewritten by the interceptor)" {
				t.Errorf("a rewritten call = %q (isError %v)", text(r), r.IsError)
			}
			// An audit-mode validator's block is recorded, not applied.
			if r := call(t, cs, "pay", map[string]any{"amount": 2, "note": "shadow"}); r.IsError || text(r) != "paid 2 (shadow)" {
				t.Errorf("an audit-mode block = %q (isError %v), want the call run", text(r), r.IsError)
			}
			// A validator of results blocks the answer of a call that ran.
			const noCodes = `This call was refused by interceptor "no-codes": results must not carry codes`
			if r := call(t, cs, "pay", map[string]any{"amount": 3, "note": "secret-code"}); !r.IsError || text(r) != noCodes {
				t.Errorf("a result an interceptor blocks = %q (isError %v), want %q", text(r), r.IsError, noCodes)
			}
			if r := call(t, cs, "profile", map[string]any{}); strings.Contains(text(r), "ann@") || !strings.Contains(text(r), "[email]") {
				t.Errorf("profile = %q, want the address rewritten", text(r))
			}
			if names := toolNames(t, cs); slices.Contains(names, "transfer") || !slices.Contains(names, "pay") {
				t.Errorf("tools = %v, want transfer taken out by the interceptor", names)
			}
		})
	}
	body := e.scrape(e.adminToken())
	if n, _ := metric(body, "spacefix_interceptor_duration_seconds_count", "project="+e.project.Name, "interceptor=guard/no-999", "outcome=ok"); n < 2 {
		t.Errorf("spacefix_interceptor_duration_seconds_count of guard/no-999 = %v, want one per call", n)
	}
	if n, _ := metric(body, "spacefix_interceptor_duration_seconds_count", "project="+e.project.Name, "interceptor=guard/slow", "outcome=error"); n < 2 {
		t.Errorf("the slow interceptor's timeouts counted %v times, want 2 at least", n)
	}
	words := map[string]bool{}
	for _, c := range e.calls() {
		if c.Name == "pay" {
			words[c.Policy] = true
		}
	}
	for _, want := range []string{`blocked by interceptor "guard/no-999"`, `blocked by interceptor "guard/slow"`,
		`audit: interceptor "guard/shadow" would block`, `blocked by interceptor "guard/no-codes"`} {
		if !words[want] {
			t.Errorf("no call log record of pay says %q; they say %q", want, slices.Sorted(maps.Keys(words)))
		}
	}
}

// TestPolicyInterceptorsTasksAndJobs: the interceptors hook a
// task-augmented call and a job as they hook a plain call: a validator
// blocks one before anything runs, one that does not answer in time
// blocks it (fail closed), and a mutator rewrites its result when it
// ends, at both eras. report takes extra arguments (its schema allows
// them), which the interceptors read.
func TestPolicyInterceptorsTasksAndJobs(t *testing.T) {
	t.Parallel()
	url := guardServer(t)
	e := newEnv(t, withConfig(func(c *gateway.Config) { c.UpstreamAllowLoopback = true }))
	pa := startPolicyAgent(e)
	probe := e.connect("2026-07-28", e.clientKey, nil)
	e.setPolicy(`{"rules":[],"interceptors":[{"name":"guard","url":"`+url+`","timeout":"300ms"}]}`, func() bool {
		r, err := tryCall(probe, "report", map[string]any{"amount": 999})
		return err == nil && r.IsError
	})
	const (
		blocked  = `This call was refused by interceptor "no-999": amounts of 999 are not allowed`
		late     = `This call was refused: interceptor "slow" of the project's policy did not answer in time (300ms).`
		reported = "Report for [email]: 3 orders."
	)
	before := pa.report.Load()
	t.Run("2026-07-28 task", func(t *testing.T) {
		c := e.extClient(e.clientKey)
		for args, want := range map[string]string{`{"amount":999}`: blocked, `{"note":"slow"}`: late} {
			var a map[string]any
			must(t, json.Unmarshal([]byte(args), &a))
			r := c.ok(c.do(extRequest{method: "tools/call", params: map[string]any{"name": "report", "arguments": a}}), "tools/call report")
			if r["isError"] != true || !strings.Contains(fmt.Sprint(r["content"]), want) {
				t.Errorf("task-augmented call with %s = %v, want %q", args, r, want)
			}
		}
		task := c.start("report", map[string]any{})
		id, _ := task["taskId"].(string)
		if got := resultText(c.waitStatus(id, "completed")); got != reported {
			t.Errorf("the task's result = %q, want %q", got, reported)
		}
	})
	t.Run("2025-11-25 task", func(t *testing.T) {
		tc := e.tasksClient(e.clientKey, nil)
		for args, want := range map[string]string{`{"amount":999}`: blocked, `{"note":"slow"}`: late} {
			if a := tc.callAsTask("report", args, `{"ttl":60000}`); a.Error == nil || a.Error.Message != want {
				t.Errorf("task-augmented call with %s = %s %v, want %q", args, a.Result, a.Error, want)
			}
		}
		task := tc.start("report", `{}`, `{"ttl":60000}`)
		tc.waitStatus(task.TaskID, "completed")
		res, err := tc.result(task.TaskID)
		if err != nil || text(res) != reported {
			t.Errorf("the task's result = %q (%v), want %q", text(res), err, reported)
		}
	})
	for _, v := range eras {
		t.Run(v+" job", func(t *testing.T) {
			cs := e.connect(v, e.clientKey, nil) // no tasks: report runs as a job
			for args, want := range map[string]map[string]any{blocked: {"amount": 999}, late: {"note": "slow"}} {
				if r := call(t, cs, "report", want); !r.IsError || text(r) != args {
					t.Errorf("job call with %v = %q (isError %v), want %q", want, text(r), r.IsError, args)
				}
			}
			if r := call(t, cs, "report", map[string]any{}); r.IsError || text(r) != reported {
				t.Errorf("job result = %q (isError %v), want %q", text(r), r.IsError, reported)
			}
		})
	}
	// The probe and the three successful runs reached the agent; the
	// refused calls never did.
	if n := pa.report.Load() - before; n != 4 {
		t.Errorf("report reached the agent %d times, want 4 (one task per era and one job per era)", n)
	}
}
