package dashboard_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// A repeat-safe tool shows its pill and its idempotency argument; the
// Logs page and the API show replays and retries.
func TestRepeatSafeToolAndLogs(t *testing.T) {
	e := newEnv(t)
	c := e.admin()
	create := tool("create_order", "Create an order.", false)
	create.IdempotencyKey = "requestId"
	create.InputSchema = json.RawMessage(`{"type":"object","properties":{"requestId":{"type":"string"}},"required":["requestId"]}`)
	e.connect("r-1", "", create)

	var rows []struct {
		Name, IdempotencyKey string
		Pills                []struct{ Text string }
	}
	c.mustCall(200, "GET", "/api/projects/shop/tools", nil, &rows)
	if len(rows) != 1 || rows[0].IdempotencyKey != "requestId" || !slices.ContainsFunc(rows[0].Pills, func(p struct{ Text string }) bool { return p.Text == "Repeat-safe (requestId)" }) {
		t.Errorf("tools = %+v; want create_order with idempotencyKey requestId and the Repeat-safe (requestId) pill", rows)
	}
	if page := c.get("/p/shop/tools").text(); !strings.Contains(page, "Repeat-safe (requestId)") {
		t.Error("the Tools page lacks the Repeat-safe (requestId) pill")
	}

	now := time.Now()
	if err := e.st.AppendCalls(t.Context(), []store.Call{
		{Time: now, ProjectID: e.project.ID, Kind: "tool", Name: "create_order", KeyID: "key_c", Outcome: store.OutcomeOK, Billable: true, CallID: "c-2", RetryOf: "c-1"},
		{Time: now.Add(time.Millisecond), ProjectID: e.project.ID, Kind: "tool", Name: "create_order", KeyID: "key_c", Outcome: store.OutcomeOK, CallID: "c-3", Replay: true, RetryOf: "c-2"},
	}); err != nil {
		t.Fatal(err)
	}
	page := c.get("/p/shop/logs").text()
	for _, want := range []string{"replay of <code>c-2</code>", "retry of <code>c-1</code>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the Logs page lacks %s", want)
		}
	}
	var calls []struct {
		CallID, RetryOf string
		Replay          bool
	}
	c.mustCall(200, "GET", "/api/projects/shop/calls", nil, &calls)
	if len(calls) != 2 || calls[0].CallID != "c-3" || !calls[0].Replay || calls[0].RetryOf != "c-2" || calls[1].Replay || calls[1].RetryOf != "c-1" {
		t.Errorf("GET …/calls = %+v; want the replay c-3 of c-2, then c-2 a retry of c-1", calls)
	}
}
