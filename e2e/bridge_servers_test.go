package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/bridge"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/testenv"
)

// goEverything is go-sdk's conformance everything-server, built from the
// module cache.
const goEverything = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"

// npmServer returns the path of a server's entry point under
// e2e/servers/node_modules (pinned: npm ci --prefix e2e/servers), or skips.
func npmServer(t *testing.T, pkg, entry string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs MCP servers from npm; skipped under -short")
	}
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Unavailable(t, "node is not on PATH; install Node.js 20 or later to run the bridged npm servers")
	}
	p, err := filepath.Abs(filepath.Join("servers", "node_modules", pkg, entry))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		testenv.Unavailable(t, "e2e/servers/node_modules is missing; install the pinned MCP servers with: npm ci --prefix e2e/servers")
	}
	return p
}

// progressCollector gathers the progress messages a client receives.
type progressCollector struct {
	mu    sync.Mutex
	lines []string
}

func (p *progressCollector) handler(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, r.Params.Message)
}

func (p *progressCollector) got() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lines)
}

// TestBridgeGoEverything bridges go-sdk's conformance everything-server
// over stdio and drives it through the gateway at two protocol versions:
// text, image, audio and error results unchanged, the server's own 2020-12
// schema validated by the gateway, progress, a prompt, a resource, a
// tool-list change the server announces, and a crash of the child.
func TestBridgeGoEverything(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	br := e.startBridge(bridge.Server{Name: "ev", Command: binary(t, goEverything)}, bridge.Options{})
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			var progress progressCollector
			cs := e.connect(v, e.clientKey, &mcp.ClientOptions{ProgressNotificationHandler: progress.handler})
			names := toolNames(t, cs)
			for _, want := range []string{"ev__test_simple_text", "ev__test_image_content", "ev__json_schema_2020_12_tool", "ev__test_tool_with_progress"} {
				if !slices.Contains(names, want) {
					t.Fatalf("%s is not listed: %v", want, names)
				}
			}
			if r := call(t, cs, "ev__test_simple_text", nil); r.IsError || text(r) != "This is a simple text response for testing." {
				t.Errorf("simple text = %v %q", r.IsError, text(r))
			}
			r := call(t, cs, "ev__test_image_content", nil)
			if img, ok := r.Content[0].(*mcp.ImageContent); !ok || img.MIMEType != "image/png" || len(img.Data) == 0 {
				t.Errorf("image = %#v", r.Content[0])
			}
			r = call(t, cs, "ev__test_audio_content", nil)
			if au, ok := r.Content[0].(*mcp.AudioContent); !ok || au.MIMEType != "audio/wav" || len(au.Data) == 0 {
				t.Errorf("audio = %#v", r.Content[0])
			}
			if r := call(t, cs, "ev__test_error_handling", nil); !r.IsError || text(r) != "this tool intentionally returns an error for testing" {
				t.Errorf("error = %v %q", r.IsError, text(r))
			}

			r = call(t, cs, "ev__json_schema_2020_12_tool", map[string]any{"name": "Ada", "contactMethod": "phone", "email": "a@b.c", "extra": 1})
			const prefix = "Input validation error: Invalid arguments for tool ev__json_schema_2020_12_tool: "
			if !r.IsError || text(r) != prefix+`data must have required property 'phone', data must match "then" schema, data must NOT have additional properties` {
				t.Errorf("invalid 2020-12 arguments = %v %q", r.IsError, text(r))
			}
			r = call(t, cs, "ev__json_schema_2020_12_tool", map[string]any{"name": "Ada", "contactMethod": "phone", "phone": "1", "address": map[string]any{"city": "Paris"}})
			if r.IsError {
				t.Errorf("valid 2020-12 arguments refused: %q", text(r))
			}

			r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ev__test_tool_with_progress", Arguments: map[string]any{}, Meta: mcp.Meta{"progressToken": "p-" + v}})
			must(t, err)
			if r.IsError {
				t.Errorf("progress tool: %q", text(r))
			}
			// The last line may lose the race with the result (progress is
			// best effort); the others arrive in order.
			want := []string{"Completed step 0 of 100 (0/100)", "Completed step 50 of 100 (50/100)", "Completed step 100 of 100 (100/100)"}
			if got := progress.got(); len(got) < 2 || !slices.Equal(got, want[:len(got)]) {
				t.Errorf("progress lines = %q, want %q", got, want)
			}

			pr, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "ev__test_simple_prompt"})
			must(t, err)
			if tc, ok := pr.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "This is a simple prompt for testing." {
				t.Errorf("prompt = %#v", pr.Messages[0].Content)
			}
			rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "test://static-text"})
			must(t, err)
			if len(rr.Contents) != 1 || rr.Contents[0].Text == "" {
				t.Errorf("resource = %+v", rr.Contents)
			}
		})
	}

	t.Run("tool list change", func(t *testing.T) {
		cs := e.connect("2025-11-25", e.clientKey, nil)
		changes := br.countLog("lists changed; registering again")
		if r := call(t, cs, "ev__test_trigger_tool_change", nil); text(r) != "tools_list_changed published" {
			t.Fatalf("trigger = %q", text(r))
		}
		br.waitLogN(t, changes+1, "lists changed; registering again")
		// The tool it adds has a name the gateway refuses; the bridge says so.
		br.waitLog(t, "not registered", "name=__transient_tool_for_list_changed")
		callEventually(t, cs, "ev__test_simple_text")
	})

	t.Run("crash", func(t *testing.T) {
		cs := e.connect("2025-11-25", e.clientKey, nil)
		pids := br.pids()
		must(t, syscall.Kill(pids[len(pids)-1], syscall.SIGKILL))
		waitFor(t, "a new child", func() bool { return len(br.pids()) > len(pids) })
		callEventually(t, cs, "ev__test_simple_text")
	})
}

