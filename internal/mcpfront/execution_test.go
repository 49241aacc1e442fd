package mcpfront

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tools/list result with task-capable tools is written as go-sdk writes
// it, each such tool with its execution; a 2025 session's without the
// 2026-07-28 cache fields.
func TestToolsWithExecution(t *testing.T) {
	list := &mcp.ListToolsResult{NextCursor: "n", Tools: []*mcp.Tool{
		{Name: "report", Description: "A report.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "plain", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}}
	list.TTLMs, list.CacheScope = 0, "private"
	exec := map[string]string{"report": "optional"}
	for _, tc := range []struct {
		legacy bool
		want   string
	}{
		{false, `{"ttlMs":0,"cacheScope":"private","nextCursor":"n","tools":[
			{"description":"A report.","inputSchema":{"type":"object"},"name":"report","execution":{"taskSupport":"optional"}},
			{"inputSchema":{"type":"object"},"name":"plain"}]}`},
		{true, `{"nextCursor":"n","tools":[
			{"description":"A report.","inputSchema":{"type":"object"},"name":"report","execution":{"taskSupport":"optional"}},
			{"inputSchema":{"type":"object"},"name":"plain"}]}`},
	} {
		b, err := json.Marshal(toolsWithExecution{ListToolsResult: list, exec: exec, legacy: tc.legacy})
		if err != nil {
			t.Fatal(err)
		}
		var got, want any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("legacy %v: (-want +got)\n%s", tc.legacy, diff)
		}
	}
	// Without the wrapper, go-sdk writes the same fields.
	plain, _ := json.Marshal(list)
	var m map[string]any
	json.Unmarshal(plain, &m)
	if _, ok := m["ttlMs"]; !ok {
		t.Errorf("go-sdk's own result has no ttlMs: %s", plain)
	}
}
