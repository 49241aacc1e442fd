package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/postgres"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/testenv"
)

// Tasks that outlive their gateway: a gateway process killed with SIGKILL
// while it runs a 2025-11-25 task, a 2026-07-28 task and a job leaves them
// working in the store. When a gateway starts again on that store, the
// three end failed with "The gateway running this task stopped." (a
// waiting tasks/result returns), a task past its deadline whose gateway
// still looks alive is failed too, and ended tasks are pruned after their
// TTL like any other.

// servedGateway is a `spacefix serve` process on a store the test keeps
// across restarts.
type servedGateway struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
}

// serveStore starts `spacefix serve` on data with args and waits until it
// is ready.
func serveStore(t *testing.T, data string, args ...string) *servedGateway {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(binary(t, "../cmd/spacefix"), append([]string{"serve", "--addr", addr, "--data", data}, args...)...)
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = nil, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &servedGateway{url: "http://" + addr, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		g.kill()
		if t.Failed() {
			t.Logf("gateway stderr (last 4 KiB):\n%s", tail([]byte(stderr.String()), 4096))
		}
	})
	// On failure the cleanup above logs the gateway's stderr.
	poll(t, "spacefix serve to be ready (GET /readyz)", 60*time.Second, func() (attempt, bool) {
		select {
		case <-g.done:
			t.Fatalf("spacefix serve exited: %s", stderr.String())
		default:
		}
		resp, err := http.Get(g.url + "/readyz")
		if err != nil {
			return attempt{err: err}, false
		}
		resp.Body.Close()
		return attempt{out: resp.Status}, resp.StatusCode == http.StatusOK
	})
	return g
}

// kill stops the process with SIGKILL, as the OOM killer or a node loss
// would, and waits for it to be gone.
func (g *servedGateway) kill() {
	g.cmd.Process.Kill()
	<-g.done
}

// cliKey makes a key of kind in the default project with the CLI.
func cliKey(t *testing.T, data, kind string, args ...string) (id, secret string) {
	t.Helper()
	out, err := exec.Command(binary(t, "../cmd/spacefix"), append([]string{"keys", "create", "--data", data,
		"--project", "default", "--kind", kind, "--name", kind + " of the restart test", "--json"}, args...)...).Output()
	if err != nil {
		t.Fatalf("keys create: %v", err)
	}
	var k struct{ ID, Key string }
	must(t, json.Unmarshal(out, &k))
	return k.ID, k.Key
}

var jobStarted = regexp.MustCompile(`^The tool runs as a job \(job (task_[a-z0-9]+)\)\.`)

func TestTasksOutliveTheirGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gateway processes; skipped under -short")
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		data := t.TempDir() + "/spacefix.db"
		tasksOutliveTheirGateway(t, data, func() store.Store {
			st, err := sqlite.Open(context.Background(), data)
			must(t, err)
			return st
		})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		data := testenv.Postgres(t)
		tasksOutliveTheirGateway(t, data, func() store.Store {
			st, err := postgres.Open(context.Background(), data)
			must(t, err)
			return st
		}, "--secret-key-file", newSecretKeyFile(t))
	})
}

