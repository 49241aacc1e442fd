package e2e

import (
	"testing"
	"time"
)

// Two gateways on PostgreSQL and NATS: a task created through A, whose
// agent is connected to A, is polled, answered and cancelled through B.
// State is in the store, so B answers tasks/get; an answer and a cancel
// reach the runner, A, over the bus.
func TestTasksAcrossGateways(t *testing.T) {
	t.Parallel()
	var url string
	a := newEnv(t, onPostgres(&url), onBus(startNATS(t)))
	b := a.sibling()
	release := make(chan struct{})
	cancelled := make(chan struct{}, 4)
	startExtAgent(a, release, cancelled)
	ca, cb := a.extClient(a.clientKey), b.extClient(b.clientKey)
	waitFor(t, "B to list the agent on A's tools", func() bool {
		_, ok := b.gw.Registry().Snapshot(b.project.ID).Tools["purge"]
		return ok
	})

	// input_required on A, answered through B.
	id, _ := ca.start("purge", nil)["taskId"].(string)
	waiting := cb.waitStatus(id, "input_required")
	reqs, _ := waiting["inputRequests"].(map[string]any)
	if len(reqs) != 1 {
		t.Fatalf("B's tasks/get: inputRequests %v, want one", waiting["inputRequests"])
	}
	responses := map[string]any{}
	for k := range reqs {
		responses[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	}
	cb.ok(cb.do(extRequest{method: "tasks/update", params: map[string]any{"taskId": id, "inputResponses": responses}}), "tasks/update through B")
	if got := resultText(cb.waitStatus(id, "completed")); got != "Deleted them." {
		t.Errorf("the task answered through B ended with %q, want %q", got, "Deleted them.")
	}
	if got := resultText(ca.waitStatus(id, "completed")); got != "Deleted them." {
		t.Errorf("A's tasks/get of the same task = %q", got)
	}

	// A running task on A, cancelled through B: A's agent hears it.
	hold, _ := ca.start("report", map[string]any{"hold": true})["taskId"].(string)
	cb.waitStatus(hold, "working")
	cb.ok(cb.do(extRequest{method: "tasks/cancel", params: map[string]any{"taskId": hold}}), "tasks/cancel through B")
	select {
	case <-cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler on A's agent was not cancelled within 20 s of tasks/cancel through B")
	}
	if got := ca.waitStatus(hold, "cancelled"); got["result"] != nil {
		t.Errorf("the task cancelled through B carries a result: %v", got)
	}

	// A task created through B runs on A's agent and completes; both
	// gateways see it.
	viaB, _ := cb.start("report", nil)["taskId"].(string)
	close(release)
	if got := resultText(ca.waitStatus(viaB, "completed")); got != "Report ready" {
		t.Errorf("a task created through B, read through A = %q", got)
	}

	// Each task is one call in the log, whichever gateway ran it.
	waitFor(t, "the three tasks in the call log", func() bool {
		n := 0
		for _, c := range a.calls() {
			if c.TaskID != "" && (c.TaskID == id || c.TaskID == hold || c.TaskID == viaB) {
				n++
			}
		}
		return n == 3
	})
}
