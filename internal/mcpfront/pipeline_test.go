package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolStagesOrder holds the order of the tools/call stages to the one
// the package comment of pipeline.go states, and shapeAt to shape's place.
func TestToolStagesOrder(t *testing.T) {
	var got []string
	for _, s := range toolStages {
		got = append(got, fmt.Sprintf("%T", s))
	}
	want := []string{
		"mcpfront.admitStage", "mcpfront.resumeStage", "mcpfront.resolveStage", "mcpfront.policyStage",
		"mcpfront.cacheStage", "mcpfront.repeatStage", "mcpfront.shapeStage", "mcpfront.runStage",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("toolStages (-want +got):\n%s", d)
	}
	if _, ok := toolStages[shapeAt].(shapeStage); !ok {
		t.Errorf("toolStages[shapeAt] = %T, want shapeStage", toolStages[shapeAt])
	}
}

// countingPolicy stands in for the policy stage: it counts the calls that
// pass the policy point.
type countingPolicy struct{ n *atomic.Int64 }

func (p countingPolicy) serve(ctx context.Context, _ *Pipeline, c *toolCall, next next) (*mcp.CallToolResult, error) {
	p.n.Add(1)
	return next.run(ctx, c)
}

// TestPolicySeesEveryCallOnce holds the pipeline's promise to the policy
// point: every kind of tools/call that reaches an agent passes it exactly
// once, whichever entry took it — the early path or go-sdk's handler, in
// either era, a task of either era, a job.
func TestPolicySeesEveryCallOnce(t *testing.T) {
	at := slices.IndexFunc(toolStages[:], func(s stage) bool { _, ok := s.(policyStage); return ok })
	var n atomic.Int64
	toolStages[at] = countingPolicy{&n}
	defer func() { toolStages[at] = policyStage{} }()

	e := newStageEnv(t)
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
			return task(e.callModern("key", "slow", `{}`, `{"extensions":{"`+tasksExtension+`":{}}}`))
		}, "task", false},
		{"session, a task", func() string {
			return task(withTasks("tools/call", `{"name":"slow","arguments":{},"task":{"ttl":60000}}`))
		}, "task", false},
	} {
		n.Store(0)
		_, _, early := e.f.EarlyStats()
		if got := tc.call(); got != tc.want {
			t.Errorf("%s: answer %q, want %q", tc.name, got, tc.want)
		}
		if got := n.Load(); got != 1 {
			t.Errorf("%s: passed the policy point %d times, want once", tc.name, got)
		}
		if _, _, now := e.f.EarlyStats(); (now > early) != tc.early {
			t.Errorf("%s: answered before go-sdk: %v, want %v", tc.name, now > early, tc.early)
		}
	}
}

// recordingStage stands in for a stage: it notes its name, settles the
// call when told to, and goes on.
type recordingStage struct {
	name   string
	trail  *[]string
	settle bool
}

func (s recordingStage) serve(ctx context.Context, _ *Pipeline, c *toolCall, next next) (*mcp.CallToolResult, error) {
	*s.trail = append(*s.trail, s.name)
	if s.settle {
		c.settled = true
	}
	if s.name == "run" {
		return nil, nil
	}
	return next.run(ctx, c)
}

// TestSettledCallSkipsToShape holds the runner's one rule: once a stage
// settles a call, the stages up to shape are skipped but the policy point
// (which shapes the answer for its caller), and shape (then run, which
// shape decides on) is what follows.
func TestSettledCallSkipsToShape(t *testing.T) {
	saved := toolStages
	defer func() { toolStages = saved }()
	names := []string{"admit", "resume", "resolve", "policy", "cache", "repeat", "shape", "run"}
	for settleAt := range names {
		var trail []string
		for i, n := range names {
			toolStages[i] = recordingStage{name: n, trail: &trail, settle: i == settleAt}
		}
		if _, err := (next{nil, 0}).run(context.Background(), &toolCall{}); err != nil {
			t.Fatal(err)
		}
		want := names
		switch {
		case settleAt < policyAt:
			want = append(slices.Clone(names[:settleAt+1]), "policy")
			want = append(want, names[shapeAt:]...)
		case settleAt < shapeAt:
			want = append(slices.Clone(names[:settleAt+1]), names[shapeAt:]...)
		}
		if d := cmp.Diff(want, trail); d != "" {
			t.Errorf("settled at %s (-want +got):\n%s", names[settleAt], d)
		}
	}
}
