package pipeline

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/route/routetest"
	"github.com/spacefix/spacefix/internal/schema"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/teststores"
	"github.com/spacefix/spacefix/internal/upstream/upstreamtest"
)

// The per-person path below the wire: the answer a task gets when the
// remote refuses a person's token, and the code a client never sees. The
// endpoint's own tests (mcpfront/perperson_test.go) run the rest through
// HTTP.

const (
	ppAgentKey = "key_bridge"
	ppTool     = "gh__whoami"
	ppHost     = "mcp.example.com"
	ppConnect  = upstreamtest.ConnectURL + ppAgentKey
)

// ppPipeline is a pipeline in front of one per-person bridged remote, whose
// replica never answers (the tests pick calls, and send none), with grant
// "grant_ada" as person 7.
type ppPipeline struct {
	*Pipeline
	reg  *agents.Registry
	proj store.Project
	up   *upstreamtest.Accounts
}

func newPPPipeline(t *testing.T, pp agentproto.PerPerson) *ppPipeline {
	t.Helper()
	ctx := context.Background()
	st := teststores.SQLite(t)
	proj, err := st.CreateProject(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateOAuthGrant(ctx, store.OAuthGrant{ID: "grant_ada", ProjectID: proj.ID, UserID: 7,
		ClientID: "client_1", ClientName: "Claude", Scope: "mcp:read mcp:write"}); err != nil {
		t.Fatal(err)
	}
	calls := store.NewCallLog(st, nil)
	t.Cleanup(func() { calls.Close(context.Background()) })
	quiet := slog.New(slog.DiscardHandler)
	e := &ppPipeline{reg: agents.New(&agents.Options{Logger: quiet}), proj: proj,
		up: upstreamtest.New(ppAgentKey, map[int64]string{7: "ada-token"})}
	e.Pipeline = New(Options{Registry: e.reg, Store: st, Controls: access.NewCache(st, time.Second, policy.Options{Log: quiet}),
		CallLog: calls, Logger: quiet, Upstream: e.up})
	t.Cleanup(e.Close)

	in := json.RawMessage(`{"type":"object"}`)
	s, err := schema.CompileWith(in, schema.Options{Default2020: true})
	if err != nil {
		t.Fatal(err)
	}
	tr := routetest.New()
	conn := route.NewConn(tr, quiet, route.Events{})
	e.reg.Add(&agents.Replica{
		ID: "r1", ProjectID: proj.ID, AgentKey: ppAgentKey, Since: time.Now(), Conn: conn,
		Reg: &agentproto.Registration{Protocol: agentproto.Version, Name: "gh",
			Bridge: &agentproto.Bridge{Transport: "streamable-http", Target: "https://" + ppHost + "/mcp", PerPerson: &pp},
			Tools:  []agentproto.Tool{{Name: ppTool, Description: "Who am I upstream", InputSchema: in}},
		},
	}, map[string]*schema.Schema{ppTool: s})
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn.Serve(context.Background())
	}()
	t.Cleanup(func() { tr.Close(""); <-done })
	return e
}

// A task whose remote refused the person's token ends with a sentence of
// what to do: call again once the account is refreshed, or connect it
// again.
func TestPerPersonTaskUnauthorized(t *testing.T) {
	e := newPPPipeline(t, agentproto.PerPerson{Mode: agentproto.PerPersonConnect, URL: "https://" + ppHost + "/mcp"})
	ctx := context.Background()
	tool := e.reg.Snapshot(e.proj.ID).Tools[ppTool]
	ada := store.Key{ID: "grant_ada", ProjectID: e.proj.ID, Kind: store.KindClient, OAuth: true}
	call, _, _, refused, rpcErr := e.pickCall(ctx, pickRequest{Tool: tool, Key: ada, Args: json.RawMessage(`{}`), Wait: time.Minute})
	if call == nil || refused != nil || rpcErr != nil {
		t.Fatalf("pickCall = %v, %v, %v; want ada's call", call, refused, rpcErr)
	}
	hook := e.taskUnauthorized(ada, call, ppTool) // as a task's Spec gets it, before the call is sent
	call.Release()
	if call.UpstreamToken() != "ada-token" {
		t.Fatalf("the call carries %q, want ada's token", call.UpstreamToken())
	}
	e.up.RefreshGives(7, "ada-token-2")
	if got, want := hook(ctx), ppHost+" refused your account's token, and the gateway has refreshed it: call "+ppTool+" again."; got != want {
		t.Errorf("refreshed: %q, want %q", got, want)
	}
	e.up.RefreshGives(7, "")
	if got, want := hook(ctx), "Your "+ppHost+" account needs connecting again: open "+ppConnect+", sign in there, then call "+ppTool+" again."; got != want {
		t.Errorf("refresh refused: %q, want %q", got, want)
	}
	if got := e.up.Refreshes(); len(got) != 2 || got[0] != "ada-token" || got[1] != "ada-token" {
		t.Errorf("refreshed %q, want ada's refused token twice", got)
	}

	// A call that carries no token of the gateway's has no such answer.
	key := store.Key{ID: "key_c", ProjectID: e.proj.ID, Kind: store.KindClient}
	shared := newPPPipeline(t, agentproto.PerPerson{Mode: agentproto.PerPersonConnect, URL: "https://" + ppHost + "/mcp", Fallback: agentproto.FallbackShared})
	call, _, _, _, _ = shared.pickCall(ctx, pickRequest{Tool: shared.reg.Snapshot(shared.proj.ID).Tools[ppTool], Key: key, Args: json.RawMessage(`{}`), Wait: time.Minute})
	if call == nil {
		t.Fatal("the key's call was not picked")
	}
	if shared.taskUnauthorized(key, call, ppTool) != nil {
		t.Error("a call without a token got an answer for a refused token")
	}
	call.Release()
}

// A refused token the front could not deliver again (it came after the
// agent asked the client something) reaches the client as -32603 with a
// sentence, never as -32044.
func TestPerPersonCodeNeverToClient(t *testing.T) {
	res := route.Result{Outcome: route.ToolError, Code: agentproto.CodeUpstreamUnauthorized, Detail: "the remote refused the person's token"}
	pe := protocolError(res)
	if pe == nil || pe.Code != -32603 || pe.Message != msgUpstreamLate || pe.Data != nil {
		t.Errorf("protocolError = %+v, want -32603 %q", pe, msgUpstreamLate)
	}
}
