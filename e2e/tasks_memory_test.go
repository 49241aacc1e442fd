package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spacefix/spacefix/core"
)

// taskMemoryVar runs TestTaskMemory: it starts 5,000 tasks on a gateway
// process and takes a minute or two, so it is not in the default suite.
const taskMemoryVar = "SPACEFIX_TASK_MEMORY"

// TestTaskMemory measures what a running task costs its gateway: a
// `spacefix serve` process on SQLite, one agent (in this process) whose
// tool reports progress every 5 s until stopped, and one client key that
// starts 5,000 tasks of it (2026-07-28 extension, 8 at a time). Before and
// after, once every task reached the agent and their progress flows: the
// process's resident memory (VmRSS) and, after a forced collection, the
// Go heap and stacks in use (the heap profile's HeapInuse and Stack).
// Figures and how to rerun: docs/benchmarks.md.
func TestTaskMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(taskMemoryVar))
	if n <= 0 {
		t.Skip(taskMemoryVar + " is not set; SPACEFIX_TASK_MEMORY=5000 go test ./e2e -run TestTaskMemory -v measures the memory of 5,000 running tasks")
	}
	g := startServeProcess(t)
	patch := fmt.Sprintf(`{"maxRunningTasks":%d}`, max(n+1, 100)) // n and the warm-up task
	req, _ := http.NewRequest(http.MethodPatch, g.url+"/api/projects/default/settings", strings.NewReader(patch))
	req.Header.Set("Authorization", "Bearer "+g.adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("set maxRunningTasks: %v %v", resp, err)
	}
	resp.Body.Close()

	var reached atomic.Int64
	quit := make(chan struct{})
	agent, err := core.New(core.Options{APIKey: g.agentKey, URL: g.url, Logger: testLogger(t)})
	must(t, err)
	must(t, core.AddTool(agent, "hold", "Runs until stopped, saying so every 5 s.", func(ctx context.Context, _ struct{}) (string, error) {
		reached.Add(1)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for i := 1; ; i++ {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-quit:
				return "Stopped.", nil
			case <-tick.C:
				core.Progress(ctx, fmt.Sprintf("Still holding, %d", i))
			}
		}
	}, core.TaskSupport(core.TaskOptional)))
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { agent.Run(ctx); close(ran) }()
	t.Cleanup(func() { close(quit); stop(); <-ran })

	on := &env{t: t, url: g.url}
	waitForTool(t, on, g.clientKey)
	c := on.extClient(g.clientKey)
	c.start("hold", nil) // warm: the first task's code paths, connections, caches
	waitFor(t, "the first task to reach the agent", func() bool { return reached.Load() == 1 })
	before := g.memory(t)

	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 8 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				c.start("hold", nil)
			}
		})
	}
	wg.Wait()
	poll(t, fmt.Sprintf("the %d tasks to reach the agent (how many did)", n), 2*time.Minute, func() (int64, bool) {
		got := reached.Load() - 1
		return got, got >= int64(n)
	})
	time.Sleep(12 * time.Second) // two rounds of progress lines written: the figures with progress flowing
	after := g.memory(t)
	t.Logf("%d running tasks: RSS %+.1f MiB (%.0f B/task); Go heap+stacks in use %+.1f MiB (%.0f B/task); goroutines %d → %d",
		n, float64(after.rss-before.rss)/(1<<20), float64(after.rss-before.rss)/float64(n),
		float64(after.inuse-before.inuse)/(1<<20), float64(after.inuse-before.inuse)/float64(n), before.goroutines, after.goroutines)
	t.Logf("of which stacks %.0f B/task", float64(after.stacks-before.stacks)/float64(n))
	if out := os.Getenv(taskMemoryVar + "_PROFILE"); out != "" {
		must(t, os.WriteFile(out, []byte(g.get(t, g.url+"/debug/pprof/heap?gc=1", g.adminToken)), 0o644))
	}
	g.cmd.Process.Kill()
}

// gatewayMemory is a gateway process's memory at one moment.
type gatewayMemory struct {
	rss        int64 // VmRSS
	inuse      int64 // heap and stacks in use after a forced collection
	stacks     int64 // StackInuse
	goroutines int
}

// memStat finds the heap in use and the stacks in use (the first of
// "# Stack = inuse / sys") in a heap profile's text form.
var memStat = regexp.MustCompile(`(?m)^# (HeapInuse|Stack) = (\d+)`)

func (g *serveProcess) memory(t *testing.T) gatewayMemory {
	t.Helper()
	var m gatewayMemory
	for _, s := range memStat.FindAllStringSubmatch(g.get(t, g.url+"/debug/pprof/heap?gc=1&debug=1", g.adminToken), -1) {
		v, _ := strconv.ParseInt(s[2], 10, 64)
		m.inuse += v
		if s[1] == "Stack" {
			m.stacks = v
		}
	}
	m.goroutines = g.stats(t).goroutines
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	must(t, err)
	if f := regexp.MustCompile(`(?m)^VmRSS:\s+(\d+) kB$`).FindSubmatch(status); f != nil {
		kb, _ := strconv.ParseInt(string(f[1]), 10, 64)
		m.rss = kb << 10
	}
	return m
}
