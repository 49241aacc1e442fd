package e2e

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/store"
)

// Shutdown stops in order: it takes no new connection, lets the call in
// flight finish, and only then tells the agent goodbye; once it returns,
// the call log holds the call, written before the store closed.
func TestShutdownOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ev events
	release := make(chan struct{})
	e.startAgent(core.Options{Logger: slog.New(goodbyeHandler{&ev})}, func(a *core.Agent) {
		must(t, core.AddTool(a, "brief", "Waits to be released.", func(ctx context.Context, in Empty) (string, error) {
			ev.add("call started")
			select {
			case <-release:
				ev.add("call finished")
				return "finished in time", nil
			case <-ctx.Done():
				ev.add("call cancelled")
				return "", ctx.Err()
			}
		}))
	})
	cs := e.connect("2025-11-25", e.clientKey, nil)
	answers := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "brief", Arguments: map[string]any{}})
		if err != nil {
			res = errorResultForTest(err)
		}
		answers <- text(res)
	}()
	waitFor(t, "the call to start", func() bool { return ev.has("call started") })

	done := make(chan error, 1)
	go func() { done <- e.gw.Shutdown(context.Background()) }()
	waitFor(t, "Shutdown to refuse new connections", func() bool {
		res, err := http.Get(e.url + "/healthz")
		if err == nil {
			res.Body.Close()
		}
		return err != nil
	})
	ev.add("new connections refused")
	close(release)
	select {
	case got := <-answers:
		if got != "finished in time" {
			t.Errorf("the call in flight at shutdown was answered %q, want %q", got, "finished in time")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight got no answer during Shutdown")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	waitFor(t, "the agent to be told goodbye", func() bool { return ev.has("agent told goodbye") })

	want := []string{"call started", "new connections refused", "call finished", "agent told goodbye"}
	if got := ev.list(); !slices.Equal(got, want) {
		t.Errorf("shutdown went\n  %s\nwant\n  %s", strings.Join(got, ", "), strings.Join(want, ", "))
	}
	st := e.openStore()
	defer st.Close()
	calls, err := st.Calls(context.Background(), store.CallFilter{ProjectID: e.project.ID, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Name != "brief" || calls[0].Outcome != store.OutcomeOK {
		t.Errorf("call log after Shutdown = %+v, want the one call to brief, ok", calls)
	}
}

// events is an ordered record of what the parts of a test saw.
type events struct {
	mu   sync.Mutex
	seen []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen = append(e.seen, s)
}

// addOnce adds s unless it was seen already.
func (e *events) addOnce(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !slices.Contains(e.seen, s) {
		e.seen = append(e.seen, s)
	}
}

func (e *events) has(s string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.seen, s)
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.seen)
}

// goodbyeHandler is an agent's log, which records the first time the
// gateway told the agent goodbye.
type goodbyeHandler struct{ ev *events }

func (h goodbyeHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h goodbyeHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h goodbyeHandler) WithGroup(string) slog.Handler            { return h }

func (h goodbyeHandler) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" && strings.Contains(a.Value.String(), "the gateway said goodbye: gateway shutting down") {
			h.ev.addOnce("agent told goodbye")
		}
		return true
	})
	return nil
}
