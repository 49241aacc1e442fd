package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/store"
)

// register posts a registration as an SDK would and returns the status and
// body.
func (e *env) register(key string, body []byte) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+agentproto.RegisterPath, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func tool(name string) agentproto.Tool {
	return agentproto.Tool{Name: name, Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func regWith(tools ...string) agentproto.Registration {
	var r agentproto.Registration
	for _, n := range tools {
		r.Tools = append(r.Tools, tool(n))
	}
	return r
}

// dialAgent registers reg with the env's agent key and opens its WebSocket,
// as an agent written from docs/agent-protocol.md alone would; the
// connection closes when the test ends.
func (e *env) dialAgent(t *testing.T, reg agentproto.Registration) *websocket.Conn {
	t.Helper()
	status, body := e.register(e.agentKey, regJSON(t, reg))
	if status != 200 {
		t.Fatalf("register: %d %s", status, body)
	}
	var tk agentproto.Ticket
	must(t, json.Unmarshal([]byte(body), &tk))
	ws, _, err := websocket.Dial(context.Background(), e.url+agentproto.ConnectPath+"?ticket="+tk.Ticket,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + e.agentKey}}})
	must(t, err)
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

func regJSON(t *testing.T, r agentproto.Registration) []byte {
	t.Helper()
	if r.Protocol == 0 {
		r.Protocol = agentproto.Version
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRegistrationRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	many := make([]agentproto.Tool, 257)
	for i := range many {
		many[i] = tool(fmt.Sprintf("t%d", i))
	}
	bigSchema := agentproto.Tool{Name: "big", InputSchema: json.RawMessage(`{"type":"object","description":"` + strings.Repeat("x", 70000) + `"}`)}
	manyRes := make([]agentproto.Resource, 1001)
	for i := range manyRes {
		manyRes[i] = agentproto.Resource{URI: fmt.Sprintf("things://%d", i), Name: "n"}
	}
	cases := []struct {
		name   string
		reg    agentproto.Registration
		status int
		want   string
	}{
		{"space in name", agentproto.Registration{Tools: []agentproto.Tool{tool("get order")}}, 400, `Invalid tool name "get order".`},
		{"dot in name", agentproto.Registration{Tools: []agentproto.Tool{tool("orders.get")}}, 400, `Invalid tool name "orders.get".`},
		{"empty name", agentproto.Registration{Tools: []agentproto.Tool{tool("")}}, 400, `Invalid tool name "".`},
		{"65 characters", agentproto.Registration{Tools: []agentproto.Tool{tool(strings.Repeat("a", 65))}}, 400, `Invalid tool name "` + strings.Repeat("a", 65) + `".`},
		{"reserved __", agentproto.Registration{Tools: []agentproto.Tool{tool("github__search")}}, 400, `Invalid tool name "github__search": names containing "__" are reserved for bridged MCP servers.`},
		{"duplicate", agentproto.Registration{Tools: []agentproto.Tool{tool("a"), tool("a")}}, 400, `Duplicate tool name "a": each tool of an agent needs its own name.`},
		{"too many tools", agentproto.Registration{Tools: many}, 400, `Too many tools: 257 registered, the limit is 256 per agent.`},
		{"schema too big", agentproto.Registration{Tools: []agentproto.Tool{bigSchema}}, 400, fmt.Sprintf(`Input schema of tool "big" is %s bytes; the limit is 65,536 bytes.`, agentproto.Thousands(len(bigSchema.InputSchema)))},
		{"too many resources", agentproto.Registration{Tools: []agentproto.Tool{}, Resources: manyRes}, 400, `Too many resources: 1001 registered, the limit is 1,000 per agent.`},
		{"invalid prompt name", agentproto.Registration{Prompts: []agentproto.Prompt{{Name: "sum up"}}}, 400, `Invalid prompt name "sum up".`},
		{"schema not an object", agentproto.Registration{Tools: []agentproto.Tool{{Name: "x", InputSchema: json.RawMessage(`{"type":"string"}`)}}}, 400, `Input schema of tool "x" must be a JSON object with "type": "object".`},
		{"timeout over 120 s", agentproto.Registration{Tools: []agentproto.Tool{{Name: "x", InputSchema: json.RawMessage(`{"type":"object"}`), TimeoutMs: 120001}}}, 400, `Timeout of tool "x" is 120001ms; it must be between 0 and 120000ms.`},
		{"old protocol", agentproto.Registration{Protocol: 99}, 400, `Unsupported agent protocol 99: this gateway speaks 1. Upgrade the SDK or the gateway.`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := e.register(e.agentKey, regJSON(t, c.reg))
			if status != c.status || body != c.want {
				t.Errorf("got %d %q\nwant %d %q", status, body, c.status, c.want)
			}
		})
	}
	t.Run("registration over 512 KiB", func(t *testing.T) {
		tools := make([]agentproto.Tool, 200)
		for i := range tools {
			tools[i] = agentproto.Tool{Name: fmt.Sprintf("t%d", i), Description: strings.Repeat("d", 3000), InputSchema: json.RawMessage(`{"type":"object"}`)}
		}
		body := regJSON(t, agentproto.Registration{Tools: tools})
		status, msg := e.register(e.agentKey, body)
		want := fmt.Sprintf("Registration is %s bytes; the limit is 524,288 bytes.", agentproto.Thousands(len(body)))
		if status != http.StatusRequestEntityTooLarge || msg != want {
			t.Errorf("got %d %q, want 413 %q", status, msg, want)
		}
	})
	t.Run("not JSON", func(t *testing.T) {
		status, msg := e.register(e.agentKey, []byte("{"))
		if status != 400 || !strings.HasPrefix(msg, "Registration is not valid JSON: ") {
			t.Errorf("got %d %q", status, msg)
		}
	})
	t.Run("unknown key", func(t *testing.T) {
		status, msg := e.register("sfx_agent_nope", regJSON(t, agentproto.Registration{}))
		if status != 401 || msg != "Unknown or revoked agent key. Create one with: spacefix keys create --kind agent" {
			t.Errorf("got %d %q", status, msg)
		}
	})
	t.Run("client key", func(t *testing.T) {
		status, msg := e.register(e.clientKey, regJSON(t, agentproto.Registration{}))
		if status != 403 || !strings.HasPrefix(msg, "This is a client key.") {
			t.Errorf("got %d %q", status, msg)
		}
	})
	t.Run("project limits", func(t *testing.T) {
		must(t, e.store.UpdateProjectSettings(context.Background(), e.project.ID, store.ProjectSettings{MaxTools: 2}))
		defer e.store.UpdateProjectSettings(context.Background(), e.project.ID, store.ProjectSettings{})
		status, msg := e.register(e.agentKey, regJSON(t, agentproto.Registration{Tools: []agentproto.Tool{tool("a"), tool("b"), tool("c")}}))
		if status != 400 || msg != "Too many tools: 3 registered, the limit is 2 per agent." {
			t.Errorf("got %d %q", status, msg)
		}
	})
	t.Run("ticket is single use", func(t *testing.T) {
		status, body := e.register(e.agentKey, regJSON(t, agentproto.Registration{Tools: []agentproto.Tool{tool("a")}}))
		if status != 200 {
			t.Fatalf("register: %d %s", status, body)
		}
		var tk agentproto.Ticket
		must(t, json.Unmarshal([]byte(body), &tk))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h := http.Header{"Authorization": {"Bearer " + e.agentKey}}
		ws, _, err := websocket.Dial(ctx, e.url+agentproto.ConnectPath+"?ticket="+tk.Ticket, &websocket.DialOptions{HTTPHeader: h})
		must(t, err)
		defer ws.CloseNow()
		_, resp, err := websocket.Dial(ctx, e.url+agentproto.ConnectPath+"?ticket="+tk.Ticket, &websocket.DialOptions{HTTPHeader: h})
		if err == nil || resp == nil || resp.StatusCode != 401 {
			t.Errorf("second use of a ticket: err %v", err)
		}
	})
}

