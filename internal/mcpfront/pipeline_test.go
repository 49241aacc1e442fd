package mcpfront

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestToolStagesOrder holds the order of the tools/call stages to the one
// the package comment of pipeline.go states, and shapeAt to shape's place.
func TestToolStagesOrder(t *testing.T) {
	var got []string
	for _, s := range toolStages {
		got = append(got, fmt.Sprintf("%T", s))
	}
	want := []string{
		"mcpfront.admitStage", "mcpfront.resumeStage", "mcpfront.resolveStage", "mcpfront.policyStage",
		"mcpfront.cacheStage", "mcpfront.repeatStage", "mcpfront.shapeStage", "mcpfront.runStage",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("toolStages (-want +got):\n%s", d)
	}
	if _, ok := toolStages[shapeAt].(shapeStage); !ok {
		t.Errorf("toolStages[shapeAt] = %T, want shapeStage", toolStages[shapeAt])
	}
}
