package pipeline

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Traces of tools/call. The front span covers the MCP request; route adds a
// child span for the delivery and passes its trace context to the agent. A
// client that sends W3C trace context in params._meta (the MCP convention:
// "traceparent", "tracestate") gets its trace continued; otherwise each call
// starts a trace. With tracing off (no tracer) nothing is allocated for
// calls without a client trace context, and a client's trace context still
// reaches the agent.

// w3c reads the client's trace context.
var w3c = propagation.TraceContext{}

// Serve is [Pipeline.serveCall] inside the front span.
func (f *Pipeline) Serve(ctx context.Context, req *Request) (*mcp.CallToolResult, error) {
	if req.Meta["traceparent"] != nil {
		ctx = w3c.Extract(ctx, metaCarrier(req.Meta))
	}
	if f.tracer == nil {
		return f.serveCall(ctx, req)
	}
	name := "tools/call"
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", "tools/call"),
		attribute.String("gen_ai.operation.name", "execute_tool"),
	}
	// Only a tool the key may call names the span: names stay few.
	if c := toolCallFrom(ctx); c != nil && c.tool != nil {
		t := c.tool
		name += " " + t.Name
		attrs = append(attrs, attribute.String("gen_ai.tool.name", t.Name))
	}
	if key, ok := KeyFrom(req.Token); ok {
		attrs = append(attrs, attribute.Int64("spacefix.project.id", key.ProjectID))
	}
	ctx, span := f.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	defer span.End()
	out, err := f.serveCall(ctx, req)
	switch {
	case err != nil:
		span.SetAttributes(attribute.String("error.type", "jsonrpc"))
		span.SetStatus(codes.Error, "the request failed")
	case out != nil && out.IsError:
		// The text may hold the user's data; the log has it.
		span.SetAttributes(attribute.String("error.type", "tool_error"))
		span.SetStatus(codes.Error, "the tool returned an error")
	}
	return out, err
}

// metaCarrier reads W3C trace context from a request's _meta.
type metaCarrier mcp.Meta

func (c metaCarrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}

func (c metaCarrier) Set(string, string) {}

func (c metaCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// TracerName is the instrumentation scope of the gateway's spans.
const TracerName = "github.com/spacefix/spacefix"
