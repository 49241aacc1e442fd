package mcpfront

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/mcpfront/stateless"
)

// decisions counts the policy's decisions, as /metrics does.
type decisions struct{ n atomic.Int64 }

func (d *decisions) ObserveDecision(int64, string, string, string)         { d.n.Add(1) }
func (d *decisions) ObserveInterceptor(int64, string, time.Duration, bool) {}

// TestPolicySeesEveryCallOnce holds the pipeline's promise to the policy
// point: every kind of tools/call that reaches an agent passes it exactly
// once, whichever entry took it — the early path or go-sdk's handler, in
// either era, a task of either era, a job. The project's one rule, in
// audit mode, matches every call, so each pass is one decision counted.
func TestPolicySeesEveryCallOnce(t *testing.T) {
	var n decisions
	e := newStageEnv(t, func(o *Options) { o.Policy.Observe = &n })
	if _, err := e.st.SavePolicy(context.Background(), e.proj.ID, 0,
		json.RawMessage(`{"rules":[{"name":"every-call","on":"call","effect":"deny","mode":"audit"}]}`), "test"); err != nil {
		t.Fatal(err)
	}
	plain := e.session("key", `{}`)
	withTasks := e.session("key", `{"tasks":{"requests":{"tools":{"call":{}}}}}`)
	text := func(a rpcAnswer) string {
		s, isErr := ppText(t, a)
		if isErr {
			t.Errorf("isError result %q", s)
		}
		return s
	}
	task := func(a rpcAnswer) string {
		if a.Error != nil {
			t.Fatalf("error %d %q, want a task", a.Error.Code, a.Error.Message)
		}
		var r struct {
			Task *struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
			TaskID string `json:"taskId"`
		}
		if err := json.Unmarshal(a.Result, &r); err != nil || (r.TaskID == "" && (r.Task == nil || r.Task.TaskID == "")) {
			t.Fatalf("result %s, want a task", a.Result)
		}
		return "task"
	}
	for _, tc := range []struct {
		name  string
		call  func() string
		want  string
		early bool // answered before go-sdk
	}{
		{"2026-07-28, early", func() string { return text(e.callModern("key", "echo", `{}`, `{}`)) }, "as shared", true},
		{"2026-07-28, go-sdk", func() string {
			a, _ := e.send("key", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"other":1,`+ppMeta(`{}`)+`}}`, ppHeaders("tools/call", "echo"))
			return text(a)
		}, "as shared", false},
		{"session, early", func() string { return text(plain("tools/call", `{"name":"echo","arguments":{}}`)) }, "as shared", true},
		{"session, go-sdk", func() string { return text(plain("tools/call", `{"name":"echo","arguments":{},"other":1}`)) }, "as shared", false},
		{"session, a job", func() string { return text(plain("tools/call", `{"name":"slow","arguments":{}}`)) }, "as shared", true},
		{"2026-07-28, a task", func() string {
			return task(e.callModern("key", "slow", `{}`, `{"extensions":{"`+stateless.Extension+`":{}}}`))
		}, "task", false},
		{"session, a task", func() string {
			return task(withTasks("tools/call", `{"name":"slow","arguments":{},"task":{"ttl":60000}}`))
		}, "task", false},
	} {
		n.n.Store(0)
		_, _, early := e.f.EarlyStats()
		if got := tc.call(); got != tc.want {
			t.Errorf("%s: answer %q, want %q", tc.name, got, tc.want)
		}
		if got := n.n.Load(); got != 1 {
			t.Errorf("%s: passed the policy point %d times, want once", tc.name, got)
		}
		if _, _, now := e.f.EarlyStats(); (now > early) != tc.early {
			t.Errorf("%s: answered before go-sdk: %v, want %v", tc.name, now > early, tc.early)
		}
	}
}
