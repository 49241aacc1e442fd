//lint:file-ignore SA1019 logging is deprecated in 2026-07-28 (SEP-2577) and still in every protocol version the gateway serves; this tests it
package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
)

// TestLogToClient: core.Log reaches the client as notifications/message at
// or above the level it asked for, at every protocol version, and nothing
// reaches a client that asked for no logs.
func TestLogToClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{Name: "shop"}, func(a *core.Agent) {
		must(t, core.AddTool(a, "noisy", "Logs as it works.", func(ctx context.Context, _ Empty) (string, error) {
			core.Log(ctx, core.LogDebug, "looking closely")
			core.Log(ctx, core.LogInfo, map[string]any{"step": 1, "of": 2})
			core.Log(ctx, core.LogError, "the second step failed")
			return "done", nil
		}, core.ReadOnly()))
	})
	forEachVersion(t, func(t *testing.T, v string) {
		var (
			mu  sync.Mutex
			got []string
		)
		cs := e.connect(v, e.clientKey, &mcp.ClientOptions{
			LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
				mu.Lock()
				got = append(got, fmt.Sprintf("%s %s %v", r.Params.Level, r.Params.Logger, r.Params.Data))
				mu.Unlock()
			},
		})
		params := &mcp.CallToolParams{Name: "noisy", Arguments: map[string]any{}}
		if v >= "2026-07-28" {
			params.Meta = mcp.Meta{mcp.MetaKeyLogLevel: "info"} // the request's own level
		} else {
			must(t, cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}))
		}
		res, err := cs.CallTool(context.Background(), params)
		if err != nil || text(res) != "done" {
			t.Fatalf("noisy = %v, %v", res, err)
		}
		poll(t, "two log messages at level info", 5*time.Second, func() (string, bool) {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Sprint(got), len(got) >= 2
		})
		mu.Lock()
		if want := "[info shop map[of:2 step:1] error shop the second step failed]"; fmt.Sprint(got) != want {
			t.Errorf("log messages at level info = %v; want %s", got, want)
		}
		mu.Unlock()

		if v < "2026-07-28" {
			var quiet []string
			cs := e.connect(v, e.clientKey, &mcp.ClientOptions{
				LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
					mu.Lock()
					quiet = append(quiet, fmt.Sprint(r.Params.Data))
					mu.Unlock()
				},
			})
			call(t, cs, "noisy", map[string]any{})
			call(t, cs, "noisy", map[string]any{}) // the second call's answer comes after any log of the first
			mu.Lock()
			defer mu.Unlock()
			if len(quiet) != 0 {
				t.Errorf("a session that asked for no logs got %v", quiet)
			}
		}
	})
}
