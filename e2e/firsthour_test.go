package e2e

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/testenv"
)

// The first hour of a newcomer: `spacefix serve` on a fresh store prints
// command lines to paste. These tests run the real binary, take the lines
// from what it printed and run them as printed, with the MCP clients from
// npm pinned in e2e/clients (npm ci --prefix e2e/clients).

// clientsDir returns e2e/clients with its node_modules installed, or skips.
func clientsDir(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs MCP clients from npm; skipped under -short")
	}
	dir, err := filepath.Abs("clients")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("npx"); err != nil {
		testenv.Unavailable(t, "npx is not on PATH; install Node.js 20 or later with npm to run the printed client lines")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		testenv.Unavailable(t, "e2e/clients/node_modules is missing; install the pinned MCP clients with: npm ci --prefix e2e/clients")
	}
	return dir
}

// firstStart is a `spacefix serve` process on a fresh store and what it
// printed at start.
type firstStart struct {
	out   string            // everything printed on stdout
	lines map[string]string // printed command lines, by what they start with
}

// serveFresh runs the real binary on a fresh store in a temporary
// directory, as `spacefix serve --addr 127.0.0.1:0`, and returns once the
// first-start text is complete.
func serveFresh(t *testing.T) *firstStart {
	t.Helper()
	return serveIn(t, t.TempDir())
}

// serveIn is serveFresh in dir, whose spacefix.db may exist already.
func serveIn(t *testing.T, dir string) *firstStart {
	t.Helper()
	bin := binary(t, "../cmd/spacefix")
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SPACEFIX_DATA=", "SPACEFIX_ADDR=")
	cmd.Stderr = os.Stderr
	if !testing.Verbose() {
		cmd.Stderr = io.Discard
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	got := make(chan *firstStart, 1)
	go func() {
		fs := &firstStart{lines: map[string]string{}}
		sc := bufio.NewScanner(stdout)
		var b strings.Builder
		for sc.Scan() {
			line := sc.Text()
			b.WriteString(line + "\n")
			cmd := strings.TrimSpace(line)
			for _, prefix := range []string{"claude mcp add", "SPACEFIX_API_KEY="} {
				if strings.HasPrefix(cmd, prefix) {
					fs.lines[prefix] = cmd
				}
			}
			if strings.HasPrefix(cmd, "npx ") {
				method := cmd[strings.Index(cmd, "--method ")+len("--method "):]
				fs.lines["npx "+strings.Fields(method)[0]] = cmd
				if strings.HasPrefix(method, "tools/call") {
					fs.out = b.String()
					got <- fs
				}
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case fs := <-got:
		return fs
	case <-time.After(30 * time.Second):
		t.Fatal("spacefix serve did not print its first-start text with a tools/call line within 30s")
		return nil
	}
}

// shell runs one printed line with bash in dir and returns its output.
func shell(t *testing.T, dir string, env []string, line string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// startPrinted starts the printed example agent line in the repository root,
// as "another terminal of this repository", and waits until tools/list
// through the gateway lists its tools.
func startPrinted(t *testing.T, line string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = root
	// The orders file goes to a temporary directory, not the clone.
	cmd.Env = append(os.Environ(), "ORDERS_DB="+filepath.Join(t.TempDir(), "orders.db"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if testing.Verbose() {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		cmd.Wait()
	})
}

func TestInspectorLine(t *testing.T) {
	dir := clientsDir(t)
	fs := serveFresh(t)
	list, call := fs.lines["npx tools/list"], fs.lines["npx tools/call"]
	if list == "" || call == "" || fs.lines["SPACEFIX_API_KEY="] == "" {
		t.Fatalf("serve printed no Inspector tools/list and tools/call lines and no agent line:\n%s", fs.out)
	}
	startPrinted(t, fs.lines["SPACEFIX_API_KEY="])

	// The agent needs a moment to build and connect: poll the printed
	// tools/list line until it lists the example's tools.
	out := poll(t, "the printed line\n  "+list+"\nto list get_order", 2*time.Minute, func() (attempt, bool) {
		out, err := shell(t, dir, nil, list)
		return attempt{out: out, err: err}, err == nil && strings.Contains(out, `"name": "get_order"`)
	}).out
	for _, name := range []string{"create_order", "get_order", "search_orders"} {
		if !strings.Contains(out, `"name": "`+name+`"`) {
			t.Errorf("tools/list output lacks %s:\n%s", name, out)
		}
	}

	out, err := shell(t, dir, nil, call)
	if err != nil {
		t.Fatalf("the printed line\n  %s\nfailed: %v\n%s", call, err, out)
	}
	if !strings.Contains(out, `"customer": "ada"`) || strings.Contains(out, `"isError": true`) {
		t.Errorf("the printed tools/call line did not return order 1042:\n%s", out)
	}
}

func TestClaudeCodeLine(t *testing.T) {
	dir := clientsDir(t)
	fs := serveFresh(t)
	add := fs.lines["claude mcp add"]
	if add == "" {
		t.Fatalf("serve printed no claude mcp add line:\n%s", fs.out)
	}
	// A newcomer's machine: Claude Code on PATH, a home of its own.
	home := t.TempDir()
	env := []string{
		"HOME=" + home,
		"PATH=" + filepath.Join(dir, "node_modules", ".bin") + string(os.PathListSeparator) + os.Getenv("PATH"),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
	if out, err := shell(t, home, env, add); err != nil || !strings.Contains(out, "Added HTTP MCP server spacefix") {
		t.Fatalf("the printed line\n  %s\nfailed: %v\n%s", add, err, out)
	}
	out, err := shell(t, home, env, "claude mcp list")
	mcpURL := strings.Fields(add)[6]
	if want := "spacefix: " + mcpURL + " (HTTP) - ✔ Connected"; err != nil || !strings.Contains(out, want) {
		t.Errorf("claude mcp list: %v\n%s\nwant a line %q", err, out, want)
	}
}

// recorder keeps every response body a client reads.
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := r.base.RoundTrip(req)
	if err == nil {
		res.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(res.Body, r), res.Body}
	}
	return res, err
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func (r *recorder) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.buf.String()
	r.buf.Reset()
	return s
}

// ttlMs and cacheScope exist from protocol 2026-07-28 on; the list results
// of 2025-era sessions must not carry them.
func TestFirstHourCacheFieldsByEra(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "echo", "Echo.", func(ctx context.Context, in struct{}) (string, error) { return "ok", nil }))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		rec := &recorder{base: bearer{key: e.clientKey, base: http.DefaultTransport}}
		client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp", HTTPClient: &http.Client{Transport: rec}}, &mcp.ClientSessionOptions{ProtocolVersion: v})
		must(t, err)
		defer cs.Close()
		rec.take()
		for _, list := range []struct {
			method string
			do     func() error
		}{
			{"tools/list", func() error { _, err := cs.ListTools(ctx, nil); return err }},
			{"resources/list", func() error { _, err := cs.ListResources(ctx, nil); return err }},
			{"prompts/list", func() error { _, err := cs.ListPrompts(ctx, nil); return err }},
		} {
			must(t, list.do())
			body := rec.take()
			modern := v >= "2026-07-28"
			for _, field := range []string{`"ttlMs"`, `"cacheScope":"private"`} {
				if got := strings.Contains(body, field); got != modern {
					t.Errorf("%s at %s: carries %s = %v, want %v; body:\n%s", list.method, v, field, got, modern, body)
				}
			}
		}
	})
}