// TestBridgeNpmEverything bridges @modelcontextprotocol/server-everything
// over stdio and over Streamable HTTP: list, call, an image, progress, a
// cancelled call, a crash of the child, and a remote that goes down and
// comes back.
func TestBridgeNpmEverything(t *testing.T) {
	t.Parallel()
	entry := npmServer(t, "@modelcontextprotocol/server-everything", "dist/index.js")
	e := newEnv(t)

	check := func(t *testing.T, prefix string) {
		var progress progressCollector
		cs := e.connect("2025-11-25", e.clientKey, &mcp.ClientOptions{ProgressNotificationHandler: progress.handler})
		// The server announces a list change right after it starts, so the
		// bridge registers twice; the client's view follows the second.
		callEventuallyWith(t, cs, prefix+"__echo", map[string]any{"message": "ready"})
		names := toolNames(t, cs)
		for _, want := range []string{prefix + "__echo", prefix + "__get-sum", prefix + "__get-tiny-image", prefix + "__trigger-long-running-operation"} {
			if !slices.Contains(names, want) {
				t.Fatalf("%s is not listed: %v", want, names)
			}
		}
		if r := call(t, cs, prefix+"__echo", map[string]any{"message": "hi"}); r.IsError || text(r) != "Echo: hi" {
			t.Errorf("echo = %v %q", r.IsError, text(r))
		}
		if r := call(t, cs, prefix+"__get-sum", map[string]any{"a": 2, "b": 40}); r.IsError || !strings.Contains(text(r), "42") {
			t.Errorf("get-sum = %v %q", r.IsError, text(r))
		}
		if r := call(t, cs, prefix+"__get-sum", map[string]any{"a": "two", "b": 40}); !r.IsError ||
			text(r) != "Input validation error: Invalid arguments for tool "+prefix+"__get-sum: data/a must be number" {
			t.Errorf("get-sum with a string = %v %q", r.IsError, text(r))
		}
		r := call(t, cs, prefix+"__get-tiny-image", nil)
		if !slices.ContainsFunc(r.Content, func(c mcp.Content) bool {
			img, ok := c.(*mcp.ImageContent)
			return ok && img.MIMEType == "image/png" && len(img.Data) > 0
		}) {
			t.Errorf("get-tiny-image has no PNG: %v", text(r))
		}
		r = call(t, cs, prefix+"__get-resource-links", map[string]any{"count": 2})
		links := 0
		for _, c := range r.Content {
			if l, ok := c.(*mcp.ResourceLink); ok && strings.HasPrefix(l.URI, "demo://resource/") {
				links++
			}
		}
		if r.IsError || links != 2 {
			t.Errorf("get-resource-links: %d resource links, want 2: %q", links, text(r))
		}
		r = call(t, cs, prefix+"__get-structured-content", map[string]any{"location": "New York"})
		if sc, _ := r.StructuredContent.(map[string]any); r.IsError || sc["temperature"] != float64(33) || sc["conditions"] != "Cloudy" {
			t.Errorf("get-structured-content: structuredContent %v", r.StructuredContent)
		}
		if r := call(t, cs, prefix+"__get-structured-content", map[string]any{"location": "Paris"}); !r.IsError ||
			!strings.HasPrefix(text(r), "Input validation error: Invalid arguments for tool "+prefix+"__get-structured-content: data/location must be equal to one of the allowed values") {
			t.Errorf("get-structured-content for Paris = %v %q", r.IsError, text(r))
		}
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: prefix + "__trigger-long-running-operation",
			Arguments: map[string]any{"duration": 1.5, "steps": 3}, Meta: mcp.Meta{"progressToken": 7}})
		must(t, err)
		if r.IsError || !strings.HasPrefix(text(r), "Long running operation completed.") {
			t.Errorf("long-running = %v %q", r.IsError, text(r))
		}
		// Progress is best effort: go-sdk's client hands a response to its
		// caller at once but queues notifications for their handler, so a
		// line the bridge's client has not handled when the result comes is
		// dropped. The steps are half a second apart so that only the last
		// can be; the test's own client may see its lines a little after the
		// result, for the same reason.
		waitFor(t, "two progress lines", func() bool { return len(progress.got()) >= 2 })
		if got := progress.got(); got[0] != "1/3" || got[1] != "2/3" {
			t.Errorf("progress lines = %q, want 1/3, 2/3[, 3/3]", got)
		}

		ctx, cancel := context.WithCancel(context.Background())
		res := callAsync(ctx, cs, prefix+"__trigger-long-running-operation")
		waitFor(t, "the long call to start", func() bool { return inflight(e) > 0 })
		cancel()
		if r := <-res; !strings.Contains(text(r), context.Canceled.Error()) {
			t.Errorf("cancelled call = %q", text(r))
		}
		waitFor(t, "the call log to say cancelled", func() bool {
			return slices.ContainsFunc(e.calls(), func(c store.Call) bool {
				return c.Name == prefix+"__trigger-long-running-operation" && c.Outcome == store.OutcomeCancelled
			})
		})
	}

	t.Run("stdio", func(t *testing.T) {
		br := e.startBridge(bridge.Server{Name: "evs", Command: "node", Args: []string{entry, "stdio"}}, bridge.Options{})
		check(t, "evs")
		// The server's log messages go to the bridge's log.
		cs := e.connect("2025-11-25", e.clientKey, nil)
		call(t, cs, "evs__toggle-simulated-logging", nil)
		br.waitLog(t, "bridge: server log message", "server=evs", "-level message")
		call(t, cs, "evs__toggle-simulated-logging", nil)
		pids := br.pids()
		must(t, syscall.Kill(pids[len(pids)-1], syscall.SIGKILL))
		waitFor(t, "a new child", func() bool { return len(br.pids()) > len(pids) })
		callEventually(t, e.connect("2025-11-25", e.clientKey, nil), "evs__get-tiny-image")
		br.stop()
	})

	t.Run("streamable http", func(t *testing.T) {
		port := freePort(t)
		srv := startNode(t, entry, port, "streamableHttp")
		br := e.startBridge(bridge.Server{Name: "evh", URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port)}, bridge.Options{KeepAlive: 300 * time.Millisecond})
		check(t, "evh")
		br.waitLog(t, "connected to the MCP server", "transport=streamable-http")

		// The remote goes down: its tools go; it comes back: so do they.
		srv.kill()
		waitFor(t, "evh's tools to go", func() bool {
			return !slices.Contains(toolNames(t, e.connect("2025-11-25", e.clientKey, nil)), "evh__echo")
		})
		startNode(t, entry, port, "streamableHttp")
		cs := e.connect("2025-11-25", e.clientKey, nil)
		waitFor(t, "evh's tools to come back", func() bool { return slices.Contains(toolNames(t, cs), "evh__echo") })
		callEventually(t, cs, "evh__get-tiny-image")
	})

	t.Run("legacy sse", func(t *testing.T) {
		port := freePort(t)
		startNode(t, entry, port, "sse")
		const secret = "hdr-secret-never-logged"
		br := e.startBridge(bridge.Server{Name: "evo", URL: fmt.Sprintf("http://127.0.0.1:%d/sse", port),
			Headers: map[string]string{"X-Api-Key": secret}}, bridge.Options{})
		br.waitLog(t, "connected to the MCP server", "transport=sse")
		cs := e.connect("2025-11-25", e.clientKey, nil)
		if r := callEventuallyWith(t, cs, "evo__echo", map[string]any{"message": "old"}); r.IsError || text(r) != "Echo: old" {
			t.Errorf("echo over SSE = %v %q", r.IsError, text(r))
		}
		if strings.Contains(br.log.String(), secret) {
			t.Errorf("the bridge's log holds a header value")
		}
	})
}

