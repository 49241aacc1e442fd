// Package node_test runs the test suite of the Node.js SDK (@spacefix/core)
// from `go test ./...`, against a gateway binary built from this repository.
//
// It needs Node.js 20 or later and npm on PATH. Without them the test is
// skipped, unless SPACEFIX_REQUIRE_ALL=1 (as in CI), when it fails. It is
// skipped under -short.
package node_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/testenv"
)

func TestNodeSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("the Node.js SDK suite starts gateways and Node processes; skipped under -short")
	}
	npm := requireTool(t, "npm")
	node := requireTool(t, "node")
	if v, err := exec.Command(node, "-p", "process.versions.node").Output(); err != nil || major(string(v)) < 20 {
		testenv.Unavailable(t, "Node.js 20 or later is needed for the Node.js SDK suite; found "+strings.TrimSpace(string(v)))
	}

	sdkDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	repoRoot := filepath.Join(sdkDir, "..", "..")
	ctx, cancel := context.WithTimeout(context.Background(), timeout(t))
	defer cancel()

	bin := filepath.Join(t.TempDir(), "spacefix")
	run(ctx, t, repoRoot, nil, goTool(), "build", "-o", bin, "./cmd/spacefix")

	if _, err := os.Stat(filepath.Join(sdkDir, "node_modules")); os.IsNotExist(err) {
		run(ctx, t, sdkDir, nil, npm, "ci", "--no-audit", "--no-fund")
	}
	// The suite builds dist/ where it runs: a copy in a temporary folder,
	// so that the test never writes into the source tree.
	work := filepath.Join(t.TempDir(), "node")
	copySDK(t, sdkDir, work)
	run(ctx, t, work, []string{"SPACEFIX_BIN=" + bin, "SPACEFIX_REPO=" + repoRoot}, npm, "test")
}

// copySDK copies what the suite needs from the SDK at src into dst, with
// node_modules linked rather than copied.
func copySDK(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"package.json", "package-lock.json", "tsconfig.json", "src", "test"} {
		if err := os.CopyFS(filepath.Join(dst, name), os.DirFS(filepath.Join(src, name))); err != nil {
			// CopyFS copies directories; a file is copied on its own.
			data, rerr := os.ReadFile(filepath.Join(src, name))
			if rerr != nil {
				t.Fatalf("copy %s: %v", name, err)
			}
			if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Symlink(filepath.Join(src, "node_modules"), filepath.Join(dst, "node_modules")); err != nil {
		t.Fatal(err)
	}
}

// requireTool returns the path of a program on PATH, or skips (fails under
// SPACEFIX_REQUIRE_ALL=1) when it is missing.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		testenv.Unavailable(t, name+" is not on PATH; install Node.js 20 or later (with npm) to run the Node.js SDK suite")
	}
	return p
}

// run runs a command in dir, streaming its output into the test log, and
// fails the test when it exits non-zero.
func run(ctx context.Context, t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	// Its own process group, so a timeout ends the gateways and agents the
	// suite started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			t.Log(sc.Text())
		}
		io.Copy(io.Discard, pr)
	}()
	t.Logf("$ %s %s", filepath.Base(name), strings.Join(args, " "))
	err := cmd.Run()
	pw.Close()
	<-done
	if err != nil {
		t.Fatalf("%s %s in %s: %v", filepath.Base(name), strings.Join(args, " "), dir, err)
	}
}

// goTool returns the go command that runs this test, so the gateway is built
// with the same toolchain.
func goTool() string {
	//lint:ignore SA1019 the toolchain running this test is the one wanted, wherever it is installed
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// timeout is how long the whole suite may take: the test's deadline less a
// margin for cleaning up, or ten minutes.
func timeout(t *testing.T) time.Duration {
	if d, ok := t.Deadline(); ok {
		return time.Until(d) - 30*time.Second
	}
	return 10 * time.Minute
}

func major(v string) int {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	n, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	return n
}
