// Package bench measures what the gateway adds to a tools/call: the same
// echo tool is served once by a plain go-sdk MCP server ("direct") and once
// by a real gateway with a real core agent behind it ("gateway"), and the
// same go-sdk client drives both over loopback.
//
// [BenchmarkToolCall] in bench_test.go and cmd/spacefix-bench share this
// package: [StartDirect] and [StartGateway] start a [Target], [Target.Sessions]
// opens client sessions on it, and [Run] drives a fixed number of calls from a
// number of concurrent callers and returns their latency percentiles and
// throughput.
//
// Every goroutine a side starts carries the pprof label side=direct,
// side=gateway, side=agent or side=client, so a CPU profile of one run can be
// split by side with `go tool pprof -tagfocus side=gateway`.
package bench

import (
	"context"
	"runtime/pprof"
)

// EchoIn is the echo tool's input.
type EchoIn struct {
	Text string `json:"text"`
}

// ToolName is the tool every target serves.
const ToolName = "echo"

// echoSchema is the direct server's input schema for echo; the gateway
// advertises what core derives from [EchoIn].
const echoSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`

// Sides, as pprof label values.
const (
	SideDirect  = "direct"
	SideGateway = "gateway"
	SideAgent   = "agent"
	SideClient  = "client"
)

// labelled runs f with the pprof label side=side; goroutines f starts
// inherit it.
func labelled(ctx context.Context, side string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels("side", side), f)
}
