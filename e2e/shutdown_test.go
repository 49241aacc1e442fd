package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
)

// Shutdown lets a call in flight finish, fails one that outlasts the grace
// with a message that says why, and tells the agent goodbye.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.shutdownGrace = 700 * time.Millisecond })
	started := make(chan string, 2)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "brief", "Takes 300ms.", func(ctx context.Context, in Empty) (string, error) {
			started <- "brief"
			time.Sleep(300 * time.Millisecond) // the behaviour: a call that ends within the grace
			return "finished in time", nil
		}))
		must(t, core.AddTool(a, "endless", "Takes forever.", func(ctx context.Context, in Empty) (string, error) {
			started <- "endless"
			<-ctx.Done()
			return "", ctx.Err()
		}))
	})
	cs := e.connect("2025-11-25", e.clientKey, nil)
	results := make(chan *mcp.CallToolResult, 2)
	for _, name := range []string{"brief", "endless"} {
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
			if err != nil {
				res = errorResultForTest(err)
			}
			results <- res
		}()
	}
	for range 2 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("calls did not start")
		}
	}
	done := make(chan error, 1)
	go func() { done <- e.gw.Shutdown(context.Background()) }()

	got := map[string]bool{}
	for range 2 {
		select {
		case res := <-results:
			got[text(res)] = true
		case <-time.After(10 * time.Second):
			t.Fatal("a call in flight got no answer during shutdown")
		}
	}
	for _, want := range []string{"finished in time", "The gateway is shutting down and stopped this call. Try again in a moment."} {
		if !got[want] {
			t.Errorf("answers during shutdown = %v; missing %q", got, want)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	if _, err := http.Get(e.url + "/healthz"); err == nil {
		t.Error("the gateway still answers after Shutdown")
	}
}

func errorResultForTest(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "error: " + err.Error()}}}
}

// Close is a graceful shutdown with the configured grace: a call in flight
// when Close starts still gets its answer.
func TestCloseLetsCallsFinish(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started, release := make(chan struct{}), make(chan struct{})
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "brief", "Waits to be released.", func(ctx context.Context, in Empty) (string, error) {
			close(started)
			select {
			case <-release:
				return "finished in time", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}))
	})
	cs := e.connect("2025-11-25", e.clientKey, nil)
	results := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "brief", Arguments: map[string]any{}})
		if err != nil {
			res = errorResultForTest(err)
		}
		results <- res
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not start")
	}
	done := make(chan error, 1)
	go func() { done <- e.gw.Close() }()
	// Once the gateway stops accepting connections, Close is under way.
	waitFor(t, "Close to stop accepting connections", func() bool {
		res, err := http.Get(e.url + "/healthz")
		if err == nil {
			res.Body.Close()
		}
		return err != nil
	})
	select {
	case res := <-results:
		t.Fatalf("the call in flight was answered %q before its handler returned", text(res))
	default:
	}
	close(release)
	select {
	case res := <-results:
		if got := text(res); got != "finished in time" {
			t.Errorf("answer during Close = %q, want %q", got, "finished in time")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight got no answer during Close")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
}
