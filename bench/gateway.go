package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

// SideGatewayCached names the target [StartCachedGateway] starts. Its
// goroutines carry the pprof label side=gateway like the uncached one's.
const SideGatewayCached = "gateway-cached"

// CacheSeconds is the echo tool's cacheSeconds on the cached gateway: longer
// than any run, so every call after the first is a hit.
const CacheSeconds = 3600

// StartGateway runs a real gateway on 127.0.0.1:0 with a SQLite store in a
// new directory under dir (removed by Close), and a core agent in this
// process that registers echo with the first start's agent key. It returns
// once the gateway lists the agent.
func StartGateway(dir string) (*Target, error) { return startGateway(dir, 0) }

// StartCachedGateway is [StartGateway] with echo's results cached for
// [CacheSeconds] (the store's ToolSettings, saved before the gateway starts,
// as the dashboard would): every call sends the same arguments, so all but
// the first are cache hits. [Target.AgentCalls] says how many were not.
func StartCachedGateway(dir string) (*Target, error) { return startGateway(dir, CacheSeconds) }

func startGateway(dir string, cacheSeconds int) (_ *Target, err error) {
	tmp, err := os.MkdirTemp(dir, "spacefix-bench-")
	if err != nil {
		return nil, fmt.Errorf("start gateway: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(tmp, "spacefix.db"))
	if err != nil {
		return nil, fmt.Errorf("start gateway: %w", err)
	}
	first, err := gateway.Bootstrap(ctx, st)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("start gateway: %w", err)
	}
	if cacheSeconds > 0 {
		ps, err := st.Projects(ctx)
		if err == nil && len(ps) == 0 {
			err = errors.New("no project")
		}
		if err == nil {
			_, err = st.SaveToolSettings(ctx, store.ToolSettings{ProjectID: ps[0].ID, Tool: ToolName, CacheSeconds: cacheSeconds})
		}
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("start gateway: cache echo: %w", err)
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := gateway.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = quiet
	cfg.ShutdownGrace = 5 * time.Second

	var g *gateway.Gateway
	labelled(ctx, SideGateway, func(context.Context) {
		if g, err = gateway.New(cfg, st); err == nil {
			err = g.Start()
		}
	})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("start gateway: %w", err)
	}

	t := &Target{Name: SideGateway, Key: first.ClientKey}
	if cacheSeconds > 0 {
		t.Name = SideGatewayCached
	}
	agent, err := core.New(core.Options{APIKey: first.AgentKey, URL: g.URL(), Logger: quiet})
	if err == nil {
		err = core.AddTool(agent, ToolName, "Returns its text.",
			func(_ context.Context, in EchoIn) (string, error) {
				stampIn()
				defer stampOut()
				t.agentCalls.Add(1)
				return in.Text, nil
			})
	}
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("start agent: %w", err)
	}
	actx, stopAgent := context.WithCancel(ctx)
	ran := make(chan error, 1)
	labelled(actx, SideAgent, func(actx context.Context) {
		go func() { ran <- agent.Run(actx) }()
	})
	stop := func() error {
		stopAgent()
		var errs []error
		select {
		case e := <-ran:
			errs = append(errs, e)
		case <-time.After(10 * time.Second):
			errs = append(errs, errors.New("agent did not stop within 10s"))
		}
		errs = append(errs, g.Close(), os.RemoveAll(tmp))
		return errors.Join(errs...)
	}
	for deadline := time.Now().Add(10 * time.Second); len(g.Registry().All()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			stop()
			return nil, errors.New("start gateway: the agent did not connect within 10s")
		}
	}
	t.Endpoint, t.stop = g.URL()+"/mcp", stop
	return t, nil
}
