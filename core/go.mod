module github.com/spacefix/spacefix/core

go 1.23.0

require (
	github.com/coder/websocket v1.8.15
	github.com/google/go-cmp v0.7.0
	go.opentelemetry.io/otel v1.38.0
	go.opentelemetry.io/otel/trace v1.38.0
)
