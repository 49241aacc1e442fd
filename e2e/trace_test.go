package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/spacefix/spacefix/core"
)

// seenCall is what a traced tool's handler saw of its call.
type seenCall struct {
	call core.Call
	span trace.SpanContext // the remote parent in the handler's context
}

// startTracedAgent runs an agent with a tool "echo" that reports what it saw.
func startTracedAgent(e *env) <-chan seenCall {
	seen := make(chan seenCall, 16)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(e.t, core.AddTool(a, "echo", "Says ok.", func(ctx context.Context, in Empty) (string, error) {
			c, _ := core.CallFrom(ctx)
			seen <- seenCall{call: c, span: trace.SpanContextFromContext(ctx)}
			return "ok", nil
		}))
	})
	return seen
}

func nextSeen(t *testing.T, seen <-chan seenCall) seenCall {
	t.Helper()
	select {
	case s := <-seen:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never ran")
		return seenCall{}
	}
}

// callWithMeta calls a tool with _meta set.
func callWithMeta(t *testing.T, cs *mcp.ClientSession, name string, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: name, Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// spanNamed waits for the ended span of trace tid named name.
func spanNamed(t *testing.T, sr *tracetest.SpanRecorder, tid trace.TraceID, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	waitFor(t, fmt.Sprintf("span %q of trace %s", name, tid), func() bool {
		for _, s := range sr.Ended() {
			if s.Name() == name && s.SpanContext().TraceID() == tid {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}

// checkSpans checks the front and route spans of one call against what the
// agent saw, and returns the front span.
func checkSpans(t *testing.T, sr *tracetest.SpanRecorder, got seenCall) sdktrace.ReadOnlySpan {
	t.Helper()
	if !got.span.IsValid() || !got.span.IsRemote() {
		t.Fatalf("the handler's context holds span context %+v; want a valid remote one", got.span)
	}
	if want := fmt.Sprintf("00-%s-%s-01", got.span.TraceID(), got.span.SpanID()); got.call.TraceParent != want {
		t.Errorf("core.Call.TraceParent = %q; want %q", got.call.TraceParent, want)
	}
	tid := got.span.TraceID()
	front := spanNamed(t, sr, tid, "tools/call echo")
	route := spanNamed(t, sr, tid, "route tool echo")
	if front.SpanKind() != trace.SpanKindServer {
		t.Errorf("front span kind %v; want server", front.SpanKind())
	}
	for _, s := range []sdktrace.ReadOnlySpan{front, route} {
		if v := attr(s, "gen_ai.tool.name"); v != "echo" {
			t.Errorf("span %q: gen_ai.tool.name = %q; want echo", s.Name(), v)
		}
	}
	if route.Parent().SpanID() != front.SpanContext().SpanID() {
		t.Errorf("route span's parent is %s; want the front span %s", route.Parent().SpanID(), front.SpanContext().SpanID())
	}
	if got.span.SpanID() != route.SpanContext().SpanID() {
		t.Errorf("the agent's parent span is %s; want the route span %s", got.span.SpanID(), route.SpanContext().SpanID())
	}
	if v := attr(route, "spacefix.outcome"); v != "ok" {
		t.Errorf("route span outcome %q; want ok", v)
	}
	if v := attr(route, "spacefix.call.id"); v != got.call.ID {
		t.Errorf("route span call id %q; want the agent's %q", v, got.call.ID)
	}
	return front
}

// TestTraceToolCall: a tools/call makes a front span and a route span
// below it, and the agent's handler gets the route span as its remote
// parent; a client's _meta.traceparent is continued.
func TestTraceToolCall(t *testing.T) {
	t.Parallel()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	e := newEnv(t, func(o *envOptions) { o.traces = tp })
	seen := startTracedAgent(e)

	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)

		// No trace context from the client: the gateway starts a trace.
		if got := text(call(t, cs, "echo", map[string]any{})); got != "ok" {
			t.Fatalf("echo = %q", got)
		}
		front := checkSpans(t, sr, nextSeen(t, seen))
		if front.Parent().IsValid() {
			t.Errorf("front span has parent %v; want a new trace", front.Parent())
		}

		// The client's trace context in _meta: the gateway continues it.
		var tid trace.TraceID
		rand.Read(tid[:]) // a trace of its own for each version
		client := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID:    tid,
			SpanID:     trace.SpanID{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
			TraceFlags: trace.FlagsSampled,
		})
		tparent := fmt.Sprintf("00-%s-%s-01", client.TraceID(), client.SpanID())
		callWithMeta(t, cs, "echo", mcp.Meta{"traceparent": tparent, "tracestate": "vendor=x"})
		got := nextSeen(t, seen)
		if got.span.TraceID() != client.TraceID() {
			t.Fatalf("the agent saw trace %s; want the client's %s", got.span.TraceID(), client.TraceID())
		}
		front = checkSpans(t, sr, got)
		if p := front.Parent(); p.SpanID() != client.SpanID() || !p.IsRemote() {
			t.Errorf("front span's parent is %v; want the client's remote span %s", p, client.SpanID())
		}
		if got.call.TraceState != "vendor=x" {
			t.Errorf("core.Call.TraceState = %q; want the client's vendor=x", got.call.TraceState)
		}
	})
}

// TestTraceOffPassesClientContext: without a tracer the gateway makes no
// span, and the agent gets the client's trace context as it was sent, or
// none.
func TestTraceOffPassesClientContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seen := startTracedAgent(e)
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		call(t, cs, "echo", map[string]any{})
		if got := nextSeen(t, seen); got.call.TraceParent != "" || got.span.IsValid() {
			t.Errorf("without client context the agent saw %q (span %v); want none", got.call.TraceParent, got.span)
		}
		tparent := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		callWithMeta(t, cs, "echo", mcp.Meta{"traceparent": tparent})
		if got := nextSeen(t, seen); got.call.TraceParent != tparent {
			t.Errorf("the agent saw traceparent %q; want the client's %q", got.call.TraceParent, tparent)
		}
		// A malformed one goes nowhere.
		callWithMeta(t, cs, "echo", mcp.Meta{"traceparent": "00-zz"})
		if got := nextSeen(t, seen); got.call.TraceParent != "" {
			t.Errorf("a malformed traceparent reached the agent as %q", got.call.TraceParent)
		}
	})
}
