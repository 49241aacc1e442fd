package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/spacefix/spacefix/core"
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
