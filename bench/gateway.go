package bench

import (
	"context"
	"encoding/json"
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

// StartPolicyGateway is [StartGateway] with doc saved as the project's
// policy (package policy) before the gateway starts; the target is named
// name.
func StartPolicyGateway(dir, name string, doc json.RawMessage) (*Target, error) {
	t, err := startGateway(dir, 0, doc)
	if t != nil {
		t.Name = name
	}
	return t, err
}

func startGateway(dir string, cacheSeconds int, policyDoc ...json.RawMessage) (_ *Target, err error) {
	t, g, agentKey, stopGateway, err := startGatewayAlone(dir, cacheSeconds, policyDoc...)
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	agent, err := echoAgent(g.URL(), agentKey, quiet, t)
	if err != nil {
		stopGateway()
		return nil, fmt.Errorf("start agent: %w", err)
	}
	actx, stopAgent := context.WithCancel(context.Background())
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
		errs = append(errs, stopGateway())
		return errors.Join(errs...)
	}
	for deadline := time.Now().Add(10 * time.Second); len(g.Registry().All()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			stop()
			return nil, errors.New("start gateway: the agent did not connect within 10s")
		}
	}
	t.stop = stop
	return t, nil
}

// StartGatewayAlone starts the gateway of target name ([SideGateway],
// [SideGatewayCached], [SideGatewayPolicy] or [SideGatewayInterceptor],
// whose interceptor server is at interceptorURL) without its agent: it
// returns the agent key an echo agent in another process connects with
// ([RunEchoAgent]) and the gateway's base URL.
func StartGatewayAlone(dir, name, interceptorURL string) (t *Target, agentKey, url string, err error) {
	var (
		cacheSeconds int
		policyDoc    []json.RawMessage
	)
	switch name {
	case SideGateway:
	case SideGatewayCached:
		cacheSeconds = CacheSeconds
	case SideGatewayPolicy:
		policyDoc = append(policyDoc, FiftyRules())
	case SideGatewayInterceptor:
		if interceptorURL == "" {
			return nil, "", "", errors.New("start gateway: the interceptor target needs its interceptor server's URL")
		}
		policyDoc = append(policyDoc, InterceptorPolicy(interceptorURL))
	default:
		return nil, "", "", fmt.Errorf("start gateway: no target %q: %s, %s, %s or %s", name, SideGateway, SideGatewayCached, SideGatewayPolicy, SideGatewayInterceptor)
	}
	t, g, agentKey, stop, err := startGatewayAlone(dir, cacheSeconds, policyDoc...)
	if err != nil {
		return nil, "", "", err
	}
	t.Name = name
	t.stop = stop
	return t, agentKey, g.URL(), nil
}

// RunEchoAgent serves echo to the gateway at url with agentKey until ctx
// ends.
func RunEchoAgent(ctx context.Context, url, agentKey string) error {
	agent, err := echoAgent(url, agentKey, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		return err
	}
	return agent.Run(ctx)
}

// echoAgent is a core agent serving echo; t, if set, counts its calls.
func echoAgent(url, agentKey string, log *slog.Logger, t *Target) (*core.Agent, error) {
	agent, err := core.New(core.Options{APIKey: agentKey, URL: url, Logger: log})
	if err != nil {
		return nil, err
	}
	err = core.AddTool(agent, ToolName, "Returns its text.",
		func(_ context.Context, in EchoIn) (string, error) {
			stampIn()
			defer stampOut()
			if t != nil {
				t.agentCalls.Add(1)
			}
			return in.Text, nil
		})
	return agent, err
}

// startGatewayAlone starts the gateway of [StartGateway] and returns its
// target (its endpoint and client key set), the gateway, the first start's
// agent key and what stops it all.
func startGatewayAlone(dir string, cacheSeconds int, policyDoc ...json.RawMessage) (_ *Target, _ *gateway.Gateway, agentKey string, stop func() error, err error) {
	tmp, err := os.MkdirTemp(dir, "spacefix-bench-")
	if err != nil {
		return nil, nil, "", nil, fmt.Errorf("start gateway: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(tmp, "spacefix.db"))
	if err != nil {
		return nil, nil, "", nil, fmt.Errorf("start gateway: %w", err)
	}
	first, err := gateway.Bootstrap(ctx, st)
	if err != nil {
		st.Close()
		return nil, nil, "", nil, fmt.Errorf("start gateway: %w", err)
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
			return nil, nil, "", nil, fmt.Errorf("start gateway: cache echo: %w", err)
		}
	}
	if len(policyDoc) > 0 {
		ps, err := st.Projects(ctx)
		if err == nil && len(ps) == 0 {
			err = errors.New("no project")
		}
		if err == nil {
			_, err = st.SavePolicy(ctx, ps[0].ID, 0, policyDoc[0], "bench")
		}
		if err != nil {
			st.Close()
			return nil, nil, "", nil, fmt.Errorf("start gateway: save the policy: %w", err)
		}
	}
	cfg := gateway.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.ShutdownGrace = 5 * time.Second
	cfg.UpstreamAllowLoopback = len(policyDoc) > 0 // an interceptor server on loopback

	var g *gateway.Gateway
	labelled(ctx, SideGateway, func(context.Context) {
		if g, err = gateway.New(cfg, st); err == nil {
			err = g.Start()
		}
	})
	if err != nil {
		st.Close()
		return nil, nil, "", nil, fmt.Errorf("start gateway: %w", err)
	}
	t := &Target{Name: SideGateway, Key: first.ClientKey, Endpoint: g.URL() + "/mcp"}
	if cacheSeconds > 0 {
		t.Name = SideGatewayCached
	}
	return t, g, first.AgentKey, func() error { return errors.Join(g.Close(), os.RemoveAll(tmp)) }, nil
}
