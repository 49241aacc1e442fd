package e2e

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/testenv"
)

// The Node example's steps, taken from each README that gives them and run
// by bash exactly as written, in a fresh copy of sdk/node and
// examples/orders-node (no node_modules, no built SDK), against a real
// gateway. The only changes are the ones a reader makes: the agent key and
// the gateway's address.
func TestNodeExampleReadme(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("installs npm packages and runs the Node example; skipped under -short")
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Unavailable(t, tool+" is not on PATH; install Node.js 20 or later with npm to run the Node example's README steps")
		}
	}
	for _, c := range []struct {
		readme string // relative to the repository root
		dir    string // where its steps start, relative to the root
	}{
		{"sdk/node/README.md", "."},
		{"examples/orders-node/README.md", "examples/orders-node"},
	} {
		t.Run(strings.ReplaceAll(c.readme, "/", "_"), func(t *testing.T) {
			steps := readmeSteps(t, filepath.Join("..", c.readme), "node agent.mjs")
			root := t.TempDir()
			for _, d := range []string{"sdk/node", "examples/orders-node"} {
				copyTree(t, filepath.Join("..", d), filepath.Join(root, d))
			}
			e := newEnv(t)
			steps = strings.ReplaceAll(steps, "sfx_agent_…", e.agentKey)
			steps = strings.ReplaceAll(steps, "http://127.0.0.1:8080", e.url)

			// The steps write while the poll below reads.
			var out syncBuffer
			cmd := exec.Command("bash", "-e", "-c", steps)
			cmd.Dir = filepath.Join(root, c.dir)
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			})
			// npm ci may take minutes on a cold cache.
			poll(t, "the agent of "+c.readme+"'s steps to connect (their output)", 5*time.Minute, func() (string, bool) {
				select {
				case err := <-exited:
					exited <- err
					t.Fatalf("the steps of %s ended (%v) before the agent connected:\n%s\n--- output:\n%s", c.readme, err, steps, out.String())
				default:
				}
				return out.String(), len(e.gw.Registry().All()) > 0
			})
			// The dashboard's Agents page shows the replica by its name, as it
			// does the Go example's, not by its key's label.
			rep := e.gw.Registry().All()[0]
			k, err := e.store.Key(context.Background(), rep.AgentKey)
			must(t, err)
			k.Name = "default agent key"
			if got := access.AgentName(k, rep.Reg); got != "orders" {
				t.Errorf("the Agents page names the Node example's replica %q, want %q like the Go example's", got, "orders")
			}
			cs := e.connect("2025-11-25", e.clientKey, nil)
			if got := text(call(t, cs, "get_order", map[string]any{"id": "1042"})); !strings.Contains(got, `"customer":"ada"`) {
				t.Errorf("get_order 1042 through the README's agent = %s", got)
			}
		})
	}
}

// readmeSteps returns the ```sh block of a README that contains marker.
func readmeSteps(t *testing.T, path, marker string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rest := string(b)
	for {
		_, after, ok := strings.Cut(rest, "```sh\n")
		if !ok {
			t.Fatalf("%s has no ```sh block with %q", path, marker)
		}
		block, next, _ := strings.Cut(after, "```")
		if strings.Contains(block, marker) {
			return block
		}
		rest = next
	}
}

// copyTree copies a source folder as a fresh clone has it: without
// node_modules and without the built SDK.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.Name() == "node_modules" || d.Name() == "dist" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // a worktree's node_modules may be a symlink
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The Node SDK's README shows the example's code, and a reader copies it:
// it must be examples/orders-node/agent.mjs to the letter, less the file's
// opening comment and its import of orderService (the reader's own
// service). A README that drifts (it once lacked the read-only
// annotations, so copied reads counted as writes) fails here.
func TestNodeReadmeCodeIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../sdk/node/README.md")
	must(t, err)
	_, after, ok := strings.Cut(string(readme), "## Example")
	if !ok {
		t.Fatal("sdk/node/README.md has no ## Example section")
	}
	_, after, ok = strings.Cut(after, "```js\n")
	if !ok {
		t.Fatal("sdk/node/README.md's Example has no ```js block")
	}
	shown, _, _ := strings.Cut(after, "```")

	src, err := os.ReadFile("../examples/orders-node/agent.mjs")
	must(t, err)
	var kept []string
	for _, line := range strings.SplitAfter(string(src), "\n") {
		if strings.HasPrefix(line, "//") && len(kept) == 0 {
			continue // the file's opening comment
		}
		if strings.HasPrefix(line, "import { orderService }") {
			continue
		}
		kept = append(kept, line)
	}
	if example := strings.Join(kept, ""); shown != example {
		t.Errorf("sdk/node/README.md's example differs from examples/orders-node/agent.mjs (less its opening comment and orderService import); make them the same.\n--- README:\n%s\n--- agent.mjs:\n%s", shown, example)
	}
}
