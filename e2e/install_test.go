package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/testenv"
)

// The README's Go provider, built as a user builds it before any release:
// a module of its own outside this repository, following the README's
// steps (go mod init, a require and a replace to the clone's core, go mod
// tidy) with the clone's path filled in, and the README's main.go. Built
// without the workspace, it connects to a real gateway and its tool
// answers a real MCP client.
func TestGoProviderOutsideTheTree(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a module of its own; skipped under -short")
	}
	repo, err := filepath.Abs("..")
	must(t, err)
	dir := t.TempDir()
	steps := strings.ReplaceAll(readmeSteps(t, "../README.md", "go mod edit -require"), "$HOME/src/spacefix", repo)
	code := readmeBlock(t, "../README.md", "```go\n", "package main")
	must(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644))
	env := append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	runIn(t, dir, env, "bash", "-e", "-c", steps+"\ngo build -o hello .\n")

	e := newEnv(t)
	cmd := exec.Command(filepath.Join(dir, "hello"))
	cmd.Env = append(os.Environ(), "SPACEFIX_API_KEY="+e.agentKey, "SPACEFIX_URL="+e.url)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, "the README's Go provider to connect", func() bool { return len(e.gw.Registry().All()) > 0 })
	cs := e.connect("2026-07-28", e.clientKey, nil)
	if got := text(call(t, cs, "hello", map[string]any{"name": "Ada"})); got != "Hello, Ada" {
		t.Errorf("hello through the README's Go provider = %q, want %q", got, "Hello, Ada")
	}
}

// The README's Node provider: the SDK packed with npm pack in a fresh copy
// of sdk/node, installed from that tarball into a project of its own, and
// the README's agent.mjs, connected to a real gateway.
func TestNodeProviderFromTarball(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("packs and installs the Node SDK; skipped under -short")
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Unavailable(t, tool+" is not on PATH; install Node.js 20 or later with npm to run the README's Node provider")
		}
	}
	clone := t.TempDir()
	copyTree(t, "../sdk/node", filepath.Join(clone, "sdk/node"))
	project := t.TempDir()
	steps := strings.ReplaceAll(readmeSteps(t, "../README.md", "npm pack"), "$HOME/src/spacefix", clone)
	code := readmeBlock(t, "../README.md", "```js\n", "defineTool")
	must(t, os.WriteFile(filepath.Join(project, "agent.mjs"), []byte(code), 0o644))
	runIn(t, project, os.Environ(), "bash", "-e", "-c", steps)

	e := newEnv(t)
	cmd := exec.Command("node", "agent.mjs")
	cmd.Dir = project
	cmd.Env = append(os.Environ(), "SPACEFIX_API_KEY="+e.agentKey, "SPACEFIX_URL="+e.url)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	poll(t, "the README's Node provider to connect (its output)", 60*time.Second, func() (string, bool) {
		return out.String(), len(e.gw.Registry().All()) > 0
	})
	cs := e.connect("2025-11-25", e.clientKey, nil)
	if got := text(call(t, cs, "hello", map[string]any{"name": "Ada"})); got != "Hello, Ada" {
		t.Errorf("hello through the README's Node provider = %q, want %q", got, "Hello, Ada")
	}
}

// readmeBlock returns the first code block opened by fence that contains
// marker.
func readmeBlock(t *testing.T, path, fence, marker string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	rest := string(b)
	for {
		_, after, ok := strings.Cut(rest, fence)
		if !ok {
			t.Fatalf("%s has no %q block with %q", path, strings.TrimSpace(fence), marker)
		}
		block, next, _ := strings.Cut(after, "```")
		if strings.Contains(block, marker) {
			return block
		}
		rest = next
	}
}

// runIn runs a command in dir and fails the test with its output if it
// fails; npm and the go command may take minutes on a cold cache.
func runIn(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out.String())
		}
	case <-time.After(5 * time.Minute):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("%s %s did not finish within 5 minutes:\n%s", name, strings.Join(args, " "), out.String())
	}
}
