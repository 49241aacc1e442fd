package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/bridge"
	"github.com/spacefix/spacefix/internal/route"
)

// runningBridge is a bridge running in this process against the env's
// gateway, its log kept for assertions.
type runningBridge struct {
	log  *syncBuffer
	stop func()
}

// startBridge runs srv behind a bridge with the env's agent key and waits
// until the gateway lists one of its tools.
func (e *env) startBridge(srv bridge.Server, opts bridge.Options) *runningBridge {
	e.t.Helper()
	logs := &syncBuffer{}
	opts.GatewayURL, opts.APIKey = e.url, e.agentKey
	opts.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, logOutput()), &slog.HandlerOptions{Level: slog.LevelDebug}))
	if opts.TerminateDuration == 0 {
		opts.TerminateDuration = time.Second
	}
	if opts.BackoffMax == 0 {
		opts.BackoffMin, opts.BackoffMax = 50*time.Millisecond, 500*time.Millisecond
	}
	b, err := bridge.New(srv, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				e.t.Errorf("bridge Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			e.t.Errorf("bridge Run did not return within 30s of its context ending")
		}
	}
	e.t.Cleanup(stop)
	waitFor(e.t, "the bridged server's tools", func() bool {
		for _, r := range e.gw.Registry().All() {
			if r.Reg != nil && r.Reg.Bridge != nil && r.Reg.Name == srv.Name && len(r.Reg.Tools) > 0 {
				return true
			}
		}
		return false
	})
	return &runningBridge{log: logs, stop: stop}
}

var pidRE = regexp.MustCompile(`connected to the MCP server" .* pid=(\d+)`)

// pids lists the child process ids the bridge has started, oldest first.
func (r *runningBridge) pids() []int {
	var out []int
	for _, m := range pidRE.FindAllStringSubmatch(r.log.String(), -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

// waitLog waits until the bridge's log has a line containing all of want.
func (r *runningBridge) waitLog(t *testing.T, want ...string) {
	t.Helper()
	r.waitLogN(t, 1, want...)
}

// waitLogN waits until the bridge's log has n lines containing all of want.
func (r *runningBridge) waitLogN(t *testing.T, n int, want ...string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the bridge to log %q %d times", want, n), func() bool { return r.countLog(want...) >= n })
}

// countLog counts the log lines containing all of want.
func (r *runningBridge) countLog(want ...string) int {
	n := 0
	for _, line := range strings.Split(r.log.String(), "\n") {
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			n++
		}
	}
	return n
}

// callAsync calls a tool in the background; the result (or an error
// result carrying the protocol error) arrives on the channel.
func callAsync(ctx context.Context, cs *mcp.ClientSession, name string) <-chan *mcp.CallToolResult {
	out := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err != nil {
			r = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "protocol error: " + err.Error()}}}
		}
		out <- r
	}()
	return out
}

func fixtureServer(t *testing.T, env map[string]string) bridge.Server {
	return bridge.Server{Name: "fx", Command: binary(t, "./bridgeserver"), Env: env, Timeout: 90 * time.Second}
}

