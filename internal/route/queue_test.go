package route_test

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/route/routetest"
)

// These run calls to a replica that reads nothing: its transport's queue
// is full, as the socket of an agent behind a slow link or stuck.

// stuck connects a replica whose queue holds one message, and fills it
// with a first call that is never read.
func stuck(t *testing.T, reg *agents.Registry) (*routetest.Transport, *route.Conn) {
	t.Helper()
	tr := routetest.NewQueue(1)
	rep := &agents.Replica{ID: "r-stuck", ProjectID: 1, AgentKey: "key_a", Since: time.Now(), Reg: echoRegistration()}
	conn := route.NewConn(tr, quiet, route.Events{})
	rep.Conn = conn
	reg.Add(rep, nil)
	served := make(chan struct{})
	go func() {
		defer close(served)
		conn.Serve(context.Background())
		reg.Remove(rep)
	}()
	t.Cleanup(func() { tr.Close(""); <-served })
	deliver(t.Context(), reg, request(30*time.Second)) // fills the queue
	synctest.Wait()
	return tr, conn
}

func echoRegistration() *agentproto.Registration {
	return &agentproto.Registration{Protocol: agentproto.Version, Name: "a",
		Tools: []agentproto.Tool{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}}}
}

// A call that cannot even be queued to its replica ends at its wait with
// the timeout message, not when the agent reads again.
func TestRouteTimeoutWhileQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry()
		stuck(t, reg)
		req := request(1500 * time.Millisecond)
		req.Exposed = "a_echo"
		start := time.Now()
		res := <-deliver(t.Context(), reg, req)
		if res.Outcome != route.TimedOut || res.Detail != `Request for tool "a_echo" timed out after 1500ms` {
			t.Fatalf("Result = %v %q, want the timeout message", res.Outcome, res.Detail)
		}
		if waited := time.Since(start); waited != 1500*time.Millisecond {
			t.Errorf("timed out after %v, want 1.5s", waited)
		}
		if n := res.Replica.Inflight(); n != 1 {
			t.Errorf("in flight = %d after the timeout, want 1 (the first call)", n)
		}
	})
}

// A caller that leaves while its call waits for room is let go at once.
func TestRouteCancelWhileQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry()
		stuck(t, reg)
		ctx, cancel := context.WithCancel(t.Context())
		done := deliver(ctx, reg, request(30*time.Second))
		time.Sleep(time.Second)
		start := time.Now()
		cancel()
		res := <-done
		if res.Outcome != route.Cancelled || res.Detail != "" {
			t.Fatalf("Result = %v %q, want cancelled", res.Outcome, res.Detail)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("the caller was let go %v after it left, want at once", waited)
		}
	})
}

// Closing a connection whose queue is full returns at once, and the calls
// in flight fail as disconnected.
func TestRouteCloseWhileQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry()
		tr, conn := stuck(t, reg)
		start := time.Now()
		conn.Close("gateway shutting down")
		if waited := time.Since(start); waited != 0 {
			t.Errorf("Close took %v, want no wait", waited)
		}
		if got := tr.Reason(); got != "gateway shutting down" {
			t.Errorf("transport closed with %q, want the goodbye's reason", got)
		}
		<-conn.Done()
	})
}
