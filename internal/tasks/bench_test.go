package tasks_test

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/teststores"
	"github.com/spacefix/spacefix/internal/tasks"
)

// The benchmarks run on SQLite (a file in a temporary directory) with the
// test playing an agent that answers every call at once; see
// docs/benchmarks.md for the figures and how to rerun them.

const running = 60

// answer plays the agent: every call gets okResult at once.
func (e *env) answerAll() {
	go func() {
		for m := e.tr.Next(); m != nil; m = e.tr.Next() {
			if m.Type == agentproto.TypeCall {
				e.tr.Reply(&agentproto.Message{Type: agentproto.TypeResult, ID: m.ID, Result: json.RawMessage(okResult)})
			}
		}
	}()
}

func (e *env) pick(b *testing.B) (*route.Call, *agents.Tool) {
	tool := e.reg.Snapshot(e.proj.ID).Tools["report"]
	call, res := route.Pick(context.Background(), e.reg, e.proj.ID, func(s *agents.Snapshot) ([]*agents.Replica, time.Time, bool) {
		return tool.Replicas, tool.GraceUntil, true
	}, route.Request{Kind: agentproto.KindTool, Name: "report", Args: json.RawMessage(`{}`), Wait: time.Minute})
	if call == nil {
		b.Fatalf("Pick: %v", res.Outcome)
	}
	return call, tool
}

func benchEnv(b *testing.B) *env {
	return newEnv(b, teststores.SQLite(b), store.ProjectSettings{}, tasks.Options{})
}

// BenchmarkTaskRun is a task-augmented call, start to stored result;
// BenchmarkPlainCall the same call without a task.
func BenchmarkTaskRun(b *testing.B) {
	e := benchEnv(b)
	e.answerAll()
	ctx := context.Background()
	for b.Loop() {
		call, tool := e.pick(b)
		t, err := e.m.Run(ctx, tasks.Spec{Key: e.key, Tool: tool, Call: call, Era: "2026-07-28"})
		if err != nil {
			b.Fatal(err)
		}
		if got, err := e.m.Wait(ctx, e.owner(), e.proj.ID, t.ID); err != nil || got.Status != tasks.Completed {
			b.Fatalf("Wait = %s, %v", got.Status, err)
		}
	}
}

func BenchmarkPlainCall(b *testing.B) {
	e := benchEnv(b)
	e.answerAll()
	ctx := context.Background()
	for b.Loop() {
		call, _ := e.pick(b)
		call, res := call.Send(ctx)
		if call != nil {
			res = call.Wait(ctx, nil)
		}
		if res.Outcome != route.OK {
			b.Fatal(res.Outcome)
		}
		e.calls.Add(store.Call{Name: "report"})
	}
}

// BenchmarkTaskGet is tasks/get of an ended task (read from the store).
func BenchmarkTaskGet(b *testing.B) {
	e := benchEnv(b)
	e.answerAll()
	ctx := context.Background()
	call, tool := e.pick(b)
	t, err := e.m.Run(ctx, tasks.Spec{Key: e.key, Tool: tool, Call: call, Era: "2026-07-28"})
	if err != nil {
		b.Fatal(err)
	}
	e.m.Wait(ctx, e.owner(), e.proj.ID, t.ID)
	for b.Loop() {
		if _, err := e.m.Get(ctx, e.owner(), e.proj.ID, t.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTasksRunning reports the memory (heap and stacks) one running task holds, from 60
// at once (the in-memory agent's queue holds 64 calls): multiply by 1,000.
func BenchmarkTasksRunning(b *testing.B) {
	e := benchEnv(b)
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		for range running {
			call, tool := e.pick(b)
			if _, err := e.m.Run(ctx, tasks.Spec{Key: e.key, Tool: tool, Call: call, Era: "2026-07-28"}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc+after.StackInuse)-int64(before.HeapAlloc+before.StackInuse))/running, "B/task")
		for m := e.tr.Sent(); len(m) > 0; m = e.tr.Sent() {
			for _, c := range m {
				e.tr.Reply(&agentproto.Message{Type: agentproto.TypeResult, ID: c.ID, Result: json.RawMessage(okResult)})
			}
		}
		e.m.WaitIdle(ctx)
		b.StartTimer()
	}
}
