package pipeline

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolStagesOrder holds the order of the tools/call stages to the one
// the package comment of go states, and shapeAt to shape's place.
func TestToolStagesOrder(t *testing.T) {
	var got []string
	for _, s := range toolStages {
		got = append(got, fmt.Sprintf("%T", s))
	}
	want := []string{
		"pipeline.admitStage", "pipeline.resumeStage", "pipeline.resolveStage", "pipeline.policyStage",
		"pipeline.cacheStage", "pipeline.repeatStage", "pipeline.shapeStage", "pipeline.runStage",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("toolStages (-want +got):\n%s", d)
	}
	if _, ok := toolStages[shapeAt].(shapeStage); !ok {
		t.Errorf("toolStages[shapeAt] = %T, want shapeStage", toolStages[shapeAt])
	}
}

// recordingStage stands in for a stage: it notes its name, settles the
// call when told to, and goes on.
type recordingStage struct {
	name   string
	trail  *[]string
	settle bool
}

func (s recordingStage) serve(ctx context.Context, _ *Pipeline, c *Call, next next) (*mcp.CallToolResult, error) {
	*s.trail = append(*s.trail, s.name)
	if s.settle {
		c.settled = true
	}
	if s.name == "run" {
		return nil, nil
	}
	return next.run(ctx, c)
}

// TestSettledCallSkipsToShape holds the runner's one rule: once a stage
// settles a call, the stages up to shape are skipped but the policy point
// (which shapes the answer for its caller), and shape (then run, which
// shape decides on) is what follows.
func TestSettledCallSkipsToShape(t *testing.T) {
	saved := toolStages
	defer func() { toolStages = saved }()
	names := []string{"admit", "resume", "resolve", "policy", "cache", "repeat", "shape", "run"}
	for settleAt := range names {
		var trail []string
		for i, n := range names {
			toolStages[i] = recordingStage{name: n, trail: &trail, settle: i == settleAt}
		}
		if _, err := (next{nil, 0}).run(context.Background(), &Call{}); err != nil {
			t.Fatal(err)
		}
		want := names
		switch {
		case settleAt < policyAt:
			want = append(slices.Clone(names[:settleAt+1]), "policy")
			want = append(want, names[shapeAt:]...)
		case settleAt < shapeAt:
			want = append(slices.Clone(names[:settleAt+1]), names[shapeAt:]...)
		}
		if d := cmp.Diff(want, trail); d != "" {
			t.Errorf("settled at %s (-want +got):\n%s", names[settleAt], d)
		}
	}
}
