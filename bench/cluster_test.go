package bench

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/testenv"
)

// BenchmarkCluster times tools/call of echo with two gateways on one store
// and one NATS server (all in this process, on loopback):
//
//   - local: the client and the agent on gateway A (the bus is not used);
//   - remote: the client on B, the agent on A: the call crosses NATS;
//   - one-gateway-16: 16 callers on A, one agent replica on A;
//   - two-gateways-16: 8 callers on A and 8 on B, an agent replica on each,
//     every call served by the replica on its own gateway or the other.
//
// It reports p50-µs, p99-µs, calls/s and cpu-µs/call (CPU of the whole
// process: both gateways, the agents, the clients and NATS).
//
//	go test ./bench -run '^$' -bench Cluster -benchtime 5000x -count 3
func BenchmarkCluster(b *testing.B) {
	if testing.Short() {
		b.Skip("starts two gateways and NATS; skipped under -short")
	}
	c := startCluster(b)
	ctx := context.Background()
	for _, s := range []struct {
		name    string
		ss      []*mcp.ClientSession
		callers int
	}{
		{"local", c.sessions(b, c.a, 1), 1},
		{"remote", c.sessions(b, c.b, 1), 1},
		{"one-gateway-16", c.sessions(b, c.a, 16), 16},
	} {
		b.Run(s.name, func(b *testing.B) { runShape(ctx, b, s.ss, s.callers) })
	}
	// A second agent replica, on B, and callers on both gateways.
	c.agent(b, c.b)
	ss := append(c.sessions(b, c.a, 8), c.sessions(b, c.b, 8)...)
	b.Run("two-gateways-16", func(b *testing.B) { runShape(ctx, b, ss, 16) })
}

func runShape(ctx context.Context, b *testing.B, ss []*mcp.ClientSession, callers int) {
	if _, err := Run(ctx, ss, callers, warmup); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	res, err := Run(ctx, ss, callers, b.N)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(micros(res.P50), "p50-µs")
	b.ReportMetric(micros(res.P99), "p99-µs")
	b.ReportMetric(res.PerSec(), "calls/s")
	b.ReportMetric(micros(res.CPUPerCall()), "cpu-µs/call")
}

type cluster struct {
	a, b      *gateway.Gateway
	agentKey  string
	clientKey string
}

func startCluster(b *testing.B) *cluster {
	ns := testenv.NATS(b, 0)
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "spacefix.db")
	c := &cluster{}
	for i, g := range []**gateway.Gateway{&c.a, &c.b} {
		st, err := sqlite.Open(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			first, err := gateway.Bootstrap(ctx, st)
			if err != nil {
				b.Fatal(err)
			}
			c.agentKey, c.clientKey = first.AgentKey, first.ClientKey
		}
		cfg := gateway.DefaultConfig()
		cfg.Addr, cfg.Bus = "127.0.0.1:0", ns.ClientURL()
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if *g, err = gateway.New(cfg, st); err != nil {
			b.Fatal(err)
		}
		if err := (*g).Start(); err != nil {
			b.Fatal(err)
		}
		gw := *g
		b.Cleanup(func() { gw.Close() })
	}
	c.agent(b, c.a)
	return c
}

// agent connects an echo agent replica to g and waits until both gateways
// list one more replica.
func (c *cluster) agent(b *testing.B, g *gateway.Gateway) {
	before := len(c.b.Registry().All())
	a, err := core.New(core.Options{APIKey: c.agentKey, URL: g.URL(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	if err := core.AddTool(a, ToolName, "Returns its text.", func(_ context.Context, in EchoIn) (string, error) { return in.Text, nil }); err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	go a.Run(ctx)
	b.Cleanup(stop)
	for deadline := time.Now().Add(10 * time.Second); len(c.a.Registry().All()) <= before || len(c.b.Registry().All()) <= before; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the agent did not reach both gateways within 10s")
		}
	}
}

func (c *cluster) sessions(b *testing.B, g *gateway.Gateway, n int) []*mcp.ClientSession {
	t := &Target{Name: "cluster", Endpoint: g.URL() + "/mcp", Key: c.clientKey, stop: func() error { return nil }}
	ss, err := t.Sessions(context.Background(), n)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { t.Close() })
	return ss
}
