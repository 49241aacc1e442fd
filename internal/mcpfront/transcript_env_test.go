package mcpfront_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/agentfront"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/mcpfront"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/tasks"
)

// transcriptEnv is an MCP endpoint as a client meets it: a [mcpfront.Front]
// served by httptest, with a real registry, task runtime and SQLite store,
// in front of one in-process agent built on the SDK (addTranscriptTools),
// which connects through the agent front as any agent does. Only the
// Front's exported API is used, so the transcripts hold the wire, not the
// front's insides.
type transcriptEnv struct {
	url string // the MCP endpoint
	// newKey makes a client key of the project and returns its secret:
	// each transcript calls with its own, so that none sees another's
	// tasks or request ids.
	newKey func(t *testing.T) string
}

func newTranscriptEnv(t *testing.T) *transcriptEnv {
	t.Helper()
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	proj, err := st.CreateProject(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	_, agentSecret, err := auth.CreateKey(ctx, st, store.Key{ProjectID: proj.ID, Kind: store.KindAgent, Name: "shop"})
	if err != nil {
		t.Fatal(err)
	}

	// price's results are kept for a minute, as a project's tool settings
	// say.
	if _, err := st.SaveToolSettings(ctx, store.ToolSettings{ProjectID: proj.ID, Tool: "price", CacheSeconds: 60}); err != nil {
		t.Fatal(err)
	}

	calls := store.NewCallLog(st, nil)
	t.Cleanup(func() { calls.Close(context.Background()) })
	bus := changes.New(quiet)
	reg := agents.New(&agents.Options{Changes: bus, Logger: quiet})
	verifier := auth.NewVerifier(st, 0)
	tm := tasks.New(tasks.Options{Store: st, Calls: calls, Grants: st, Questions: pipeline.TaskQuestions{}, Log: quiet,
		Settings: func(ctx context.Context, projectID int64) (store.ProjectSettings, error) {
			p, err := st.ProjectByID(ctx, projectID)
			return p.Settings, err
		}})
	if err := tm.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tm.Close() })
	front := mcpfront.New(mcpfront.Options{Registry: reg, Changes: bus, Store: st, Verifier: verifier, CallLog: calls,
		Logger: quiet, Version: "test", Tasks: tm, HostsChecked: true})
	if err := front.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { front.Close() })
	agentsFront := agentfront.New(agentfront.Options{Registry: reg, Store: st, Verifier: verifier, Logger: quiet})
	if err := agentsFront.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agentsFront.Close() })

	mux := http.NewServeMux()
	mux.Handle(mcpfront.Path, front)
	mux.HandleFunc("POST "+agentproto.RegisterPath, agentsFront.Register)
	mux.HandleFunc("GET "+agentproto.ConnectPath, agentsFront.Connect)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	startTranscriptAgent(t, srv.URL, agentSecret, bus, proj.ID, quiet)
	if got := len(reg.Snapshot(proj.ID).Tools); got != len(transcriptTools) {
		t.Fatalf("the registry holds %d tools, want the agent's %d", got, len(transcriptTools))
	}
	return &transcriptEnv{url: srv.URL + mcpfront.Path, newKey: func(t *testing.T) string {
		_, secret, err := auth.CreateKey(ctx, st, store.Key{ProjectID: proj.ID, Kind: store.KindClient, Name: "ci"})
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}}
}

// transcriptTools are the agent's tools, as the transcripts call them.
var transcriptTools = []string{"echo", "count", "create_order", "report", "book", "approve", "price", "audit", "export"}

// startTranscriptAgent runs the agent until the test ends, and returns
// once the registry has it. The agent counts as there once the registry
// says so on the change path: the gateway welcomes it a moment before.
func startTranscriptAgent(t *testing.T, url, key string, bus *changes.Bus, projectID int64, log *slog.Logger) {
	t.Helper()
	connected := make(chan struct{}, 1)
	stop := bus.Subscribe(func(c changes.Change) {
		if c.Kind == changes.AgentConnected && c.Project == projectID {
			select {
			case connected <- struct{}{}:
			default:
			}
		}
	})
	defer stop()
	a, err := core.New(core.Options{APIKey: key, URL: url, Name: "shop", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := addTranscriptTools(a); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("agent Run: %v", err)
		}
	})
	select {
	case <-connected:
	case err := <-done:
		done <- err // for the clean-up's wait
		t.Fatalf("the agent stopped before the registry had it: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the registry did not add the agent within 10s")
	}
}

