package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	sfauth "github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

type nopConn struct{ agents.Conn }

// BenchmarkAgentConnectsWithOneView is one more agent connecting to a
// project of 10,000 agents (one tool each) while one client key's view
// exists: the registry's rebuild plus the view's sync, per connect.
func BenchmarkAgentConnectsWithOneView(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "s.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	p, err := st.CreateProject(ctx, "p")
	if err != nil {
		b.Fatal(err)
	}
	bus := changes.New(nil)
	reg := agents.New(&agents.Options{Grace: time.Hour, Changes: bus})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	calls := store.NewCallLog(st, nil)
	defer calls.Close(ctx)
	f := New(Options{Registry: reg, Changes: bus, Store: st, Verifier: sfauth.NewVerifier(st, 0),
		CallLog: calls, Logger: quiet})
	if err := f.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	add := func(i int) {
		r := &agentproto.Registration{Protocol: agentproto.Version, Name: fmt.Sprintf("svc%d", i), Namespace: true,
			Tools: []agentproto.Tool{{Name: "ping", Description: "Answers pong.", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)}}}
		reg.Add(&agents.Replica{ID: fmt.Sprintf("r%d", i), ProjectID: p.ID, AgentKey: fmt.Sprintf("k%d", i), Reg: r, Conn: nopConn{}, Since: time.Now()}, nil)
	}
	for i := range 10000 {
		add(i)
	}
	v := f.viewFor(store.Key{ID: "key_client", ProjectID: p.ID, Kind: store.KindClient})
	v.sync()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		add(10000 + i)
	}
	b.StopTimer()
	if n := len(v.tools); n < 10000 {
		b.Fatalf("the view advertises %d tools, want at least 10,000", n)
	}
}
