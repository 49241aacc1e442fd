package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// fuzzReplica is a hand-driven replica for FuzzAgentFrames: it reports
// each call it receives and sends whatever frames the fuzzer makes up.
type fuzzReplica struct {
	ws    *websocket.Conn
	calls chan agentproto.Message
}

func (fe *fuzzEnv) startFuzzReplica(f *testing.F) *fuzzReplica {
	f.Helper()
	reg := agentproto.Registration{Protocol: agentproto.Version, Tools: []agentproto.Tool{
		{Name: "echo", Description: "Answers as the fuzzer says.", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}, Resources: []agentproto.Resource{{URI: "fuzz://r", Name: "R"}},
		Prompts: []agentproto.Prompt{{Name: "p"}}}
	body, _ := json.Marshal(reg)
	req, _ := http.NewRequest(http.MethodPost, fe.url+agentproto.RegisterPath, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+fe.agentKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.Fatal(err)
	}
	var tk agentproto.Ticket
	err = json.NewDecoder(resp.Body).Decode(&tk)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		f.Fatalf("register: %d %v", resp.StatusCode, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ws, _, err := websocket.Dial(ctx, fe.url+agentproto.ConnectPath+"?ticket="+tk.Ticket,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + fe.agentKey}}})
	if err != nil {
		cancel()
		f.Fatal(err)
	}
	r := &fuzzReplica{ws: ws, calls: make(chan agentproto.Message, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var m agentproto.Message
			if json.Unmarshal(b, &m) == nil && m.Type == agentproto.TypeCall {
				r.calls <- m
			}
		}
	}()
	f.Cleanup(func() {
		cancel()
		ws.CloseNow()
		<-done
	})
	waitFor(f, "the replica to register", func() bool { return len(fe.gw.Registry().All()) > 0 })
	return r
}

func (r *fuzzReplica) send(t *testing.T, m agentproto.Message) {
	b, _ := json.Marshal(m)
	if err := r.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		t.Fatalf("the gateway closed the replica's connection: %v", err)
	}
}

// agentFrameSeeds are answers an agent might send, one frame a line; $ID
// stands for the id of the call being answered.
var agentFrameSeeds = []string{
	`{"type":"result","id":"$ID","result":{"content":[{"type":"text","text":"{\"id\":\"1042\"}"}],"structuredContent":{"id":"1042"}}}`,
	`{"type":"result","id":"$ID","result":{"text":"[1,2]","mimeType":"application/json"}}`,
	`{"type":"result","id":"$ID","result":{"description":"d","messages":[{"role":"user","content":{"type":"text","text":"hi"}}]}}`,
	`{"type":"result","id":"$ID","result":{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"},{"type":"audio","data":"aGk=","mimeType":"audio/wav"}]}}`,
	`{"type":"result","id":"$ID","result":{"content":[{"type":"resource","resource":{"uri":"x://y","text":"t"}}],"isError":true}}`,
	`{"type":"error","id":"$ID","message":"no order with id 1042: ask the user to confirm the id"}`,
	"{\"type\":\"progress\",\"id\":\"$ID\",\"message\":\"fetched 120 of 400 rows\"}\n{\"type\":\"result\",\"id\":\"$ID\",\"result\":{\"content\":[]}}",
	`{"type":"confirm","id":"$ID","input":"i-1","message":"Cancel order 1042?"}`,
	"{\"type\":\"set_enabled\",\"name\":\"echo\",\"enabled\":false}\n{\"type\":\"set_enabled\",\"name\":\"nope\",\"enabled\":true}",
	`{"type":"result","id":"$ID","result":null}`,
	`{"type":"result","id":"$ID","result":{"content":[null,{"type":"text"},{"type":"image"},{"type":"nope"}]}}`,
	`{"type":"result","id":"$ID","result":{"content":"x","structuredContent":[1],"_meta":{"a":1}}}`,
	`{"type":"result","id":"$ID","result":{"messages":[{"role":"robot","content":null}]}}`,
	`{"type":"result","id":"$ID","result":7}`,
	`{"type":"result","id":"other","result":{}}`,
	`{"type":"error","id":"$ID"}`,
	`not json`, `[]`, `{"type":"call","id":"$ID"}`, ``,
}

