package mcpfront

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	sfauth "github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/route/routetest"
	"github.com/spacefix/spacefix/internal/schema"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/tasks"
)

// stageEnv is an endpoint with tasks in front of one agent that offers
// "echo" (a plain tool) and "slow" (task support optional), each
// answering "ok" at once; the client key "key" calls it. It reuses
// ppEnv's client (send, session, callModern).
func newStageEnv(t *testing.T, opts ...func(*Options)) *ppEnv {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	proj, err := st.CreateProject(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	calls := store.NewCallLog(st, nil)
	t.Cleanup(func() { calls.Close(context.Background()) })
	e := &ppEnv{t: t, st: st, reg: agents.New(&agents.Options{Logger: ppQuiet()}), tr: routetest.New(), proj: proj, refuse: map[string]bool{}}
	tm := tasks.New(tasks.Options{Store: st, Calls: calls, Grants: st, Questions: pipeline.TaskQuestions{}, Log: ppQuiet(),
		Settings: func(ctx context.Context, projectID int64) (store.ProjectSettings, error) {
			p, err := st.ProjectByID(ctx, projectID)
			return p.Settings, err
		}})
	if err := tm.Start(ctx); err != nil {
		t.Fatal(err)
	}
	o := Options{Registry: e.reg, Store: st, Verifier: sfauth.NewVerifier(st, 0), CallLog: calls,
		Logger: ppQuiet(), Tasks: tm, HostsChecked: true}
	for _, opt := range opts {
		opt(&o)
	}
	e.f = New(o)
	if err := e.f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.f.Close(); tm.Close() })

	in := json.RawMessage(`{"type":"object"}`)
	s, err := schema.CompileWith(in, schema.Options{Default2020: true})
	if err != nil {
		t.Fatal(err)
	}
	rep := &agents.Replica{
		ID: "r1", ProjectID: proj.ID, AgentKey: "key_agent", Since: time.Now(),
		Reg: &agentproto.Registration{Protocol: agentproto.Version, Name: "a", Tools: []agentproto.Tool{
			{Name: "echo", Description: "Echoes", InputSchema: in},
			{Name: "slow", Description: "Slow", InputSchema: in, Execution: &agentproto.Execution{TaskSupport: agentproto.TaskOptional}},
		}},
	}
	conn := route.NewConn(e.tr, ppQuiet(), route.Events{})
	rep.Conn = conn
	e.reg.Add(rep, map[string]*schema.Schema{"echo": s, "slow": s})
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn.Serve(context.Background())
	}()
	go e.serveBridge()
	t.Cleanup(func() { e.tr.Close(""); <-done })

	key := store.Key{ID: "key_c", Name: "ci", ProjectID: proj.ID, Kind: store.KindClient, ProjectName: "shop"}
	bearer := auth.RequireBearerToken(func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if token != "key" {
			return nil, auth.ErrInvalidToken
		}
		return pipeline.TokenInfo(key, nil), nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	srv := httptest.NewServer(bearer(http.HandlerFunc(e.f.dispatch)))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}
