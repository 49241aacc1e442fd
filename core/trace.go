package core

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

// Traces: the gateway sends the W3C trace context of its span for a call in
// the call message. core puts it into the handler's context as the remote
// parent span context, with the OTel trace API only — not the OTel SDK, nor
// the global otel package: any tracer started from that context, global or
// not, finds its parent there, and agents that do not trace link no SDK.
// W3C is the wire format whatever propagator the agent's process has set.

var w3c = propagation.TraceContext{}

// withTrace records the call's trace context in info and, when it is
// valid, makes it the remote parent in ctx.
func withTrace(ctx context.Context, info *Call, m agentproto.Message) context.Context {
	if m.TraceParent == "" {
		return ctx
	}
	out := w3c.Extract(ctx, traceCarrier{m.TraceParent, m.TraceState})
	if !trace.SpanContextFromContext(out).IsValid() {
		return ctx // a malformed traceparent is ignored, as W3C says
	}
	info.TraceParent, info.TraceState = m.TraceParent, m.TraceState
	return out
}

// traceCarrier holds a call message's trace context for the propagator.
type traceCarrier struct{ parent, state string }

func (c traceCarrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.parent
	case "tracestate":
		return c.state
	}
	return ""
}

func (traceCarrier) Set(string, string) {}

func (traceCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }
