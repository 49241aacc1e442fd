package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A first start that cannot listen (the port is busy) creates nothing, so
// the next start, with the port free, is still the first: it prints both
// keys and the quick-start lines, which are shown only once.
func TestFirstStartAfterBusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t, "../cmd/spacefix"), "serve", "--addr", busy.Addr().String())
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SPACEFIX_DATA=", "SPACEFIX_ADDR=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("serve on a busy port: %v, want exit status 1\n%s", err, out)
	}
	if want := "spacefix: listen on " + busy.Addr().String() + ": "; !strings.Contains(string(out), want) {
		t.Errorf("serve on a busy port printed:\n%s\nwant a line starting %q", out, want)
	}
	if strings.Contains(string(out), "sfx_") {
		t.Errorf("serve on a busy port printed a key it did not serve:\n%s", out)
	}
	busy.Close()

	// The second start listens on a port of its own: another process on
	// the machine may take the one just freed.
	fs := serveIn(t, dir)
	for _, want := range []string{
		"Set up the dashboard (one-time link; the first person to use it becomes admin):\n  http://127.0.0.1:",
		"This was the first start: project \"default\" and two keys were created.",
		"  Agent key   sfx_agent_", "  Client key  sfx_client_",
	} {
		if !strings.Contains(fs.out, want) {
			t.Errorf("the start after a failed one printed:\n%s\nwant %q", fs.out, want)
		}
	}
	for _, line := range []string{"SPACEFIX_API_KEY=", "claude mcp add", "npx tools/list", "npx tools/call"} {
		if fs.lines[line] == "" {
			t.Errorf("the start after a failed one printed no %q line:\n%s", line, fs.out)
		}
	}
}
