package tracing

import (
	"context"
	"testing"
)

// clearEnv unsets every variable that switches exporting, for one test.
func clearEnv(t *testing.T) {
	for _, k := range []string{EnvEndpoint, EnvTracesEndpoint, EnvSDKDisabled, EnvTracesExporter} {
		t.Setenv(k, "")
	}
}

// TestTraceNoEnvNoExporter: without an OTLP endpoint, or with traces
// switched off, no provider (and so no exporter) is made.
func TestTraceNoEnvNoExporter(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"nothing set", nil},
		{"sdk disabled", map[string]string{EnvEndpoint: "http://127.0.0.1:4318", EnvSDKDisabled: "true"}},
		{"exporter none", map[string]string{EnvTracesEndpoint: "http://127.0.0.1:4318/v1/traces", EnvTracesExporter: "none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tp, err := FromEnv(context.Background(), "test")
			if err != nil || tp != nil {
				t.Fatalf("FromEnv = %v, %v; want no provider", tp, err)
			}
		})
	}
}

// TestTraceEnvMakesExporter: either endpoint variable switches traces on.
func TestTraceEnvMakesExporter(t *testing.T) {
	for _, k := range []string{EnvEndpoint, EnvTracesEndpoint} {
		t.Run(k, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(k, "http://127.0.0.1:4318")
			tp, err := FromEnv(context.Background(), "test")
			if err != nil || tp == nil {
				t.Fatalf("FromEnv = %v, %v; want a provider", tp, err)
			}
			if err := tp.Shutdown(context.Background()); err != nil {
				t.Errorf("shutdown with nothing queued: %v", err)
			}
		})
	}
}

// TestTraceEndpointForLog: the logged endpoint is where spans go, without
// a password.
func TestTraceEndpointForLog(t *testing.T) {
	for _, tc := range []struct{ base, traces, want string }{
		{"http://collector:4318", "", "http://collector:4318/v1/traces"},
		{"http://collector:4318/", "", "http://collector:4318/v1/traces"},
		{"http://a:4318", "https://b/otlp/traces", "https://b/otlp/traces"},
		{"https://user:secret@collector:4318", "", "https://collector:4318/v1/traces"},
	} {
		clearEnv(t)
		t.Setenv(EnvEndpoint, tc.base)
		t.Setenv(EnvTracesEndpoint, tc.traces)
		if got := Endpoint(); got != tc.want {
			t.Errorf("Endpoint() with %q, %q = %q; want %q", tc.base, tc.traces, got, tc.want)
		}
	}
}
