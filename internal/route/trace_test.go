package route

import (
	"context"
	"testing"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// TestTraceOffAllocatesNothing: with no tracer and no trace context, the
// tracing hooks of a call neither make a span nor allocate.
func TestTraceOffAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	m := &agentproto.Message{Type: agentproto.TypeCall}
	req := &Request{Kind: agentproto.KindTool, Name: "echo"}
	c := &Call{}
	allocs := testing.AllocsPerRun(100, func() {
		cctx := c.startSpan(ctx, req)
		injectTrace(cctx, m)
		c.endSpan()
	})
	if allocs != 0 || c.span != nil || m.TraceParent != "" {
		t.Errorf("tracing off: %v allocations, span %v, traceparent %q; want none", allocs, c.span, m.TraceParent)
	}
}
