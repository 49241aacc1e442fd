package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

// fuzzEnv is a real gateway for a fuzz target: one per fuzz worker process,
// shared by every input, with the seed's order agent connected.
type fuzzEnv struct {
	gw        *gateway.Gateway
	store     store.Store
	url       string
	clientKey string
	agentKey  string
}

func newFuzzEnv(f *testing.F) *fuzzEnv {
	f.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(f.TempDir(), "spacefix.db"))
	if err != nil {
		f.Fatal(err)
	}
	first, err := gateway.Bootstrap(ctx, st)
	if err != nil {
		f.Fatal(err)
	}
	cfg := gateway.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = testLogger(nil)
	cfg.Grace = 200 * time.Millisecond
	cfg.ShutdownGrace = 5 * time.Second
	g, err := gateway.New(cfg, st)
	if err != nil {
		f.Fatal(err)
	}
	if err := g.Start(); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		if err := g.Close(); err != nil {
			f.Errorf("close gateway: %v", err)
		}
	})
	return &fuzzEnv{gw: g, store: st, url: g.URL(), clientKey: first.ClientKey, agentKey: first.AgentKey}
}

// startAgent runs the order agent (two tools, a resource and a prompt) until
// the fuzz target ends, and waits until the gateway has it.
func (fe *fuzzEnv) startAgent(f *testing.F) {
	f.Helper()
	a, err := core.New(core.Options{URL: fe.url, APIKey: fe.agentKey, Logger: testLogger(nil)})
	if err != nil {
		f.Fatal(err)
	}
	if err := addOrderTools(a); err != nil {
		f.Fatal(err)
	}
	if err := a.Resource("orders://open", core.ResourceOptions{Name: "Open orders"}, func(ctx context.Context) (any, error) {
		return orders, nil
	}); err != nil {
		f.Fatal(err)
	}
	if err := a.Prompt("summary", core.PromptOptions{Args: []core.PromptArg{{Name: "id", Required: true}}},
		func(ctx context.Context, args map[string]string) (core.PromptResult, error) {
			return core.PromptResult{Messages: []core.PromptMessage{core.UserMessage("Summarise order " + args["id"])}}, nil
		}); err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	f.Cleanup(func() {
		cancel()
		<-done
	})
	waitFor(f, "the agent to connect", func() bool { return len(fe.gw.Registry().All()) > 0 })
}

// session opens a client session at protocol version v.
func (fe *fuzzEnv) session(f *testing.F, v string) *mcp.ClientSession {
	f.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "fuzz", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{
		Endpoint:   fe.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key: fe.clientKey, base: http.DefaultTransport}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: v})
	if err != nil {
		f.Fatalf("connect at %s: %v", v, err)
	}
	f.Cleanup(func() { cs.Close() })
	return cs
}

// mcpSeeds are realistic JSON-RPC bodies of every era, and a few broken ones.
var mcpSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search_orders","arguments":{"customer":"ada","limit":5}}}`,
	`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"search_orders","arguments":{"customer":"ada","limit":99}}}`,
	`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"get_order","arguments":{"id":"1042"},"_meta":{"progressToken":"p1"}}}`,
	`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_order","arguments":"x"}}`,
	`{"jsonrpc":"2.0","id":8,"method":"resources/list"}`,
	`{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"orders://open"}}`,
	`{"jsonrpc":"2.0","id":10,"method":"prompts/get","params":{"name":"summary","arguments":{"id":"1042"}}}`,
	`{"jsonrpc":"2.0","id":11,"method":"prompts/get","params":{"name":"summary"}}`,
	`{"jsonrpc":"2.0","id":12,"method":"ping"}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"user"}}`,
	`{"jsonrpc":"2.0","id":13,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`,
	`{"jsonrpc":"2.0","id":14,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
	`{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"search_orders","arguments":{"customer":"ada"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
	// What the gateway answers before go-sdk (early.go): get_order is cached.
	`{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":"get_order","arguments":{"id":"1042"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`,
	`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"search_orders","arguments":{"customer":"ada","limit":2},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
	`{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"get_order","arguments":{"id":"1042"}}}`,
	`[{"jsonrpc":"2.0","id":16,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
	`{"jsonrpc":"2.0","id":17,"result":{}}`,
	`{"jsonrpc":"2.0","id":null,"method":"tools/list"}`,
	`{"jsonrpc":"1.0","id":{},"method":7}`,
	`{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"search_orders","arguments":{"customer":"` + strings.Repeat("[", 600) + `"}}}`,
	`[]`, `{}`, `null`, ``, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`,
}

// FuzzMCPBody posts arbitrary bodies to /mcp with a valid client key, in
// every era (no version header, inside each legacy session, stateless), and
// with a real agent behind the gateway. The gateway must answer every one
// with a status below 500 and never drop the connection (which is how
// net/http shows a handler that panicked); a panic in a go-sdk goroutine
// would end the worker process and fail the target.
func FuzzMCPBody(f *testing.F) {
	for era := range 4 {
		for _, s := range mcpSeeds {
			f.Add(uint8(era), []byte(s))
		}
	}
	fe := newFuzzEnv(f)
	fe.startAgent(f)
	// A cached tool: its calls are answered before go-sdk (early.go).
	p, err := fe.store.Project(context.Background(), "default")
	if err != nil {
		f.Fatal(err)
	}
	if _, err := fe.store.SaveToolSettings(context.Background(), store.ToolSettings{ProjectID: p.ID, Tool: "get_order", CacheSeconds: 3600}); err != nil {
		f.Fatal(err)
	}
	fe.gw.SettingsChanged(p.ID)
	if fz := flag.Lookup("test.fuzz"); fz == nil || fz.Value.String() == "" {
		// The seeds alone (go test): they include calls the gateway
		// answers before go-sdk, so some must have been.
		f.Cleanup(func() {
			if _, hits, calls := fe.gw.EarlyStats(); hits == 0 || calls == 0 {
				f.Errorf("the seeds were answered early %d times as cache hits and %d times as other calls; want both", hits, calls)
			}
		})
	}
	sessions := map[uint8]string{1: fe.session(f, "2025-06-18").ID(), 2: fe.session(f, "2025-11-25").ID()}
	headers := map[uint8]string{1: "2025-06-18", 2: "2025-11-25", 3: "2026-07-28"}
	client := &http.Client{Timeout: 30 * time.Second}
	f.Fuzz(func(t *testing.T, era uint8, body []byte) {
		era %= 4
		req, err := http.NewRequest(http.MethodPost, fe.url+"/mcp", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+fe.clientKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if v := headers[era]; v != "" {
			req.Header.Set("Mcp-Protocol-Version", v)
		}
		if era == 3 {
			// A 2026-07-28 client names the method and tool in headers too.
			var probe struct {
				Method string `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			json.Unmarshal(body, &probe)
			for h, v := range map[string]string{"Mcp-Method": probe.Method, "Mcp-Name": probe.Params.Name} {
				if v != "" && !strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
					req.Header.Set(h, v)
				}
			}
		}
		if id := sessions[era]; id != "" {
			req.Header.Set("Mcp-Session-Id", id)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("POST /mcp (era %d) %q: %v; a dropped connection means the handler panicked", era, body, err)
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("POST /mcp (era %d) %q: reading the answer: %v", era, body, err)
		}
		if resp.StatusCode >= 500 {
			t.Fatalf("POST /mcp (era %d) %q = %d %s", era, body, resp.StatusCode, out)
		}
	})
}
