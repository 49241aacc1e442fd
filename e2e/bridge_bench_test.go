package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/bridge"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

// BenchmarkBridgeCall measures one tools/call of go-sdk's everything-server
// (test_simple_text) made by the go-sdk client, in two ways:
//
//   - direct: the client runs the server as its own stdio child;
//   - gateway+bridge: the client calls the gateway over Streamable HTTP,
//     which sends the call over the agent WebSocket to spacefix bridge
//     (in this process), which relays it to the same server over stdio.
//
// Run: go test ./e2e/ -run '^$' -bench BenchmarkBridgeCall -benchtime 3000x
func BenchmarkBridgeCall(b *testing.B) {
	srvBin := binary(b, goEverything)
	args := map[string]any{}
	b.Run("direct", func(b *testing.B) {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(srvBin)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		benchCalls(b, cs, "test_simple_text", args)
	})
	b.Run("gateway+bridge", func(b *testing.B) {
		ctx := context.Background()
		st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
		if err != nil {
			b.Fatal(err)
		}
		first, err := gateway.Bootstrap(ctx, st)
		if err != nil {
			b.Fatal(err)
		}
		cfg := gateway.DefaultConfig()
		cfg.Addr = "127.0.0.1:0"
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		g, err := gateway.New(cfg, st)
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Start(); err != nil {
			b.Fatal(err)
		}
		defer g.Close()
		br, err := bridge.New(bridge.Server{Name: "ev", Command: srvBin},
			bridge.Options{GatewayURL: g.URL(), APIKey: first.AgentKey, Logger: cfg.Logger})
		if err != nil {
			b.Fatal(err)
		}
		bctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- br.Run(bctx) }()
		defer func() { stop(); <-done }()

		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		tr := &mcp.StreamableClientTransport{Endpoint: g.URL() + "/mcp",
			HTTPClient: &http.Client{Transport: bearer{key: first.ClientKey, base: http.DefaultTransport}}}
		cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		poll(b, "the bridged tool to answer", 30*time.Second, func() (attempt, bool) {
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__test_simple_text", Arguments: args})
			if err != nil {
				return attempt{err: err}, false
			}
			return attempt{out: text(r)}, !r.IsError
		})
		benchCalls(b, cs, "ev__test_simple_text", args)
	})
}

func benchCalls(b *testing.B, cs *mcp.ClientSession, name string, args any) {
	ctx := context.Background()
	for b.Loop() {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || r.IsError {
			b.Fatalf("call: %v %v", err, r)
		}
	}
}
