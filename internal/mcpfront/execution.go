package mcpfront

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
)

// A tool that may run as an MCP task is listed with its execution
// ({"taskSupport": "optional" | "required"}), in both eras. go-sdk v1.8.0's
// mcp.Tool has no such field and drops what it does not know, so
// tools/list results that hold such a tool are wrapped, as eraFields wraps
// those of older sessions, in a type that marshals each tool with it. A
// list without any is left as go-sdk made it: the common case costs one
// map lookup per tool.

// toolExecution is the view's middleware that adds execution to the tools
// of a tools/list result that declare task support. It runs outside
// eraFields, so it sees a 2025 session's result already wrapped.
func (v *view) toolExecution(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || method != "tools/list" {
			return res, err
		}
		var (
			list   *mcp.ListToolsResult
			legacy bool
		)
		switch r := res.(type) {
		case *mcp.ListToolsResult:
			list = r
		case wire.LegacyTools:
			list, legacy = r.ListToolsResult, true
		default:
			return res, nil
		}
		if exec := taskSupport(v.f.reg.Snapshot(v.key.ProjectID), list.Tools); exec != nil {
			return toolsWithExecution{ListToolsResult: list, exec: exec, legacy: legacy}, nil
		}
		return res, nil
	}
}

// taskSupport returns, by name, the task support of those of tools that
// may run as tasks in snap, or nil when none may.
func taskSupport(snap *agents.Snapshot, tools []*mcp.Tool) map[string]string {
	var exec map[string]string
	for _, t := range tools {
		at := snap.Tools[t.Name]
		if at == nil {
			continue
		}
		if ts := at.Def.TaskSupport(); ts != agentproto.TaskForbidden {
			if exec == nil {
				exec = map[string]string{}
			}
			exec[t.Name] = ts
		}
	}
	return exec
}

// toolsWithExecution is a tools/list result whose tools named in exec are
// written with their execution; legacy drops the fields only 2026-07-28
// results carry (see eraFields).
type toolsWithExecution struct {
	*mcp.ListToolsResult
	exec   map[string]string
	legacy bool
}

// toolWithExecution is an MCP tool with its execution.
type toolWithExecution struct {
	*mcp.Tool
	Execution agentproto.Execution `json:"execution"`
}

func (r toolsWithExecution) MarshalJSON() ([]byte, error) {
	tools := make([]any, len(r.Tools))
	for i, t := range r.Tools {
		tools[i] = t
		if ts := r.exec[t.Name]; ts != "" {
			tools[i] = toolWithExecution{Tool: t, Execution: agentproto.Execution{TaskSupport: ts}}
		}
	}
	type plain mcp.ListToolsResult // its fields, without this method
	out := struct {
		*plain
		Tools []any `json:"tools"`
		// At 2025 versions, fields of the embedded result that these
		// shadow, left nil, are not written.
		TTLMs      *int    `json:"ttlMs,omitempty"`
		CacheScope *string `json:"cacheScope,omitempty"`
	}{plain: (*plain)(r.ListToolsResult), Tools: tools}
	if !r.legacy {
		out.TTLMs, out.CacheScope = &r.TTLMs, &r.CacheScope
	}
	return json.Marshal(out)
}
