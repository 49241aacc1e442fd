// Package tracing sets up the gateway's OpenTelemetry traces: an OTLP/HTTP
// exporter when the standard OTEL_EXPORTER_OTLP_* variables ask for one,
// nothing otherwise. It is the one place that depends on the OTel SDK; the
// rest of the gateway sees only the trace API (go.opentelemetry.io/otel/trace),
// where a nil provider means "no traces" and costs nothing.
package tracing

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ScopeName is the instrumentation scope of the gateway's spans.
const ScopeName = "github.com/spacefix/spacefix"

// Environment variables that switch exporting on or off; the exporter reads
// the rest of OTEL_EXPORTER_OTLP_* (headers, timeout, TLS) itself.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
)

// Enabled reports whether the environment asks for traces: an OTLP endpoint
// is set, and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none
// turns them off.
func Enabled() bool {
	if os.Getenv(EnvEndpoint) == "" && os.Getenv(EnvTracesEndpoint) == "" {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(os.Getenv(EnvSDKDisabled)), "true") {
		return false
	}
	return !strings.EqualFold(strings.TrimSpace(os.Getenv(EnvTracesExporter)), "none")
}

// FromEnv returns a tracer provider that batches spans to the OTLP/HTTP
// endpoint the environment names, or nil when [Enabled] is false: then no
// exporter exists and the gateway makes no spans. The spans carry
// service.name "spacefix" (OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// win) and version. Sampling follows OTEL_TRACES_SAMPLER (default: always,
// or as the client's trace context says). The caller shuts the provider
// down after the gateway, which flushes the spans still queued.
func FromEnv(ctx context.Context, version string) (*sdktrace.TracerProvider, error) {
	if !Enabled() {
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("traces: OTLP/HTTP exporter: %w; check %s", err, EnvEndpoint)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", "spacefix"),
			attribute.String("service.version", version),
		),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES still leaves a usable
		// resource; traces are worth more than a perfect one.
		if res == nil {
			res = resource.Empty()
		}
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// Endpoint returns the endpoint traces go to, for the start-up log: the
// traces-specific variable wins, as it does for the exporter. It holds no
// secret: a user and password in the URL are left out, and headers (in
// OTEL_EXPORTER_OTLP_HEADERS) are never logged.
func Endpoint() string {
	e := os.Getenv(EnvTracesEndpoint)
	if e == "" {
		e = strings.TrimRight(os.Getenv(EnvEndpoint), "/") + "/v1/traces"
	}
	// A password in the URL stays out of the log.
	if u, err := url.Parse(e); err == nil && u.User != nil {
		u.User = nil
		e = u.String()
	}
	return e
}
