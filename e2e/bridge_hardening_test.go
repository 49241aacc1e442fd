package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/bridge"
)

// bridged returns the replica the gateway holds for the bridged server
// name, or nil.
func (e *env) bridged(name string) *agents.Replica {
	for _, r := range e.gw.Registry().All() {
		if r.Reg != nil && r.Reg.Bridge != nil && r.Reg.Name == name {
			return r
		}
	}
	return nil
}

// TestBridgeHidesSecrets runs the real `spacefix bridge --config` the way
// people start it, with SPACEFIX_API_KEY, SPACEFIX_TOKEN and a database
// password in its environment: the registration (the Agents page, the
// bus, the log) shows the argument as written, ${PGPASSWORD}, never its
// value; the child gets the value in its argument, the small default
// environment and what "env" names, but not the bridge's agent key or
// the shell's other secrets.
func TestBridgeHidesSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	child := binary(t, "./hostilechild")
	const (
		pgPassword = "pg-pass-5b7e1c"
		token      = "sfx-token-0d4f"
		other      = "other-secret-93aa"
	)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	must(t, os.WriteFile(cfg, []byte(`{"mcpServers": {
		"pg": {"command": "`+child+`", "args": ["postgresql://app:${PGPASSWORD}@db/app"], "env": {"PASSED": "${PASSED}"}}
	}}`), 0o600))
	cmd := exec.Command(binary(t, "../cmd/spacefix"), "bridge", "--config", cfg)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8",
		"SPACEFIX_URL=" + e.url, "SPACEFIX_API_KEY=" + e.agentKey, "SPACEFIX_TOKEN=" + token,
		"PGPASSWORD=" + pgPassword, "PASSED=passed-on-purpose", "OTHER_SECRET=" + other}
	p, logs := startCmd(t, cmd)
	waitFor(t, "the bridge to register pg", func() bool { return e.bridged("pg") != nil })

	want := child + " postgresql://app:${PGPASSWORD}@db/app"
	if got := e.bridged("pg").Reg.Bridge.Target; got != want {
		t.Errorf("the Agents page shows %q, want %q", got, want)
	}
	cs := e.connect("2025-11-25", e.clientKey, nil)
	env := text(callEventually(t, cs, "pg__env"))
	for _, line := range []string{"PASSED=passed-on-purpose", "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"} {
		if !strings.Contains(env, line+"\n") && !strings.HasSuffix(env, line) {
			t.Errorf("the child's environment has no %s:\n%s", line, env)
		}
	}
	for _, secret := range []string{"SPACEFIX_API_KEY", "SPACEFIX_TOKEN", "SPACEFIX_URL", "PGPASSWORD", "OTHER_SECRET", e.agentKey, token, pgPassword, other} {
		if strings.Contains(env, secret) {
			t.Errorf("the child sees %s", secret)
		}
	}
	if t.Failed() {
		t.Logf("the child's environment:\n%s", env)
	}

	// From the command line: --env NAME passes the bridge's own through.
	cli := exec.Command(binary(t, "../cmd/spacefix"), "bridge", "--name", "cli", "--env", "PASSED", "--", child)
	cli.Env, cli.Stderr = cmd.Env, logs
	must(t, cli.Start())
	pc := &proc{cmd: cli, done: make(chan struct{})}
	go func() { cli.Wait(); close(pc.done) }()
	t.Cleanup(pc.kill)
	waitFor(t, "the bridge to register cli", func() bool { return e.bridged("cli") != nil })
	env = text(callEventually(t, cs, "cli__env"))
	if !strings.Contains(env, "PASSED=passed-on-purpose") || strings.Contains(env, e.agentKey) {
		t.Errorf("the child of --env PASSED sees:\n%s", env)
	}
	pc.term()
	pc.wait(t)
	p.term()
	p.wait(t)
	if !strings.Contains(logs.String(), `target="`+want+`"`) {
		t.Errorf("the log does not show the target as written:\n%s", logs)
	}
	for _, secret := range []string{pgPassword, e.agentKey, token, other} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the bridge's log holds %q", secret)
		}
	}
}

// processGone reports whether pid has exited: no such process, or a
// zombie no one reaps (orphans go to init, which may not reap here).
func processGone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X'
}

