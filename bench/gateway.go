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
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

// StartGateway runs a real gateway on 127.0.0.1:0 with a SQLite store in a
// new directory under dir (removed by Close), and a core agent in this
// process that registers echo with the first start's agent key. It returns
// once the gateway lists the agent.
func StartGateway(dir string) (_ *Target, err error) {
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

	agent, err := core.New(core.Options{APIKey: first.AgentKey, URL: g.URL(), Logger: quiet})
	if err == nil {
		err = core.AddTool(agent, ToolName, "Returns its text.",
			func(_ context.Context, in EchoIn) (string, error) {
				stampIn()
				defer stampOut()
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
	return &Target{Name: SideGateway, Endpoint: g.URL() + "/mcp", Key: first.ClientKey, stop: stop}, nil
}
