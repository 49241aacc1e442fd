package e2e

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPolicyConfirmTasks: a confirm rule asks a task-augmented call's
// person through the task, in both eras. The task starts input_required
// with the rule's question before the agent hears of the call; a yes runs
// it, a decline or an empty form ends it refused, and the agent never ran;
// the call log says what the person answered.
func TestPolicyConfirmTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pa := startPolicyAgent(e)
	probe := e.connect("2026-07-28", e.clientKey, nil) // no elicitation: refused
	const cannot = `This call needs the user's confirmation (rule "approve-reports" of the project's policy), and the MCP client cannot ask the user: it does not support elicitation. Use a client that can, or ask an owner about the rule.`
	e.setPolicy(`{"rules":[{"name":"approve-reports","on":"call","tools":["report"],"effect":"confirm","message":"Build the report?"}]}`, func() bool {
		r, err := tryCall(probe, "report", map[string]any{})
		return err == nil && r.IsError && text(r) == cannot
	})
	const (
		report   = "Report for ann@example.com: 3 orders."
		declined = `The call was not run: the user did not confirm it (rule "approve-reports" of the project's policy asks first).`
	)
	cases := []struct {
		name   string
		answer map[string]any
		want   string // the task's result text
		runs   bool
		log    string // the call log's Policy column
	}{
		{"yes", map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}, report, true, `confirm by rule "approve-reports": confirmed`},
		{"decline", map[string]any{"action": "decline"}, declined, false, `confirm by rule "approve-reports": declined`},
		{"empty", map[string]any{"action": "accept", "content": map[string]any{}}, "", false, `confirm by rule "approve-reports": no answer`},
	}

	t.Run("2026-07-28", func(t *testing.T) {
		c := e.extClient(e.clientKey)
		for _, tc := range cases {
			before := pa.report.Load()
			id, _ := c.start("report", map[string]any{})["taskId"].(string)
			waiting := c.waitStatus(id, "input_required")
			reqs, _ := waiting["inputRequests"].(map[string]any)
			q, _ := reqs["policy-confirm"].(map[string]any)
			params, _ := q["params"].(map[string]any)
			if q["method"] != "elicitation/create" || params["message"] != "Build the report?" {
				t.Fatalf("%s: the task asks %v, want the rule's question", tc.name, waiting["inputRequests"])
			}
			if pa.report.Load() != before {
				t.Fatalf("%s: the agent ran before the person answered", tc.name)
			}
			c.ok(c.do(extRequest{method: "tasks/update", params: map[string]any{"taskId": id,
				"inputResponses": map[string]any{"policy-confirm": tc.answer}}}), "tasks/update")
			done := c.waitStatus(id, "completed")
			got := resultText(done)
			r, _ := done["result"].(map[string]any)
			switch {
			case (pa.report.Load() > before) != tc.runs:
				t.Errorf("%s: the agent ran: %v, want %v", tc.name, pa.report.Load() > before, tc.runs)
			case tc.runs && (got != tc.want || r["isError"] == true):
				t.Errorf("%s: the task's result = %v, want %q", tc.name, r, tc.want)
			case !tc.runs && r["isError"] != true:
				t.Errorf("%s: the task's result = %v, want a refusal", tc.name, r)
			case tc.want != "" && got != tc.want:
				t.Errorf("%s: the task's result = %q, want %q", tc.name, got, tc.want)
			case !tc.runs && tc.want == "" && !strings.HasPrefix(got, "The call was not run: "):
				t.Errorf("%s: the task's result = %q, want the call not run", tc.name, got)
			}
			waitFor(t, "the call log to say "+tc.log, func() bool { return e.policyOf("report") == tc.log })
		}
	})

	t.Run("2025-11-25", func(t *testing.T) {
		for _, tc := range cases {
			var asked atomic.Int32
			c := e.tasksClient(e.clientKey, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked.Add(1)
					res := &mcp.ElicitResult{Action: tc.answer["action"].(string)}
					if content, ok := tc.answer["content"].(map[string]any); ok {
						res.Content = content
					}
					if r.Params.Message != "Build the report?" {
						t.Errorf("%s: asked %q, want the rule's question", tc.name, r.Params.Message)
					}
					return res, nil
				},
			})
			before := pa.report.Load()
			task := c.start("report", `{}`, `{"ttl":60000}`)
			c.waitStatus(task.TaskID, "input_required")
			if pa.report.Load() != before {
				t.Fatalf("%s: the agent ran before the person answered", tc.name)
			}
			if tc.name == "empty" {
				// A form without its field does not answer the question
				// (the session checks it against the form): the task goes
				// on waiting, and the agent never runs; here it is
				// cancelled.
				ended := make(chan error, 1)
				go func() { _, err := c.result(task.TaskID); ended <- err }()
				waitFor(t, "the person to be asked", func() bool { return asked.Load() == 1 })
				if got := c.waitStatus(task.TaskID, "input_required"); got.Status != "input_required" {
					t.Fatalf("%s: after a form without its field the task is %q", tc.name, got.Status)
				}
				if _, err := c.cancel(task.TaskID); err != nil {
					t.Fatalf("%s: tasks/cancel: %v", tc.name, err)
				}
				<-ended
				if pa.report.Load() != before {
					t.Errorf("%s: the agent ran", tc.name)
				}
				continue
			}
			// tasks/result puts the question to the client, and ends with
			// the task's result.
			res, err := c.result(task.TaskID)
			if err != nil {
				t.Fatalf("%s: tasks/result: %v", tc.name, err)
			}
			got := text(res)
			switch {
			case asked.Load() != 1:
				t.Errorf("%s: the person was asked %d times, want once", tc.name, asked.Load())
			case (pa.report.Load() > before) != tc.runs:
				t.Errorf("%s: the agent ran: %v, want %v", tc.name, pa.report.Load() > before, tc.runs)
			case tc.runs && (got != tc.want || res.IsError):
				t.Errorf("%s: tasks/result = %q (isError %v), want %q", tc.name, got, res.IsError, tc.want)
			case !tc.runs && !res.IsError:
				t.Errorf("%s: tasks/result = %q, want a refusal", tc.name, got)
			case tc.want != "" && got != tc.want:
				t.Errorf("%s: tasks/result = %q, want %q", tc.name, got, tc.want)
			}
			want := "completed"
			if !tc.runs {
				want = "failed" // an isError result is a failed task in 2025-11-25
			}
			c.waitStatus(task.TaskID, want)
			waitFor(t, "the call log to say "+tc.log, func() bool { return e.policyOf("report") == tc.log })
		}
	})
}