// A replica that stops answering pings is dropped within a few heartbeats.
func TestDeadAgentNoticed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.heartbeat = 300 * time.Millisecond })
	e.dialAgent(t, agentproto.Registration{Tools: []agentproto.Tool{tool("a")}})
	// This agent never reads, so it never answers a ping: as good as dead.
	waitFor(t, "the replica to register", func() bool { return len(e.gw.Registry().All()) == 1 })
	start := time.Now()
	waitFor(t, "the silent replica to be dropped", func() bool { return len(e.gw.Registry().All()) == 0 })
	t.Logf("dropped after %v", time.Since(start).Round(time.Millisecond))
}

// A replica that pings but never reads is dropped too: the calls sent to
// it would otherwise wait in a write for ever, each holding a goroutine of
// the gateway. (The gateway reads the pings, but answering one means a
// pong written behind the stuck call, so its reader stops, the agent looks
// silent and the watchdog closes it. A WebSocket layer that answered pings
// apart from the writes would need a write check of its own; this test
// says so.)
func TestAgentThatDoesNotReadNoticed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.heartbeat = 300 * time.Millisecond })
	ws := e.dialAgent(t, agentproto.Registration{Tools: []agentproto.Tool{tool("a")}})
	waitFor(t, "the replica to register", func() bool { return len(e.gw.Registry().All()) == 1 })
	// Ping often without ever reading: the pings reach the gateway (it
	// counts the agent as alive), the pongs and calls pile up unread.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			ws.Ping(ctx) // writes the ping; the pong is never read
			cancel()
		}
	}()
	// Calls with large arguments fill the socket's buffers.
	c := e.connect("2025-11-25", e.clientKey, nil)
	big := strings.Repeat("x", 200<<10)
	for range 40 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c.CallTool(ctx, &mcp.CallToolParams{Name: "a", Arguments: map[string]any{"pad": big}})
		}()
	}
	start := time.Now()
	waitFor(t, "the replica that does not read to be dropped", func() bool { return len(e.gw.Registry().All()) == 0 })
	t.Logf("dropped after %v", time.Since(start).Round(time.Millisecond))
}
