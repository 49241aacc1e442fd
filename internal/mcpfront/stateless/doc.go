// Package stateless is the MCP endpoint's own part of protocol 2026-07-28,
// the stateless era: the tasks extension (io.modelcontextprotocol/tasks),
// which go-sdk v1.8.0 does not implement. The endpoint (package mcpfront)
// hands it each 2026-07-28 POST, decoded once (wire.Request), before the
// early path and go-sdk's stateless handler; what it does not take goes
// on there.
//
// It sits beside the 2025 session era and above the call pipeline: a
// task-augmented call is admitted and started through
// [pipeline.Pipeline.StartTask], the same stages as every tools/call, and
// the task runtime (internal/tasks) keeps it. A task's requestState is
// sealed by the pipeline (pipeline.Pipeline.SealTaskState), so any gateway
// of a cluster opens it.
package stateless

import (
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/tasks"
)

// Extension is the tasks extension's name, in capabilities and _meta.
const Extension = tasksExtension

// Tasks serves the tasks extension at 2026-07-28.
type Tasks struct {
	tasks *tasks.Manager // nil: no tasks; Serve takes nothing
	pipe  *pipeline.Pipeline
	reg   *agents.Registry
	log   *slog.Logger
	impl  *mcp.Implementation
	stop  <-chan struct{} // closed when the endpoint closes: listens end
}

// Options configure [Tasks].
type Options struct {
	Tasks    *tasks.Manager
	Pipeline *pipeline.Pipeline
	Registry *agents.Registry
	Logger   *slog.Logger
	// Impl is the gateway as results name it (serverInfo).
	Impl *mcp.Implementation
	// Stop is closed when the endpoint closes.
	Stop <-chan struct{}
}

// New returns the tasks extension's server.
func New(o Options) *Tasks {
	return &Tasks{tasks: o.Tasks, pipe: o.Pipeline, reg: o.Registry, log: o.Logger, impl: o.Impl, stop: o.Stop}
}
