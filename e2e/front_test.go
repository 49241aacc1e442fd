package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
)

// TestViewFirstUseSeesEveryTool: a key's view of the project is made on
// its first request; requests that arrive together on a fresh view all
// see every tool: tools/list lists them all and tools/call finds the last
// one, never "unknown tool".
func TestViewFirstUseSeesEveryTool(t *testing.T) {
	t.Parallel()
	const tools = 250 // under the 256 an agent may register
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		for i := range tools {
			name := fmt.Sprintf("tool_%03d", i)
			must(t, core.AddTool(a, name, "Says its name.", func(context.Context, Empty) (string, error) { return name, nil }, core.ReadOnly()))
		}
	})
	waitFor(t, "every tool to register", func() bool { return len(e.gw.Registry().Snapshot(e.project.ID).ToolList) == tools })
	last := fmt.Sprintf("tool_%03d", tools-1)

	for round := range 4 {
		_, key := e.newKey(store.Key{Kind: store.KindClient}) // a fresh view
		start := make(chan struct{})
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			problems []string
		)
		for i := range 16 {
			wg.Go(func() {
				<-start
				var problem string
				if i%2 == 0 {
					resp, body := modernCall(t, e, key, "tools/list", "", "{}")
					var out struct {
						Result struct {
							Tools []struct{ Name string } `json:"tools"`
						} `json:"result"`
					}
					if err := json.Unmarshal(sseData(body), &out); err != nil || resp.StatusCode != 200 || len(out.Result.Tools) != tools {
						problem = fmt.Sprintf("tools/list = %d with %d tools; want 200 with %d", resp.StatusCode, len(out.Result.Tools), tools)
					}
				} else {
					resp, body := modernCall(t, e, key, "tools/call", last, `{"name":"`+last+`","arguments":{}}`)
					var out struct {
						Result struct {
							Content []struct{ Text string } `json:"content"`
						} `json:"result"`
					}
					if err := json.Unmarshal(sseData(body), &out); err != nil || resp.StatusCode != 200 || len(out.Result.Content) != 1 || out.Result.Content[0].Text != last {
						problem = fmt.Sprintf("tools/call %s = %d %s; want its name", last, resp.StatusCode, body)
					}
				}
				if problem != "" {
					mu.Lock()
					problems = append(problems, problem)
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		for _, p := range problems {
			t.Errorf("round %d, a first request on a fresh view: %s", round, p)
		}
	}
}

// TestLogQuietForClientMistakes: what clients do wrong or leave undone is
// not the gateway's fault, so it logs no WARN or ERROR for it: an idle
// session (no GET stream) across several tool-list changes, whose
// list_changed notifications go nowhere, and a client sending malformed
// JSON-RPC bodies, in a session and without.
func TestLogQuietForClientMistakes(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	e := newEnv(t, withConfig(func(c *gateway.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}))
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "echo", "Echoes.", func(context.Context, Empty) (string, error) { return "echo", nil }, core.ReadOnly()))
	})
	idle := e.newRawSession(e.clientKey) // never opens the GET stream
	if st, body := idle.call(2, "echo", "{}"); st != 200 || !strings.Contains(body, `"text":"echo"`) {
		t.Fatalf("a call in the idle session = %d %s", st, body)
	}

	// Three tool-list changes, each a list_changed the idle session cannot
	// take (logged, at DEBUG, once go-sdk tried).
	const changes = 3
	tried := regexp.MustCompile(`msg="calling notifications/tools/list_changed: rejected by transport`)
	for i := range changes {
		name := fmt.Sprintf("added_%d", i)
		e.startAgent(core.Options{}, func(a *core.Agent) {
			must(t, core.AddTool(a, name, "Added.", func(context.Context, Empty) (string, error) { return name, nil }, core.ReadOnly()))
		})
		waitFor(t, "the list change to be sent to the idle session", func() bool { return len(tried.FindAllString(logs.String(), -1)) > i })
	}

	// Malformed bodies: without a session and in one.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, body := range []string{
		`not json`,
		`{"jsonrpc":"2.0","id":1}`,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
		`[`,
		`[]`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":"no/such/method","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`,
	} {
		for _, session := range []string{"", idle.id} {
			resp, err := rawPost(ctx, idle.client, e.url, e.clientKey, session, body)
			if err != nil {
				t.Fatal(err)
			}
			answer(t, resp)
		}
	}
	fresh := e.newRawSession(e.clientKey)
	for _, body := range []string{
		initializeBody, // again, in the session
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":"x"}}`,
	} {
		resp, err := fresh.post(ctx, body)
		if err != nil {
			t.Fatal(err)
		}
		answer(t, resp)
	}
	// A session not yet initialized (initialize answered, no
	// notifications/initialized) asked for its tools.
	resp, err := rawPost(ctx, idle.client, e.url, e.clientKey, "", initializeBody)
	if err != nil {
		t.Fatal(err)
	}
	half := resp.Header.Get("Mcp-Session-Id")
	answer(t, resp)
	if resp, err = rawPost(ctx, idle.client, e.url, e.clientKey, half, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`); err != nil {
		t.Fatal(err)
	}
	answer(t, resp)
	// 2026-07-28 requests that break its rules.
	for _, c := range []struct{ method, params string }{
		{"initialize", `{"protocolVersion":"2026-07-28","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`},
		{"tools/call", `{"name":"echo","arguments":"x"}`},
		{"logging/setLevel", `{"level":"debug"}`},
	} {
		modernCall(t, e, e.clientKey, c.method, "", c.params)
	}

	// Still serving, and nothing at WARN or ERROR.
	if st, body := idle.call(9, "echo", "{}"); st != 200 || !strings.Contains(body, `"text":"echo"`) {
		t.Errorf("a call in the idle session after it all = %d %s", st, body)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("the gateway logged a client's doing as its own fault: %s", line)
		}
	}
}