// The gateway's log for clients that come and go and an agent told goodbye
// at shutdown: one INFO line per client session at most, nothing at WARN or
// ERROR, and the agent's ending in words.
func TestFirstHourLogs(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	e := newEnv(t, func(o *envOptions) { o.logs = logs })
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "echo", "Echo.", func(ctx context.Context, in struct{}) (string, error) { return "ok", nil }))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		toolNames(t, cs)
		call(t, cs, "echo", map[string]any{})
		cs.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	must(t, e.gw.Shutdown(ctx))

	var info []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("a normal run logged: %s", line)
		}
		if strings.Contains(line, "level=INFO") {
			_, msg, _ := strings.Cut(line, "msg=")
			info = append(info, strings.TrimSpace(msg))
		}
	}
	// Two sessions (2025-06-18 and 2025-11-25) and stateless 2026-07-28
	// requests.
	if n := strings.Count(logs.String(), `msg="session initialized"`); n != 2 {
		t.Errorf("%d INFO lines \"session initialized\", want one per 2025-era session (2):\n%s", n, strings.Join(info, "\n"))
	}
	for _, m := range info {
		if strings.HasPrefix(m, `"server `) {
			t.Errorf("go-sdk's connection noise at INFO: %s", m)
		}
	}
	want := `msg="agent disconnected" replica=`
	wantReason := `reason="the gateway said goodbye (gateway shutting down)"`
	found := false
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, want) {
			found = true
			if !strings.Contains(line, wantReason) {
				t.Errorf("the agent's ending at shutdown: %s want %s", line, wantReason)
			}
		}
	}
	if !found {
		t.Errorf("no %q line in the log:\n%s", want, logs.String())
	}
}