// TestBridgeFixtureLifecycle drives a bridged stdio server through what a
// deployment meets: names the gateway refuses reported and the rest
// registered, stderr in the bridge's log with the server's name, a secret
// in env never logged, a call cancelled by the client reaching the server
// as a cancellation, the tool list changing at run time, and the child
// crashing mid-call and hanging (restarted, the call in flight answered
// with the disconnect message).
func TestBridgeFixtureLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const secret = "s3cr3t-value-never-logged"
	br := e.startBridge(fixtureServer(t, map[string]string{"FIXTURE_SECRET": secret}), bridge.Options{KeepAlive: 300 * time.Millisecond})
	changed := make(chan struct{}, 10)
	cs := e.connect("2025-11-25", e.clientKey, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})

	want := []string{"fx__add_tool", "fx__crash", "fx__echo", "fx__hang", "fx__pid", "fx__remove_tool", "fx__secret", "fx__sleep", "fx__wait"}
	if got := toolNames(t, cs); !slices.Equal(got, want) {
		t.Fatalf("tools = %v, want %v", got, want)
	}
	br.waitLog(t, "not registered", `name=bad.name`, `Invalid tool name \"fx__bad.name\": use 1 to 64 characters from A-Z a-z 0-9 _ - in all.`)
	br.waitLog(t, "not registered", `name=__reserved`, `the server's part \"__reserved\" contains \"__\"`)
	br.waitLog(t, "server stderr", "server=fx", "fixture ready")
	for _, r := range e.gw.Registry().All() {
		for _, tl := range r.Reg.Tools {
			if tl.TimeoutMs != 90_000 {
				t.Errorf("%s registered with timeoutMs %d, want the bridge's 90000", tl.Name, tl.TimeoutMs)
			}
		}
	}
	if r := call(t, cs, "fx__secret", nil); text(r) != strconv.Itoa(len(secret)) {
		t.Errorf("the child did not get its env: %q", text(r))
	}
	if r := call(t, cs, "fx__echo", map[string]any{"text": "hi"}); r.IsError || text(r) != "hi" {
		t.Errorf("echo = %v %q", r.IsError, text(r))
	}
	pr, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "fx__greet", Arguments: map[string]string{"who": "Ada"}})
	must(t, err)
	if len(pr.Messages) != 1 || pr.Messages[0].Content.(*mcp.TextContent).Text != "Say hello to Ada" {
		t.Errorf("prompt = %+v", pr.Messages)
	}
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "fixture://readme"})
	must(t, err)
	if len(rr.Contents) != 1 || rr.Contents[0].Text != "# Fixture" || rr.Contents[0].MIMEType != "text/markdown" {
		t.Errorf("resource = %+v", rr.Contents[0])
	}

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__wait", Arguments: map[string]any{}})
			errc <- err
		}()
		br.waitLog(t, "server=fx", "wait started")
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call: %v", err)
		}
		br.waitLog(t, "server=fx", "wait cancelled")
	})

	t.Run("tool list change", func(t *testing.T) {
		for len(changed) > 0 {
			<-changed
		}
		if r := call(t, cs, "fx__add_tool", map[string]any{"name": "extra"}); text(r) != "added extra" {
			t.Fatalf("add_tool = %q", text(r))
		}
		waitFor(t, "fx__extra to be listed", func() bool { return slices.Contains(toolNames(t, cs), "fx__extra") })
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Error("no notifications/tools/list_changed reached the client")
		}
		if r := call(t, cs, "fx__extra", nil); text(r) != "I am extra" {
			t.Errorf("extra = %q", text(r))
		}
		call(t, cs, "fx__remove_tool", map[string]any{"name": "extra"})
		waitFor(t, "fx__extra to go", func() bool { return !slices.Contains(toolNames(t, cs), "fx__extra") })
	})

	t.Run("crash mid-call", func(t *testing.T) {
		before := br.pids()
		started := br.countLog("server=fx", "wait started")
		errc := callAsync(context.Background(), cs, "fx__wait")
		br.waitLogN(t, started+1, "server=fx", "wait started")
		// The child dies under the call: SIGKILL, as the OOM killer would.
		must(t, syscall.Kill(before[len(before)-1], syscall.SIGKILL))
		if r := <-errc; !r.IsError || text(r) != route.MsgDisconnected {
			t.Errorf("in-flight call = %v %q, want %q", r.IsError, text(r), route.MsgDisconnected)
		}
		waitFor(t, "a new child", func() bool { return len(br.pids()) > len(before) })
		waitFor(t, "the tools to come back", func() bool { return slices.Contains(toolNames(t, cs), "fx__pid") })
		r := callEventually(t, cs, "fx__pid")
		if text(r) == strconv.Itoa(before[len(before)-1]) {
			t.Errorf("the same process answered after the crash")
		}
		// A crash the server does itself.
		before = br.pids()
		if r := call(t, cs, "fx__crash", nil); !r.IsError || text(r) != route.MsgDisconnected {
			t.Errorf("crash = %v %q", r.IsError, text(r))
		}
		waitFor(t, "a new child", func() bool { return len(br.pids()) > len(before) })
		br.waitLog(t, "server=fx", "crashing on purpose")
		callEventually(t, cs, "fx__pid")
	})

	t.Run("hang", func(t *testing.T) {
		before := br.pids()
		r := call(t, cs, "fx__hang", nil)
		if !r.IsError || text(r) != route.MsgDisconnected {
			t.Errorf("hang = %v %q", r.IsError, text(r))
		}
		waitFor(t, "a new child", func() bool { return len(br.pids()) > len(before) })
		callEventually(t, cs, "fx__pid")
	})

	if strings.Contains(br.log.String(), secret) {
		t.Errorf("the bridge's log holds the secret from env")
	}
}

