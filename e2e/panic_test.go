package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/recovery"
)

// panicOn makes the gateway panic on the path named where (as
// recovery.SetTestHook names it) until the test ends or it is set to "".
// The hook is the process's: every gateway in it panics there. A test that
// uses it must not call t.Parallel, so that it runs alone (parallel tests
// start once the sequential ones are done).
func panicOn(t *testing.T) *atomic.Value {
	var where atomic.Value
	where.Store("")
	recovery.SetTestHook(func(w string) {
		if w == where.Load().(string) {
			panic("boom: secret-looking detail sfx_do_not_show")
		}
	})
	t.Cleanup(func() { recovery.SetTestHook(nil) })
	return &where
}

// A panic in any request path answers that request with a plain internal
// error, is logged at ERROR with its stack, and the gateway serves the next
// request.
func TestPanicRecovered(t *testing.T) {
	// Not parallel: see panicOn. It was, and a rolling restart running
	// beside it failed 4 of its calls with the injected panic.
	logs := new(syncBuffer)
	e := newEnv(t, func(o *envOptions) { o.logs = logs })
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, addOrderTools(a))
		must(t, a.Resource("orders://open", core.ResourceOptions{Name: "Open orders"},
			func(ctx context.Context) (any, error) { return []Order{orders[0]}, nil }))
		must(t, a.Prompt("summarise_order", core.PromptOptions{Description: "Summarise an order."},
			func(ctx context.Context, args map[string]string) (core.PromptResult, error) {
				return core.PromptText("Summarise."), nil
			}))
	})
	where := panicOn(t)
	logged := 0
	checkLog := func(t *testing.T, path string) {
		t.Helper()
		n := strings.Count(logs.String(), "panic recovered")
		if n != logged+1 {
			t.Errorf("%d panics logged, want %d", n, logged+1)
		}
		logged = n
		for _, s := range []string{"level=ERROR", `where="` + path + `"`, "sfx_do_not_show", "stack="} {
			if !strings.Contains(logs.String(), s) {
				t.Errorf("log lacks %q", s)
			}
		}
	}

	forEachVersion(t, func(t *testing.T, v string) {
		cs := e.connect(v, e.clientKey, nil)
		args := map[string]any{"id": "1042"}

		where.Store("mcp tools/call")
		res := call(t, cs, "get_order", args)
		if !res.IsError || text(res) != recovery.Message {
			t.Errorf("tools/call that panicked = isError %v %q, want %q", res.IsError, text(res), recovery.Message)
		}
		checkLog(t, "mcp tools/call")

		for _, c := range []struct {
			method string
			do     func() error
		}{
			{"resources/read", func() error {
				_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "orders://open"})
				return err
			}},
			{"prompts/get", func() error {
				_, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "summarise_order"})
				return err
			}},
		} {
			where.Store("mcp " + c.method)
			err := c.do()
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError || werr.Message != recovery.Message {
				t.Errorf("%s that panicked: err = %v, want JSON-RPC -32603 %q", c.method, err, recovery.Message)
			}
			checkLog(t, "mcp "+c.method)
			where.Store("")
			if err := c.do(); err != nil {
				t.Errorf("%s after a panic: %v", c.method, err)
			}
		}

		where.Store("")
		if res := call(t, cs, "get_order", args); res.IsError || !strings.Contains(text(res), `"1042"`) {
			t.Errorf("tools/call after a panic = isError %v %q", res.IsError, text(res))
		}
	})

	// HTTP: the admin API, the dashboard and agent registration.
	for _, path := range []string{"GET /api/projects", "GET /", "POST " + agentproto.RegisterPath} {
		t.Run(path, func(t *testing.T) {
			where.Store(path)
			method, p, _ := strings.Cut(path, " ")
			req, _ := http.NewRequest(method, e.url+p, strings.NewReader("{}"))
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 500 || strings.TrimSpace(string(body)) != recovery.Message {
				t.Errorf("%s that panicked = %d %q, want 500 %q", path, resp.StatusCode, body, recovery.Message)
			}
			checkLog(t, path)
			where.Store("")
			resp, err = http.Get(e.url + "/healthz")
			must(t, err)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("/healthz after a panic: %d", resp.StatusCode)
			}
		})
	}

	// The agent endpoint: a panic while handling an agent's message ends
	// that agent's connection only.
	t.Run("agent message", func(t *testing.T) {
		before := len(e.gw.Registry().All())
		ws := e.dialAgent(t, regWith("raw_tool"))
		ctx := context.Background()
		go func() { // read the welcome and the rest, answering pings
			for {
				if _, _, err := ws.Read(ctx); err != nil {
					return
				}
			}
		}()
		waitFor(t, "the raw replica to register", func() bool { return len(e.gw.Registry().All()) == before+1 })
		where.Store("agent message progress")
		must(t, ws.Write(ctx, websocket.MessageText, []byte(`{"type":"progress","id":"c-1","message":"hi"}`)))
		waitFor(t, "the raw replica to be dropped", func() bool { return len(e.gw.Registry().All()) == before })
		checkLog(t, "agent message progress")
		where.Store("")
		cs := e.connect("2025-11-25", e.clientKey, nil)
		if res := call(t, cs, "get_order", map[string]any{"id": "1042"}); res.IsError {
			t.Errorf("tools/call after an agent connection panicked: %q", text(res))
		}
	})

	// Every panic shows in the metrics an operator alerts on.
	wantMetric(t, e.scrape(e.adminToken()), float64(logged), "spacefix_panics_recovered_total")
}