// FuzzAgentFrames answers real client calls (a tool call, a resource read
// and a prompt, in a legacy session and statelessly) with frames the
// fuzzer makes up, through the gateway's read path (route.Conn) and its
// conversion of results into MCP answers. Whatever the agent sends, the
// client gets a result or a JSON-RPC error, never a dropped connection or a
// crashed gateway, and the agent's connection stays up.
func FuzzAgentFrames(f *testing.F) {
	for kind := range 6 {
		for _, s := range agentFrameSeeds {
			f.Add(uint8(kind), []byte(s))
		}
	}
	fe := newFuzzEnv(f)
	rep := fe.startFuzzReplica(f)
	sessions := []*mcp.ClientSession{fe.session(f, "2025-11-25"), fe.session(f, "2026-07-28")}
	f.Fuzz(func(t *testing.T, kind uint8, frames []byte) {
		kind %= 6
		cs := sessions[kind/3]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			var err error
			switch kind % 3 {
			case 0:
				_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
			case 1:
				_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fuzz://r"})
			case 2:
				_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "p"})
			}
			errc <- err
		}()
		var call agentproto.Message
		select {
		case call = <-rep.calls:
		case err := <-errc:
			t.Fatalf("the request (kind %d) ended before reaching the replica: %v", kind, err)
		case <-ctx.Done():
			t.Fatalf("the call (kind %d) did not reach the replica", kind)
		}
		for _, line := range bytes.Split(frames, []byte("\n")) {
			line = bytes.ReplaceAll(line, []byte("$ID"), []byte(call.ID))
			if changesState(line) {
				continue
			}
			if err := rep.ws.Write(ctx, websocket.MessageText, line); err != nil {
				t.Fatalf("the gateway closed the replica's connection: %v", err)
			}
		}
		// End the call however the frames left it.
		rep.send(t, agentproto.Message{Type: agentproto.TypeError, ID: call.ID, Message: "end"})
		select {
		case err := <-errc:
			var rpcErr *jsonrpc.Error
			if err != nil && !errors.As(err, &rpcErr) {
				t.Fatalf("kind %d, frames %q: the client got %v, want a result or a JSON-RPC error", kind, frames, err)
			}
		case <-ctx.Done():
			t.Fatalf("kind %d, frames %q: the client got no answer", kind, frames)
		}
	})
}

// changesState reports whether a frame would change the replica for the
// inputs after it (a drain, or switching off the tool they call), which the
// fuzzer must not send: every input starts from the same gateway.
func changesState(frame []byte) bool {
	var m agentproto.Message
	if json.Unmarshal(frame, &m) != nil {
		return false
	}
	return m.Type == agentproto.TypeDrain ||
		m.Type == agentproto.TypeSetEnabled && m.Name == "echo" && m.Enabled != nil && !*m.Enabled
}

// FuzzRegisterHTTP posts arbitrary registration bodies to the real register
// endpoint with a valid agent key: it decodes, checks the limits and
// compiles every tool's schema. The answer is a ticket (200) or a plain
// reason (400, 413), never a 5xx or a dropped connection.
func FuzzRegisterHTTP(f *testing.F) {
	for _, s := range []string{
		`{"protocol":1,"sdk":"go/0.1.0","name":"orders","tools":[{"name":"search_orders","description":"List orders.",` +
			`"inputSchema":{"type":"object","properties":{"customer":{"type":"string","pattern":"^(?=a)\\w+$"}},"required":["customer"]},` +
			`"annotations":{"readOnlyHint":true},"timeoutMs":30000}]}`,
		`{"protocol":1,"name":"crm","namespace":true,"instance":"eu-1","tools":[{"name":"a","description":"d","inputSchema":{"type":"object"}}],` +
			`"resources":[{"uri":"orders://open","name":"Open orders"}],"prompts":[{"name":"summary","arguments":[{"name":"id","required":true}]}]}`,
		`{"protocol":1,"tools":[{"name":"a","inputSchema":{"type":"object","properties":{"x":{"$ref":"#/$defs/missing"}}}}]}`,
		`{"protocol":1,"tools":[{"name":"a","inputSchema":{"type":"object","anyOf":[{"$ref":"#"},{"$ref":"#"}]}}]}`,
		`{"protocol":1,"name":"a-very-long-agent-name-that-is-almost-sixty-four-characters-long","namespace":true,` +
			`"tools":[{"name":"tool","inputSchema":{"type":"object"}}]}`,
		`{"protocol":1,"tools":[{"name":"a","inputSchema":{"type":"object","properties":{"p":{"pattern":"("}}}}]}`,
		`{"protocol":2}`, `{"protocol":1,"tools":[null]}`, `null`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	fe := newFuzzEnv(f)
	client := &http.Client{Timeout: 30 * time.Second}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, _ := http.NewRequest(http.MethodPost, fe.url+agentproto.RegisterPath, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+fe.agentKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("POST register %q: %v; a dropped connection means the handler panicked", body, err)
		}
		defer resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			var tk agentproto.Ticket
			if err := json.NewDecoder(resp.Body).Decode(&tk); err != nil || tk.Ticket == "" {
				t.Errorf("POST register %q = 200 without a ticket (%v)", body, err)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Errorf("POST register %q = %d, want 200, 400 or 413", body, resp.StatusCode)
		}
	})
}