type echoIn struct {
	Text string `json:"text" desc:"what to say back"`
}

type orderIn struct {
	RequestID string `json:"requestId" desc:"a new id for each order, the same on a retry"`
	Item      string `json:"item" desc:"what to order"`
}

type priceIn struct {
	Item string `json:"item" desc:"the item to price"`
}

type bookIn struct {
	Table int `json:"table" desc:"the table to book"`
}

// addTranscriptTools gives a the tools the transcripts call:
//
//	echo          a plain read: says its text back
//	count         a read with two progress lines before its result
//	create_order  a repeat-safe write (request id "requestId"); its result
//	              says how many times the handler saw the request id, so a
//	              replay from the gateway's record shows as "1 delivery"
//	report        task support optional: a task when the client asks
//	book          asks the user to confirm before it answers
//	approve       asks the user too, and may run as a task
//	price         a read whose results the project caches; its result says
//	              how many times the handler computed that item's price
//	audit         a read that logs at info and at warning
//	export        runs only as a task (a job for a client without tasks)
func addTranscriptTools(a *core.Agent) error {
	var mu sync.Mutex
	deliveries := map[string]int{}
	return errors.Join(
		core.AddTool(a, "echo", "Says its text back.", func(_ context.Context, in echoIn) (string, error) {
			return in.Text, nil
		}, core.ReadOnly()),
		core.AddTool(a, "count", "Counts to two, telling how far it got.", func(ctx context.Context, _ struct{}) (string, error) {
			core.Progress(ctx, "one")
			core.Progress(ctx, "two")
			return "counted to two", nil
		}, core.ReadOnly()),
		core.AddTool(a, "create_order", "Creates an order.", func(_ context.Context, in orderIn) (string, error) {
			mu.Lock()
			deliveries[in.RequestID]++
			n := deliveries[in.RequestID]
			mu.Unlock()
			return fmt.Sprintf("order of %s created (request %s, %d delivery)", in.Item, in.RequestID, n), nil
		}, core.IdempotencyKey("requestId")),
		core.AddTool(a, "report", "Writes a report; may run as a task.", func(_ context.Context, _ struct{}) (string, error) {
			return "report ready", nil
		}, core.ReadOnly(), core.TaskSupport(core.TaskOptional)),
		core.AddTool(a, "book", "Books a table once the user agrees.", func(ctx context.Context, in bookIn) (string, error) {
			yes, err := core.Confirm(ctx, fmt.Sprintf("Book table %d?", in.Table))
			switch {
			case err != nil:
				return "", err
			case !yes:
				return fmt.Sprintf("table %d not booked", in.Table), nil
			}
			return fmt.Sprintf("table %d booked", in.Table), nil
		}),
		core.AddTool(a, "approve", "Approves the report once the user agrees; may run as a task.", func(ctx context.Context, _ struct{}) (string, error) {
			yes, err := core.Confirm(ctx, "Approve the report?")
			switch {
			case err != nil:
				return "", err
			case !yes:
				return "not approved", nil
			}
			return "approved", nil
		}, core.TaskSupport(core.TaskOptional)),
		core.AddTool(a, "price", "Says what an item costs.", func(_ context.Context, in priceIn) (string, error) {
			mu.Lock()
			deliveries["price "+in.Item]++
			n := deliveries["price "+in.Item]
			mu.Unlock()
			return fmt.Sprintf("%s costs 3 (computed %d time)", in.Item, n), nil
		}, core.ReadOnly()),
		core.AddTool(a, "audit", "Checks the books, logging what it finds.", func(ctx context.Context, _ struct{}) (string, error) {
			core.Log(ctx, core.LogInfo, "checked the books")
			core.Log(ctx, core.LogWarning, map[string]any{"unbalanced": 2})
			return "audited", nil
		}, core.ReadOnly()),
		core.AddTool(a, "export", "Exports the books; runs only as a task.", func(_ context.Context, _ struct{}) (string, error) {
			return "exported", nil
		}, core.ReadOnly(), core.TaskSupport(core.TaskRequired)),
	)
}