// inflight counts the calls the env's agents are serving.
func inflight(e *env) int64 {
	var n int64
	for _, r := range e.gw.Registry().All() {
		n += r.Inflight()
	}
	return n
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startNode runs server-everything in mode (streamableHttp, sse) on port
// and waits until it listens.
func startNode(t *testing.T, entry string, port int, mode string) *proc {
	t.Helper()
	cmd := exec.Command("node", entry, mode)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.Stderr = logOutput()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	waitFor(t, "the npm server to listen", func() bool { return dialable(port) })
	return p
}

// dialable reports whether something listens on the loopback port.
func dialable(port int) bool {
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err == nil {
		c.Close()
	}
	return err == nil
}

// TestBridgeFilesystemCLI runs @modelcontextprotocol/server-filesystem
// behind the real `spacefix bridge` command, as the README shows it: a
// file in the allowed folder is read, one outside it gets the server's own
// refusal as an error result, and SIGTERM stops the bridge cleanly.
func TestBridgeFilesystemCLI(t *testing.T) {
	t.Parallel()
	entry := npmServer(t, "@modelcontextprotocol/server-filesystem", "dist/index.js")
	e := newEnv(t)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("bridged!"), 0o600))

	before := len(e.gw.Registry().All())
	cmd := exec.Command(binary(t, "../cmd/spacefix"), "bridge", "--url", e.url, "--name", "files", "--", "node", entry, dir)
	cmd.Env = append(os.Environ(), "SPACEFIX_API_KEY="+e.agentKey)
	p, logs := startCmd(t, cmd)
	waitFor(t, "the bridge to connect", func() bool { return len(e.gw.Registry().All()) > before })

	cs := e.connect("2025-11-25", e.clientKey, nil)
	names := toolNames(t, cs)
	if !slices.Contains(names, "files__read_text_file") || !slices.Contains(names, "files__list_directory") {
		t.Fatalf("tools = %v", names)
	}
	if r := call(t, cs, "files__read_text_file", map[string]any{"path": filepath.Join(dir, "notes.txt")}); r.IsError || text(r) != "bridged!" {
		t.Errorf("read = %v %q", r.IsError, text(r))
	}
	r := call(t, cs, "files__read_text_file", map[string]any{"path": "/etc/hostname"})
	if !r.IsError || !strings.Contains(text(r), "Access denied - path outside allowed directories") {
		t.Errorf("read outside = %v %q", r.IsError, text(r))
	}
	if r := call(t, cs, "files__read_text_file", map[string]any{}); !r.IsError ||
		text(r) != "Input validation error: Invalid arguments for tool files__read_text_file: data must have required property 'path'" {
		t.Errorf("no path = %v %q", r.IsError, text(r))
	}

	p.term()
	p.wait(t)
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("spacefix bridge exited %d after SIGTERM\n%s", code, logs)
	}
	waitFor(t, "the bridged agent to leave", func() bool { return len(e.gw.Registry().All()) == before })
	if !strings.Contains(logs.String(), `server=files`) || strings.Contains(logs.String(), e.agentKey) {
		t.Errorf("bridge log: want the server's name, never the key:\n%s", logs)
	}
	// The server asks for roots as it starts, outside any call: a healthy
	// start answers it (no roots) without an error on either side.
	for _, bad := range []string{"Failed to request initial roots", "cannot tell which call"} {
		if strings.Contains(logs.String(), bad) {
			t.Errorf("a healthy start logged %q:\n%s", bad, logs)
		}
	}
}
