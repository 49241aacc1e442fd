package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// waitFor bounds every wait of these tests.
const waitFor = 10 * time.Second

// fakeGateway is the gateway's side of the agent protocol, enough for a
// bridge to register and take calls: it keeps the latest registration and
// connection, sends calls and returns the agent's answer.
type fakeGateway struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	reg     agentproto.Registration
	conn    *websocket.Conn
	answers map[string]chan agentproto.Message
	changed chan struct{} // closed and renewed on each registration or connection
	nextID  int
}

const fakeAgentKey = "sfx_agent_fake"

func newFakeGateway(t *testing.T) *fakeGateway {
	g := &fakeGateway{t: t, answers: map[string]chan agentproto.Message{}, changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+agentproto.RegisterPath, func(w http.ResponseWriter, r *http.Request) {
		var reg agentproto.Registration
		if err := json.NewDecoder(r.Body).Decode(&reg); err != nil || r.Header.Get("Authorization") != "Bearer "+fakeAgentKey {
			http.Error(w, "bad registration", http.StatusBadRequest)
			return
		}
		g.mu.Lock()
		g.reg = reg
		g.signalLocked()
		g.mu.Unlock()
		json.NewEncoder(w).Encode(agentproto.Ticket{Ticket: "t", ExpiresInMs: 30000})
	})
	mux.HandleFunc("GET "+agentproto.ConnectPath, func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ws.SetReadLimit(agentproto.MaxFrameBytes)
		welcome, _ := json.Marshal(agentproto.Message{Type: agentproto.TypeWelcome, Welcome: &agentproto.Welcome{
			Protocol: agentproto.Version, Replica: "r-1", Project: "p", Agent: "key_1", CallWaitMs: 30000, HeartbeatMs: 60000}})
		if ws.Write(r.Context(), websocket.MessageText, welcome) != nil {
			return
		}
		g.mu.Lock()
		g.conn = ws
		g.signalLocked()
		g.mu.Unlock()
		for {
			_, data, err := ws.Read(r.Context())
			if err != nil {
				return
			}
			var m agentproto.Message
			if json.Unmarshal(data, &m) != nil {
				continue
			}
			if m.Type == agentproto.TypeResult || m.Type == agentproto.TypeError {
				g.mu.Lock()
				ch := g.answers[m.ID]
				g.mu.Unlock()
				if ch != nil {
					ch <- m
				}
			}
		}
	})
	g.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		g.srv.CloseClientConnections()
		g.srv.Close()
	})
	return g
}

func (g *fakeGateway) signalLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// waitTool waits until the agent registered tool and is connected.
func (g *fakeGateway) waitTool(tool string) {
	g.t.Helper()
	deadline := time.After(waitFor)
	for {
		g.mu.Lock()
		ok := g.conn != nil
		if ok {
			ok = false
			for _, tl := range g.reg.Tools {
				ok = ok || tl.Name == tool
			}
		}
		changed := g.changed
		g.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			g.t.Fatalf("the bridge did not register %s and connect", tool)
		}
	}
}

// registration is the latest registration.
func (g *fakeGateway) registration() agentproto.Registration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reg
}

// call delivers a tool call with caller and returns the agent's answer.
func (g *fakeGateway) call(tool string, caller *agentproto.Caller) agentproto.Message {
	g.t.Helper()
	return g.deliver(agentproto.KindTool, tool, json.RawMessage(`{}`), caller)
}

// deliver delivers a call of kind and returns the agent's answer.
func (g *fakeGateway) deliver(kind, name string, args json.RawMessage, caller *agentproto.Caller) agentproto.Message {
	g.t.Helper()
	g.mu.Lock()
	g.nextID++
	id := fmt.Sprintf("c-%d", g.nextID)
	ch := make(chan agentproto.Message, 1)
	g.answers[id] = ch
	conn := g.conn
	g.mu.Unlock()
	data, _ := json.Marshal(agentproto.Message{Type: agentproto.TypeCall, ID: id, Kind: kind, Name: name,
		Args: args, Caller: caller, Deadline: time.Now().Add(waitFor).UnixMilli()})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := conn.Write(ctx, websocket.MessageText, data); err != nil {
		g.t.Fatalf("send %s: %v", id, err)
	}
	select {
	case m := <-ch:
		return m
	case <-ctx.Done():
		g.t.Fatalf("no answer to %s (%s)", id, name)
		return agentproto.Message{}
	}
}

// answerText is what a client would read: a result's text, or the error's
// message (with its code, if any).
func answerText(m agentproto.Message) string {
	if m.Type == agentproto.TypeError {
		if m.Code != 0 {
			return fmt.Sprintf("error %d: %s", m.Code, m.Message)
		}
		return "error: " + m.Message
	}
	var r agentproto.ToolResult
	json.Unmarshal(m.Result, &r)
	var parts []string
	for _, c := range r.Content {
		var tc struct{ Text string }
		json.Unmarshal(c, &tc)
		parts = append(parts, tc.Text)
	}
	s := strings.Join(parts, "")
	if r.IsError {
		return "isError: " + s
	}
	return s
}

// fakeRemote is a remote MCP server over Streamable HTTP whose whoami tool
// answers the bearer token of the request. It records each request's
// session and token, and answers 401 to tokens it is told to refuse.
type fakeRemote struct {
	srv *httptest.Server

	mu       sync.Mutex
	seen     map[string][]string // session id -> bearer tokens, in order
	refuse   map[string]int      // token -> how many more requests to refuse (-1: always)
	refusals int
}

func newFakeRemote(t *testing.T) *fakeRemote {
	f := &fakeRemote{seen: map[string][]string{}, refuse: map[string]int{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "who the token says"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		tok := strings.TrimPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tok}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		f.mu.Lock()
		n := f.refuse[tok]
		if n != 0 {
			f.refuse[tok] = n - 1
			f.refusals++
		}
		if ok && r.Method == http.MethodPost {
			sid := r.Header.Get("Mcp-Session-Id")
			f.seen[sid] = append(f.seen[sid], tok)
		}
		f.mu.Unlock()
		if !ok || n != 0 {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	return f
}

func (f *fakeRemote) url() string { return f.srv.URL + "/mcp" }

// refuseToken makes the next n requests with tok get 401 (-1: all).
func (f *fakeRemote) refuseToken(tok string, n int) {
	f.mu.Lock()
	f.refuse[tok] = n
	f.mu.Unlock()
}

// sessions returns, per session that carried a token, the distinct
// tokens it carried.
func (f *fakeRemote) sessions() map[string][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]string{}
	for sid, toks := range f.seen {
		if sid == "" {
			continue // initialize: before the session has an id
		}
		var distinct []string
		for _, t := range toks {
			if len(distinct) == 0 || distinct[len(distinct)-1] != t {
				distinct = append(distinct, t)
			}
		}
		out[sid] = distinct
	}
	return out
}
