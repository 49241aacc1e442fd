package schemagen

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSchemaSplitCoreDeps holds issue 10's split: the core SDK, which users
// import, must not pull in the gateway's validator or regexp2.
func TestSchemaSplitCoreDeps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, pkg := range []string{"github.com/spacefix/spacefix/core", "github.com/spacefix/spacefix/core/internal/schemagen"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.Contains(dep, "regexp2") || dep == "github.com/spacefix/spacefix/internal/schema" {
				t.Errorf("%s depends on %s; the SDK must not link the gateway's validator", pkg, dep)
			}
		}
	}
}