// callEventually calls a tool until a result that is not an error comes,
// while a restarted server registers again.
func callEventually(t *testing.T, cs *mcp.ClientSession, name string) *mcp.CallToolResult {
	t.Helper()
	return callEventuallyWith(t, cs, name, map[string]any{})
}

// callEventuallyWith is callEventually with arguments.
func callEventuallyWith(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	var res *mcp.CallToolResult
	poll(t, name+" to answer without an error", 0, func() (attempt, bool) {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return attempt{err: err}, false
		}
		res = r
		return attempt{out: text(r)}, !r.IsError
	})
	return res
}

// TestBridgeDrainsOnSIGTERM runs the real `spacefix bridge` command: on
// SIGTERM the gateway sends it nothing new, the call it is serving
// finishes with the server's answer, and it exits 0.
func TestBridgeDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before := len(e.gw.Registry().All())
	cmd := exec.Command(binary(t, "../cmd/spacefix"), "bridge", "--url", e.url, "--key", e.agentKey, "--name", "fx", "--", binary(t, "./bridgeserver"))
	p, logs := startCmd(t, cmd)
	waitFor(t, "the bridge to connect", func() bool { return len(e.gw.Registry().All()) > before })

	cs := e.connect("2025-11-25", e.clientKey, nil)
	res := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__sleep", Arguments: map[string]any{"ms": 1500}})
		if err != nil {
			r = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		res <- r
	}()
	waitFor(t, "the call to reach the bridge", func() bool { return inflight(e) > 0 })
	p.term()
	if r := <-res; r.IsError || text(r) != "slept" {
		t.Errorf("the call in flight at SIGTERM = %v %q, want the server's answer", r.IsError, text(r))
	}
	p.wait(t)
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM\n%s", code, logs)
	}
	if strings.Contains(logs.String(), e.agentKey) {
		t.Errorf("the bridge logged its agent key")
	}
}

// TestBridgeConfigFile runs `spacefix bridge --config` with two servers of
// an mcpServers file, ${VAR} taken from the environment: each connects as
// its own agent, under its own prefix, and the variable reaches the child.
func TestBridgeConfigFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fixture := binary(t, "./bridgeserver")
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	must(t, os.WriteFile(cfg, []byte(`{"mcpServers": {
		"alpha": {"command": "`+fixture+`", "env": {"FIXTURE_SECRET": "${BRIDGE_TEST_SECRET}"}},
		"beta":  {"command": "`+fixture+`", "prefix": false}
	}}`), 0o600))
	before := len(e.gw.Registry().All())
	cmd := exec.Command(binary(t, "../cmd/spacefix"), "bridge", "--url", e.url, "--key", e.agentKey, "--config", cfg)
	cmd.Env = append(os.Environ(), "BRIDGE_TEST_SECRET=twelve-chars")
	p, logs := startCmd(t, cmd)
	waitFor(t, "both servers to connect", func() bool { return len(e.gw.Registry().All()) >= before+2 })

	cs := e.connect("2025-11-25", e.clientKey, nil)
	names := toolNames(t, cs)
	for _, want := range []string{"alpha__echo", "alpha__secret", "echo", "secret"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s is not listed: %v", want, names)
		}
	}
	if r := callEventually(t, cs, "alpha__secret"); text(r) != "12" {
		t.Errorf("alpha's child got FIXTURE_SECRET of length %q, want 12", text(r))
	}
	if r := callEventually(t, cs, "secret"); text(r) != "0" {
		t.Errorf("beta's child got FIXTURE_SECRET of length %q, want 0", text(r))
	}
	p.term()
	p.wait(t)
	if strings.Contains(logs.String(), "twelve-chars") {
		t.Errorf("the bridge logged a value from env")
	}
}
