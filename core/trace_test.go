package core

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

// TestTraceContextFromCallMessage: a valid traceparent becomes the
// handler's remote parent and the Call's strings; a missing or malformed
// one leaves both empty.
func TestTraceContextFromCallMessage(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name          string
		parent, state string
		wantParent    string
		wantState     string
	}{
		{"valid", tp, "vendor=x", tp, "vendor=x"},
		{"none", "", "", "", ""},
		{"malformed", "00-zz-00f067aa0ba902b7-01", "vendor=x", "", ""},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var info Call
			ctx := withTrace(context.Background(), &info, agentproto.Message{TraceParent: tc.parent, TraceState: tc.state})
			if info.TraceParent != tc.wantParent || info.TraceState != tc.wantState {
				t.Errorf("Call trace context = %q, %q; want %q, %q", info.TraceParent, info.TraceState, tc.wantParent, tc.wantState)
			}
			sc := trace.SpanContextFromContext(ctx)
			if sc.IsValid() != (tc.wantParent != "") {
				t.Fatalf("span context in ctx valid = %v; want %v", sc.IsValid(), tc.wantParent != "")
			}
			if sc.IsValid() && (sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" || !sc.IsRemote() || !sc.IsSampled()) {
				t.Errorf("span context %v; want the remote, sampled span of the traceparent", sc)
			}
			if got := sc.TraceState().String(); got != tc.wantState {
				t.Errorf("tracestate in ctx %q; want %q", got, tc.wantState)
			}
		})
	}
}
