package mcpfront

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/mcpfront/stateless"
)

// TestJobToolListing: a 2026-07-28 request that declared the tasks
// extension does not see the job tool; others do.
func TestJobToolListing(t *testing.T) {
	list := &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: "sales_report"}, {Name: pipeline.JobTool}, {Name: "z"}}}
	h := jobToolListing(func(context.Context, string, mcp.Request) (mcp.Result, error) { return list, nil })
	names := func(meta mcp.Meta) []string {
		res, err := h(context.Background(), "tools/list", &mcp.ListToolsRequest{Params: &mcp.ListToolsParams{Meta: meta}})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range res.(*mcp.ListToolsResult).Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	declared := mcp.Meta{mcp.MetaKeyClientCapabilities: map[string]any{"extensions": map[string]any{stateless.Extension: map[string]any{}}}}
	if got := names(declared); len(got) != 2 || got[0] != "sales_report" || got[1] != "z" {
		t.Errorf("tools for a client with the extension = %v, want sales_report z", got)
	}
	if got := names(nil); len(got) != 3 {
		t.Errorf("tools for a client without = %v, want all three", got)
	}
	if len(list.Tools) != 3 {
		t.Errorf("the server's own list changed: %d tools", len(list.Tools))
	}
}