func tasksOutliveTheirGateway(t *testing.T, data string, open func() store.Store, args ...string) {
	// A bus, so that a gateway may start beside the record of one that
	// looks alive (the ghost below), as in a cluster.
	args = append(args, "--bus", startNATS(t))
	first := serveStore(t, data, args...)
	_, agentKey := cliKey(t, data, "agent")
	clientID, clientKey := cliKey(t, data, "client")

	started := make(chan struct{}, 8)
	runAgent(t, agentKey, first.url, started)

	on := &env{t: t, url: first.url}
	waitForTool(t, on, clientKey)
	// The three kinds of task, each running on the first gateway.
	old := on.tasksClient(clientKey, nil).start("hold", "{}", `{"ttl":3600000}`)
	modern, _ := on.extClient(clientKey).start("hold", nil)["taskId"].(string)
	m := jobStarted.FindStringSubmatch(text(call(t, on.connect("2025-11-25", clientKey, nil), "hold", map[string]any{})))
	if m == nil {
		t.Fatal("the plain call of a required-task tool started no job")
	}
	job := m[1]
	for range 3 {
		receive(t, started, "the three calls to reach the agent")
	}
	first.kill()

	// Meanwhile, in the store: a task past its deadline (created 3 h ago,
	// longest task 2 h) of a gateway whose record still looks alive, kept
	// 1 s once it ends.
	st := open()
	proj, err := st.Project(context.Background(), "default")
	must(t, err)
	ghost := store.Gateway{ID: "gw-ghost", Host: "elsewhere", PID: 1, Addr: "10.0.0.9:8080", Bus: true, StartedAt: time.Now()}
	must(t, st.RecordGateway(context.Background(), ghost))
	created := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Millisecond)
	overdue := store.Task{ID: "task_overdueofaghostgateway0", ProjectID: proj.ID, Owner: store.TaskOwner("key:" + clientID), Tool: "hold",
		AgentKey: "key_ghost", Gateway: ghost.ID, Era: "job", Status: store.TaskWorking, CreatedAt: created, UpdatedAt: created,
		TTL: time.Second, PollInterval: time.Second, Deadline: created.Add(2 * time.Hour), CallID: "c-ghost"}
	must(t, st.CreateTask(context.Background(), overdue))

	second := serveStore(t, data, args...)
	on = &env{t: t, url: second.url}
	const stopped = "The gateway running this task stopped."

	tc := on.tasksClient(clientKey, nil)
	if got, err := tc.get(old.TaskID); err != nil || got.Status != "failed" || got.StatusMessage != stopped {
		t.Errorf("2025-11-25 tasks/get after the restart = %+v, %v; want failed, %q", got, err, stopped)
	}
	if r, err := tc.result(old.TaskID); err != nil || !r.IsError || text(r) != stopped {
		t.Errorf("2025-11-25 tasks/result after the restart = %+v, %v; want the isError result %q", r, err, stopped)
	}
	a := on.extClient(clientKey).get(modern)
	if errObj, _ := a.Result["error"].(map[string]any); a.Error != nil || a.Result["status"] != "failed" || errObj["message"] != stopped {
		t.Errorf("2026-07-28 tasks/get after the restart = %+v %+v; want failed with the error %q", a.Result, a.Error, stopped)
	}
	// The job tool is listed while a tool with task support is: the agent
	// comes back.
	runAgent(t, agentKey, second.url, started)
	waitForTool(t, on, clientKey)
	r := call(t, on.connect("2025-11-25", clientKey, nil), "spacefix_job", map[string]any{"jobId": job})
	if !r.IsError || text(r) != stopped {
		t.Errorf("spacefix_job after the restart = %q (isError %v), want %q", text(r), r.IsError, stopped)
	}
	got, err := st.Task(context.Background(), overdue.ID)
	const ranLong = "The task ran longer than the project's longest task (2h0m0s) and was stopped."
	if err != nil || got.Status != store.TaskFailed || got.StatusMessage != ranLong {
		t.Errorf("the overdue task after the restart = %s %q, %v; want failed, %q", got.Status, got.StatusMessage, err, ranLong)
	}

	// The overdue task's TTL of 1 s has passed by the next start: it is
	// pruned then, and the others, kept an hour, are not.
	waitFor(t, "the overdue task's TTL to pass", func() bool { return time.Since(got.UpdatedAt) > time.Second })
	second.kill()
	serveStore(t, data, args...)
	if _, err := st.Task(context.Background(), overdue.ID); err == nil {
		t.Error("the overdue task is still stored after its TTL and a gateway's start")
	}
	for _, id := range []string{old.TaskID, modern, job} {
		if got, err := st.Task(context.Background(), id); err != nil || got.Status != store.TaskFailed {
			t.Errorf("task %s after the next start = %s, %v; want kept, failed", id, got.Status, err)
		}
	}
	must(t, st.Close())
}

// runAgent runs an agent with the tool "hold" on the gateway at url until
// the test ends; each call of hold sends on started.
func runAgent(t *testing.T, key, url string, started chan<- struct{}) {
	agent, err := core.New(core.Options{APIKey: key, URL: url, Logger: testLogger(t)})
	must(t, err)
	must(t, core.AddTool(agent, "hold", "Runs until stopped; only as a task.", func(ctx context.Context, _ struct{}) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		return "", ctx.Err()
	}, core.TaskSupport(core.TaskRequired)))
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { agent.Run(ctx); close(ran) }()
	t.Cleanup(func() { stop(); <-ran })
}

// waitForTool waits until the gateway of e lists a tool to key.
func waitForTool(t *testing.T, e *env, key string) {
	waitFor(t, "the agent's tool", func() bool {
		cs, err := e.tryConnect("2025-11-25", key, nil)
		if err != nil {
			return false
		}
		defer cs.Close()
		res, err := cs.ListTools(context.Background(), nil)
		return err == nil && len(res.Tools) > 0
	})
}
