package mcpfront

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/mcpfront/stateless"
)

// syncJobTool offers the job tool in the view when offer is true (the key
// may call a tool with task support) and the gateway runs tasks, marking
// it kept for [mirror]; v.mu is held.
func (v *view) syncJobTool(offer bool, keep map[string]bool) {
	if !offer || v.f.tasks == nil {
		return
	}
	keep[pipeline.JobTool] = true
	if _, ok := v.tools[pipeline.JobTool]; !ok {
		v.tools[pipeline.JobTool] = pipeline.JobToolJSON
		v.server.AddTool(pipeline.JobToolDef, v.f.pipe.JobHandler)
	}
}

// offersJobTool reports whether the view advertises the job tool.
func (v *view) offersJobTool() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.tools[pipeline.JobTool]
	return ok
}

// jobToolListing leaves the job tool out of the tools/list answer of a
// 2026-07-28 request whose client declared the tasks extension: it has
// tasks/get, and a task of its own for every slow call.
func jobToolListing(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		list, ok := res.(*mcp.ListToolsResult)
		if err != nil || !ok || method != "tools/list" {
			return res, err
		}
		p, _ := req.GetParams().(*mcp.ListToolsParams)
		if p == nil {
			return res, err
		}
		caps, _ := p.Meta[mcp.MetaKeyClientCapabilities].(map[string]any)
		ext, _ := caps["extensions"].(map[string]any)
		if _, declared := ext[stateless.Extension]; !declared {
			return res, err
		}
		for i, t := range list.Tools {
			if t.Name == pipeline.JobTool {
				c := *list
				c.Tools = append(list.Tools[:i:i], list.Tools[i+1:]...)
				return &c, nil
			}
		}
		return res, err
	}
}
