package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/leaktest"
)

var builds struct {
	sync.Mutex
	dir  string
	bins map[string]string // package → binary
}

// binary builds a main package of this module once per test run and
// returns its path.
func binary(t testing.TB, pkg string) string {
	t.Helper()
	builds.Lock()
	defer builds.Unlock()
	if p, ok := builds.bins[pkg]; ok {
		return p
	}
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "spacefix-e2e-bin")
		if err != nil {
			t.Fatal(err)
		}
		builds.dir, builds.bins = dir, map[string]string{}
	}
	path := filepath.Join(builds.dir, filepath.Base(pkg))
	out, err := exec.Command("go", "build", "-o", path, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	builds.bins[pkg] = path
	return path
}

// TestMain removes the built binaries and fails the run when goroutines
// outlive the tests.
func TestMain(m *testing.M) {
	code := leaktest.Run(m)
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
	os.Exit(code)
}

// proc is an agent running as its own process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startProcess runs the test agent against the env's gateway and waits until
// it is connected.
func (e *env) startProcess(instance string) *proc {
	e.t.Helper()
	return e.run("./testagent", "TESTAGENT_INSTANCE="+instance)
}

// run runs a main package as an agent process with the env's agent key and
// waits until it is connected.
func (e *env) run(pkg string, env ...string) *proc {
	e.t.Helper()
	before := len(e.gw.Registry().All())
	cmd := exec.Command(binary(e.t, pkg))
	cmd.Env = append(os.Environ(), "SPACEFIX_API_KEY="+e.agentKey, "SPACEFIX_URL="+e.url)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	e.t.Cleanup(func() { p.kill() })
	waitFor(e.t, "the agent process to connect", func() bool { return len(e.gw.Registry().All()) > before })
	return p
}

func (p *proc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// startCmd starts cmd, its standard error kept in the returned buffer,
// and kills it when the test ends if it is still running.
func startCmd(t *testing.T, cmd *exec.Cmd) (*proc, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	cmd.Stderr = logs
	must(t, cmd.Start())
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	return p, logs
}

// term asks the agent to stop, as a deployment's rolling restart does.
func (p *proc) term() { p.cmd.Process.Signal(syscall.SIGTERM) }

func (p *proc) wait(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatal("the agent process did not exit")
	}
}

func TestAgentDisconnectMidCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	forEachVersion(t, func(t *testing.T, v string) {
		p := e.startProcess("")
		cs := e.connect(v, e.clientKey, nil)
		go func() {
			waitFor(t, "the call to reach the agent", func() bool {
				for _, r := range e.gw.Registry().All() {
					if r.Inflight() > 0 {
						return true
					}
				}
				return false
			})
			p.kill() // the replica's connection drops mid-call
		}()
		res := call(t, cs, "hang", nil)
		if want := "Agent disconnected before returning a result."; !res.IsError || text(res) != want {
			t.Errorf("hang = isError %v %q, want %q", res.IsError, text(res), want)
		}
		waitFor(t, "the tool to leave the list", func() bool { return len(toolNames(t, cs)) == 0 })
	})
}

// A rolling restart: the agent process is stopped and started again in the
// middle of a stream of calls, and every call succeeds.
func TestRestartLosesNoCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.grace = 10 * time.Second })
	first := e.startProcess("")
	cs := e.connect("2025-11-25", e.clientKey, nil)

	const callers, perCaller = 4, 40
	var (
		mu     sync.Mutex
		failed []string
		pids   = map[string]int{}
	)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perCaller {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "work", Arguments: map[string]any{"ms": 20, "tag": fmt.Sprint(c, "-", i)}})
				cancel()
				mu.Lock()
				switch {
				case err != nil:
					failed = append(failed, err.Error())
				case res.IsError:
					failed = append(failed, text(res))
				default:
					_, pid, _ := strings.Cut(text(res), " by ")
					pids[pid]++
				}
				mu.Unlock()
			}
		}()
	}
	waitFor(t, "the first process to answer calls", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(pids) > 0 || len(failed) > 0
	})
	first.term()
	first.wait(t)
	e.startProcess("")
	wg.Wait()

	if len(failed) > 0 {
		t.Errorf("%d of %d calls failed across the restart; first: %q", len(failed), callers*perCaller, failed[0])
	}
	if len(pids) != 2 {
		t.Errorf("calls were served by %d processes (%v), want both the old and the new one", len(pids), pids)
	}
}
