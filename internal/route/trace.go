package route

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// The route span covers a call from the choice of a replica to its end:
// sending it, and waiting for the answer (across a question to the user).
// Its W3C trace context travels to the agent in the call message, so the
// agent's own spans become its children. With no tracer there is no span,
// and the trace context in ctx (a client's, say) is passed on unchanged.

// w3c reads and writes W3C trace context; the gateway always speaks it to
// agents, whatever the agent's own tracing uses.
var w3c = propagation.TraceContext{}

// startSpan starts the call's route span if req has a tracer, and returns
// the context to send the call in.
func (c *Call) startSpan(ctx context.Context, req *Request) context.Context {
	if req.Tracer == nil {
		return ctx
	}
	ctx, c.span = req.Tracer.Start(ctx, "route "+req.Kind+" "+req.Name,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("spacefix.call.kind", req.Kind),
			attribute.String("spacefix.call.id", c.res.ID),
			attribute.String("gen_ai.tool.name", req.Name),
		))
	return ctx
}

// endSpan records how the call ended on its route span, once.
func (c *Call) endSpan() {
	if c.span == nil {
		return
	}
	out := c.res.Outcome.String()
	if c.res.Replica != nil {
		c.span.SetAttributes(attribute.String("spacefix.replica.id", c.res.Replica.ID))
	}
	c.span.SetAttributes(attribute.String("spacefix.outcome", out))
	if out != "ok" {
		// The outcome only: the agent's message may hold the user's data.
		c.span.SetStatus(codes.Error, out)
	}
	c.span.End()
	c.span = nil
}

// injectTrace puts the trace context of ctx, if any, into a call message.
func injectTrace(ctx context.Context, m *agentproto.Message) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	w3c.Inject(ctx, msgCarrier{m})
}

// msgCarrier writes the W3C headers into a call message's fields.
type msgCarrier struct{ m *agentproto.Message }

func (c msgCarrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.m.TraceParent
	case "tracestate":
		return c.m.TraceState
	}
	return ""
}

func (c msgCarrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.m.TraceParent = value
	case "tracestate":
		c.m.TraceState = value
	}
}

func (c msgCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }
