package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/store"
)

type TextInput struct {
	Text string `json:"text"`
}

// sizeAgent offers size, which says how long its text argument is.
func (e *env) sizeAgent() {
	e.t.Helper()
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(e.t, core.AddTool(a, "size", "Says how long the text is.", func(ctx context.Context, in TextInput) (string, error) {
			return fmt.Sprint(len(in.Text)), nil
		}))
	})
}

// textArgs returns arguments of exactly n bytes: {"text":"xx…"}.
func textArgs(n int) json.RawMessage {
	return json.RawMessage(`{"text":"` + strings.Repeat("x", n-len(`{"text":""}`)) + `"}`)
}

// Arguments over the project's limit are refused, with a message that names
// the size, the limit and the setting, before any agent sees them.
func TestArgsOverLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sizeAgent()
	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "size", Arguments: textArgs(3_900_000)})
		want := `Arguments for tool size are 3,900,000 bytes; the limit is 1,048,576 bytes (project setting "Largest arguments"). Send smaller arguments, or ask the project's admin to raise the limit.`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("call with 3.9 MB of arguments: %v\nwant an error with %q", err, want)
		}
		if got := text(call(t, cs, "size", textArgs(1<<20))); got != fmt.Sprint(1<<20-11) {
			t.Errorf("arguments of exactly the limit: %q", got)
		}
	})
	if n := len(e.calls()); n != len(versions) {
		t.Errorf("call log has %d records, want %d: refused calls never reach an agent", n, len(versions))
	}
}

// A request body far over what the limit allows is refused before it is
// read, with 413 and a message naming the setting.
func TestArgsBodyTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.newRawSession(e.clientKey)
	body := toolCall(2, "size", string(textArgs(5_000_000)))
	resp, err := s.post(context.Background(), body)
	if err != nil {
		t.Fatal(err)
	}
	got := answer(t, resp)
	want := fmt.Sprintf(`{"error":{"code":-32000,"message":"The request is %s bytes; this gateway takes requests up to 4,194,304 bytes here, because tool arguments are limited to 1,048,576 bytes (project setting \"Largest arguments\"). Send smaller arguments."},"id":null,"jsonrpc":"2.0"}`, agentproto.Thousands(len(body)))
	if resp.StatusCode != http.StatusRequestEntityTooLarge || got != want {
		t.Errorf("%d %s\nwant 413 %s", resp.StatusCode, got, want)
	}
}

// A project that raises the limit takes larger arguments.
func TestArgsLimitSetting(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.settings = &store.ProjectSettings{MaxArgumentBytes: 8 << 20} })
	e.sizeAgent()
	cs := e.connect("2025-11-25", e.clientKey, nil)
	if got := text(call(t, cs, "size", textArgs(6_000_000))); got != fmt.Sprint(6_000_000-11) {
		t.Errorf("6 MB of arguments under an 8 MiB limit: %q", got)
	}
}

// TestArgsMemory reports what calls with large arguments allocate, in the
// whole process (client, gateway and agent). It asserts nothing and only
// runs with SPACEFIX_MEASURE=1 (and -v to read the figures).
func TestArgsMemory(t *testing.T) {
	if os.Getenv("SPACEFIX_MEASURE") == "" {
		t.Skip("a measurement: set SPACEFIX_MEASURE=1 to run it")
	}
	e := newEnv(t, func(o *envOptions) { o.settings = &store.ProjectSettings{MaxArgumentBytes: 8 << 20} })
	e.sizeAgent()
	cs := e.connect("2025-11-25", e.clientKey, nil)
	measure := func(name string, n int, limit int) {
		must(t, e.store.UpdateProjectSettings(context.Background(), e.project.ID, store.ProjectSettings{MaxArgumentBytes: limit}))
		e.gw.SettingsChanged(e.project.ID)
		args := textArgs(n)
		call(t, cs, "size", args) // warm up
		const calls = 5
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range calls {
			call(t, cs, "size", args)
		}
		runtime.ReadMemStats(&after)
		t.Logf("%s: %s bytes of arguments: %.1f MB allocated per call (%.1f× the arguments)", name, agentproto.Thousands(n),
			float64(after.TotalAlloc-before.TotalAlloc)/calls/1e6, float64(after.TotalAlloc-before.TotalAlloc)/calls/float64(n))
	}
	measure("accepted", 1_000_000, 0)
	measure("accepted", 3_900_000, 8<<20)
	must(t, e.store.UpdateProjectSettings(context.Background(), e.project.ID, store.ProjectSettings{}))
	e.gw.SettingsChanged(e.project.ID)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	args := textArgs(3_900_000)
	for range 5 {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "size", Arguments: args}); err == nil {
			t.Fatal("a call over the limit was taken")
		}
	}
	runtime.ReadMemStats(&after)
	t.Logf("refused: 3,900,000 bytes of arguments: %.1f MB allocated per call", float64(after.TotalAlloc-before.TotalAlloc)/5/1e6)

	// The heap while 16 calls of 1,000,000 bytes are in flight at once.
	release := make(chan struct{})
	arrived := make(chan struct{}, 16)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "hold", "Holds the call.", func(ctx context.Context, in TextInput) (string, error) {
			arrived <- struct{}{}
			<-release
			return "held", nil
		}))
	})
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hold", Arguments: textArgs(1_000_000)})
		}()
	}
	for range 16 {
		receive(t, arrived, "the calls to arrive")
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	close(release)
	wg.Wait()
	t.Logf("16 calls of 1,000,000 bytes in flight: heap %.1f MB over the baseline (%.1f MB per call, process-wide)",
		float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/1e6, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/16/1e6)
}