// spawnGrandchild has the bridged child start a grandchild, as npx and uvx
// start the real server, and returns its pid.
func spawnGrandchild(t *testing.T, cs *mcp.ClientSession, tool string, ignoreTerm bool) int {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	r := call(t, cs, tool, map[string]any{"pidFile": pidFile, "ignoreTerm": ignoreTerm})
	pid, err := strconv.Atoi(text(r))
	if r.IsError || err != nil {
		t.Fatalf("spawn = %q", text(r))
	}
	if processGone(pid) {
		t.Fatalf("the grandchild %d is not running", pid)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// TestBridgeEndsGrandchildren: a child restarted after it exits, and one
// stopped with the bridge, take what they started with them, even a
// grandchild that ignores SIGTERM.
func TestBridgeEndsGrandchildren(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	br := e.startBridge(bridge.Server{Name: "gc", Command: binary(t, "./hostilechild")}, bridge.Options{TerminateDuration: 500 * time.Millisecond})
	cs := e.connect("2025-11-25", e.clientKey, nil)

	// The child exits by itself (a crash): its grandchild ends before the
	// next child starts.
	orphan := spawnGrandchild(t, cs, "gc__spawn", false)
	before := len(br.pids())
	call(t, cs, "gc__exit", nil)
	waitFor(t, "a new child", func() bool { return len(br.pids()) > before })
	waitFor(t, fmt.Sprintf("the grandchild %d of the exited child to end", orphan), func() bool { return processGone(orphan) })
	callEventually(t, cs, "gc__pid")

	// The bridge stops: its child's grandchild ends with it, SIGTERM or not.
	stubborn := spawnGrandchild(t, cs, "gc__spawn", true)
	br.stop()
	// The bridge has sent the group SIGKILL by the time it stops; the
	// kernel ends the process a moment later (longer on a busy machine).
	waitFor(t, fmt.Sprintf("the grandchild %d that ignores SIGTERM to end with the bridge", stubborn), func() bool { return processGone(stubborn) })
	if pids := br.pids(); !processGone(pids[len(pids)-1]) {
		t.Errorf("the child outlived the bridge")
	}
}

// TestBridgeStderrFlood: a child that floods its stderr with short lines
// keeps the bridge's log within the rate, with one line counting what was
// dropped, and its tools keep answering.
func TestBridgeStderrFlood(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	br := e.startBridge(bridge.Server{Name: "fl", Command: binary(t, "./hostilechild")}, bridge.Options{})
	cs := e.connect("2025-11-25", e.clientKey, nil)
	const lines = 1_000_000 // 5 MB
	start := time.Now()
	if r := call(t, cs, "fl__flood", map[string]any{"lines": lines}); text(r) != "flooded" {
		t.Fatalf("flood = %q", text(r))
	}
	br.waitLog(t, "bridge: dropped", "lines from fl's stderr", "dropped=")
	elapsed := time.Since(start)
	logged := br.countLog("server stderr", "server=fl", "line=spam")
	// The burst, and the rate for the time the flood took (and a second's slack).
	if limit := 200 + int(50*(elapsed.Seconds()+1)); logged > limit {
		t.Errorf("%d stderr lines logged in %v; want at most %d", logged, elapsed, limit)
	}
	if total := strings.Count(br.log.String(), "\n"); total > 2000 {
		t.Errorf("the bridge logged %d lines for a flood of %d", total, lines)
	}
	if r := call(t, cs, "fl__pid", nil); r.IsError {
		t.Errorf("the flooding server stopped answering: %q", text(r))
	}
}

// hugeServer is a remote MCP server on 127.0.0.1 whose "huge" tool
// answers with a body of 100 MB; written counts what it could send.
type hugeServer struct {
	srv     *httptest.Server
	written atomic.Int64
}

func newHugeServer(t *testing.T) *hugeServer {
	h := &hugeServer{}
	s := mcp.NewServer(&mcp.Implementation{Name: "huge", Version: "1.0.0"}, nil)
	for _, name := range []string{"huge", "small"} {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "Answer."},
			func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "small"}}}, nil, nil
			})
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" && msg.Params.Name == "huge" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, msg.ID)
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for range 100 << 20 / len(chunk) {
				n, err := w.Write(chunk)
				h.written.Add(int64(n))
				if err != nil {
					return
				}
			}
			io.WriteString(w, `"}]}}`)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(h.srv.Close)
	t.Cleanup(func() {
		for ss := range s.Sessions() {
			ss.Close()
		}
	})
	return h
}

// TestBridgeRemoteHostile: a remote whose answer is 100 MB is read up to
// the gateway's result limit only, and the call fails; a remote with
// secrets in its URL's path and query never has them published or logged,
// neither in the registration nor in the errors of requests that fail.
func TestBridgeRemoteHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := newHugeServer(t)
	br := e.startBridge(bridge.Server{Name: "big", URL: h.srv.URL + "/mcp/PATHSECRET/x?token=QSECRET"}, bridge.Options{})
	if got, want := e.bridged("big").Reg.Bridge.Target, h.srv.URL+"/…"; got != want {
		t.Errorf("the Agents page shows %q, want %q", got, want)
	}
	cs := e.connect("2025-11-25", e.clientKey, nil)
	r := call(t, cs, "big__huge", nil)
	const tooLarge = "Result is too large: the MCP server answered with more than 4 MiB (4,194,304 bytes), the limit. Ask for less, or page through it."
	if !r.IsError || text(r) != tooLarge {
		t.Errorf("a 100 MB answer = %v %.200q, want %q", r.IsError, text(r), tooLarge)
	}
	br.waitLog(t, "over 4 MiB")
	if n := h.written.Load(); n > 32<<20 {
		t.Errorf("the bridge read %d MB of a 100 MB answer", n>>20)
	}
	callEventually(t, cs, "big__small")
	for _, secret := range []string{"PATHSECRET", "QSECRET"} {
		if strings.Contains(br.log.String(), secret) {
			t.Errorf("the bridge's log holds %s", secret)
		}
	}

	// A remote that is down: every retry's error names it as scheme://host/….
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	down := "http://" + ln.Addr().String()
	ln.Close()
	logs := &syncBuffer{}
	b, err := bridge.New(bridge.Server{Name: "down", URL: down + "/mcp/PATHSECRET/x?token=QSECRET"}, bridge.Options{
		GatewayURL: e.url, APIKey: e.agentKey, BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(logs, logOutput()), &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	waitFor(t, "three retries", func() bool { return strings.Count(logs.String(), "not available; retrying") >= 3 })
	cancel()
	must(t, <-done)
	if !strings.Contains(logs.String(), down+"/…") {
		t.Errorf("the retries do not name the server as %s/…:\n%s", down, logs)
	}
	for _, secret := range []string{"PATHSECRET", "QSECRET"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log of a failing remote holds %s:\n%s", secret, logs)
		}
	}
}
