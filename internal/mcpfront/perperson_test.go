package mcpfront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	sfauth "github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/route/routetest"
	"github.com/spacefix/spacefix/internal/schema"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/upstream/upstreamtest"
)

// These tests run the MCP endpoint in front of a per-person bridged
// remote played by the test (an in-memory replica whose registration has
// Bridge.PerPerson), with a fake of the gateway's upstream accounts: what
// a client reads, and what the bridge receives, for each kind of caller.

const (
	ppAgentKey = "key_bridge"
	ppTool     = "gh__whoami"
	ppHost     = "mcp.example.com"
	ppConnect  = upstreamtest.ConnectURL + ppAgentKey
)

// ppEnv is an endpoint in front of one per-person bridged remote.
type ppEnv struct {
	t    *testing.T
	st   *sqlite.Store
	f    *Front
	url  string
	up   *upstreamtest.Accounts
	tr   *routetest.Transport
	reg  *agents.Registry
	proj store.Project

	mu    sync.Mutex
	calls []agentproto.Message // the calls the bridge received
	// refuse makes the bridge end a call carrying this upstream token
	// with CodeUpstreamUnauthorized, as for an HTTP 401 of its remote.
	refuse map[string]bool
}

// newPPEnv starts the endpoint; pp is the bridge's per-person mode. Three
// bearer tokens call it: "ada" (person 7) and "bob" (person 8) through
// OAuth grants, and "key", a client key.
func newPPEnv(t *testing.T, pp agentproto.PerPerson) *ppEnv {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	proj, err := st.CreateProject(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	calls := store.NewCallLog(st, nil)
	t.Cleanup(func() { calls.Close(context.Background()) })
	e := &ppEnv{t: t, st: st, reg: agents.New(&agents.Options{Logger: ppQuiet()}), tr: routetest.New(), proj: proj,
		refuse: map[string]bool{},
		up:     upstreamtest.New(ppAgentKey, map[int64]string{7: "ada-token"})}
	e.f = New(Options{Registry: e.reg, Store: st, Verifier: sfauth.NewVerifier(st, 0), CallLog: calls,
		Logger: ppQuiet(), Upstream: e.up})
	if err := e.f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.f.Close() })

	// Who the grants' people are: persons 7 and 8, in the store.
	for grant, id := range map[string]int64{"grant_ada": 7, "grant_bob": 8} {
		if _, err := st.CreateOAuthGrant(ctx, store.OAuthGrant{ID: grant, ProjectID: proj.ID, UserID: id,
			ClientID: "client_1", ClientName: "Claude", Scope: "mcp:read mcp:write"}); err != nil {
			t.Fatal(err)
		}
	}

	// The bridge.
	in := json.RawMessage(`{"type":"object","properties":{"requestId":{"type":"string"}}}`)
	s, err := schema.CompileWith(in, schema.Options{Default2020: true})
	if err != nil {
		t.Fatal(err)
	}
	rep := &agents.Replica{
		ID: "r1", ProjectID: proj.ID, AgentKey: ppAgentKey, Since: time.Now(),
		Reg: &agentproto.Registration{Protocol: agentproto.Version, Name: "gh",
			Bridge: &agentproto.Bridge{Transport: "streamable-http", Target: "https://" + ppHost + "/mcp", PerPerson: &pp},
			Tools: []agentproto.Tool{
				{Name: ppTool, Description: "Who am I upstream", InputSchema: in},
				{Name: "gh__create", Description: "Creates", InputSchema: json.RawMessage(`{"type":"object","properties":{"requestId":{"type":"string"}},"required":["requestId"]}`), IdempotencyKey: "requestId"},
			},
			Resources: []agentproto.Resource{{URI: "gh://me", Name: "me"}},
			Prompts:   []agentproto.Prompt{{Name: "gh__hello", Description: "Hello"}},
		},
	}
	create, err := schema.CompileWith(rep.Reg.Tools[1].InputSchema, schema.Options{Default2020: true})
	if err != nil {
		t.Fatal(err)
	}
	conn := route.NewConn(e.tr, ppQuiet(), route.Events{})
	rep.Conn = conn
	e.reg.Add(rep, map[string]*schema.Schema{ppTool: s, "gh__create": create})
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn.Serve(context.Background())
	}()
	go e.serveBridge()
	t.Cleanup(func() { e.tr.Close(""); <-done })

	keys := map[string]store.Key{
		"ada": {ID: "grant_ada", ProjectID: proj.ID, Kind: store.KindClient, OAuth: true, ProjectName: "shop"},
		"bob": {ID: "grant_bob", ProjectID: proj.ID, Kind: store.KindClient, OAuth: true, ProjectName: "shop"},
		"key": {ID: "key_c", Name: "ci", ProjectID: proj.ID, Kind: store.KindClient, ProjectName: "shop"},
	}
	bearer := auth.RequireBearerToken(func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		k, ok := keys[token]
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return pipeline.TokenInfo(k, nil), nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	srv := httptest.NewServer(bearer(http.HandlerFunc(e.f.dispatch)))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

func ppQuiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// serveBridge plays the bridge: each call is answered with who it acts
// as upstream ("as <token>", or "as shared" without one), or refused as
// a 401 of the remote when its token is in refuse.
func (e *ppEnv) serveBridge() {
	for {
		m := e.tr.Next()
		if m == nil {
			return
		}
		if m.Type != agentproto.TypeCall {
			continue
		}
		e.mu.Lock()
		e.calls = append(e.calls, *m)
		refused := e.refuse[m.Caller.UpstreamToken]
		e.mu.Unlock()
		as := m.Caller.UpstreamToken
		if as == "" {
			as = "shared"
		}
		var reply *agentproto.Message
		switch {
		case refused:
			reply = &agentproto.Message{Type: agentproto.TypeError, ID: m.ID, Message: "the remote refused the person's token", Code: agentproto.CodeUpstreamUnauthorized}
		case m.Kind == agentproto.KindResource:
			reply = &agentproto.Message{Type: agentproto.TypeResult, ID: m.ID, Result: json.RawMessage(`{"text":"as ` + as + `"}`)}
		case m.Kind == agentproto.KindPrompt:
			reply = &agentproto.Message{Type: agentproto.TypeResult, ID: m.ID, Result: json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"as ` + as + `"}}]}`)}
		default:
			reply = &agentproto.Message{Type: agentproto.TypeResult, ID: m.ID, Result: json.RawMessage(`{"content":[{"type":"text","text":"as ` + as + `"}]}`)}
		}
		e.tr.Reply(reply)
	}
}

// received returns the calls the bridge got so far, and forgets them.
func (e *ppEnv) received() []agentproto.Message {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.calls
	e.calls = nil
	return out
}

// rpcAnswer is a JSON-RPC answer as a client reads it.
type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// send posts one JSON-RPC message with bearer token who and returns the
// answer to it (from a JSON body or the last SSE event), and the response.
func (e *ppEnv) send(who, body string, headers map[string]string) (rpcAnswer, *http.Response) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+who)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	var a rpcAnswer
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var last []byte
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok && bytes.Contains(d, []byte(`"id"`)) {
				last = append([]byte(nil), d...)
			}
		}
		b = last
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &a); err != nil {
			e.t.Fatalf("answer %s: %v", b, err)
		}
	}
	return a, resp
}

// The headers and _meta of a 2026-07-28 request; caps are the client's
// capabilities.
func ppHeaders(method, name string) map[string]string {
	return map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name}
}

func ppMeta(caps string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}`
}

// callModern calls tool with args at 2026-07-28 as who, whose client
// declared caps.
func (e *ppEnv) callModern(who, tool, args, caps string) rpcAnswer {
	e.t.Helper()
	a, _ := e.send(who, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`,`+ppMeta(caps)+`}}`,
		ppHeaders("tools/call", tool))
	return a
}

// session opens a 2025-11-25 session for who, whose client declared
// caps, and returns a function that sends a request in it; the session
// ends with the test.
func (e *ppEnv) session(who, caps string) func(method, params string) rpcAnswer {
	e.t.Helper()
	_, resp := e.send(who, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		e.t.Fatal("no session")
	}
	e.t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, e.url, nil)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Authorization", "Bearer "+who)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	e.send(who, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
	n := 1
	return func(method, params string) rpcAnswer {
		e.t.Helper()
		n++
		a, _ := e.send(who, `{"jsonrpc":"2.0","id":`+strconv.Itoa(n)+`,"method":"`+method+`","params":`+params+`}`, h)
		return a
	}
}

// text returns the one text of a tool result, and whether it is an error.
func ppText(t *testing.T, a rpcAnswer) (string, bool) {
	t.Helper()
	if a.Error != nil {
		t.Fatalf("error %d %q, want a result", a.Error.Code, a.Error.Message)
	}
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(a.Result, &r); err != nil || len(r.Content) != 1 {
		t.Fatalf("result %s, want one text", a.Result)
	}
	return r.Content[0].Text, r.IsError
}

// elicitation checks that a is -32042 with one URL-mode elicitation of
// the connect page, as a client that declared elicitation.url reads it.
func elicitation(t *testing.T, a rpcAnswer, tool string) {
	t.Helper()
	if a.Error == nil || a.Error.Code != -32042 {
		t.Fatalf("answer %+v %s, want error -32042", a.Error, a.Result)
	}
	var d struct {
		Elicitations []struct {
			Mode, Message, URL, ElicitationID string
		} `json:"elicitations"`
	}
	if err := json.Unmarshal(a.Error.Data, &d); err != nil || len(d.Elicitations) != 1 {
		t.Fatalf("data %s, want one elicitation", a.Error.Data)
	}
	el := d.Elicitations[0]
	want := "Connect your " + ppHost + " account to use " + tool + "."
	if el.Mode != "url" || el.URL != ppConnect || el.Message != want || el.ElicitationID == "" {
		t.Errorf("elicitation = %+v, want mode url, url %s, message %q and an id", el, ppConnect, want)
	}
}

const (
	urlCaps  = `{"elicitation":{"url":{}}}`
	formCaps = `{"elicitation":{}}`
)

var connectConnect = agentproto.PerPerson{Mode: agentproto.PerPersonConnect, URL: "https://" + ppHost + "/mcp"}

// A call with a client key, not a person, is refused with the sentence
// that says why, before the bridge sees it: a tool call with an isError
// result, a read and a prompt with a JSON-RPC error.
func TestPerPersonKeyRefused(t *testing.T) {
	e := newPPEnv(t, connectConnect)
	want := ppTool + " acts on " + ppHost + " as each person's own account, and this call comes with an agent key, not a person. " +
		`Call it through an MCP client signed in with OAuth, or ask the bridge's operator to set "fallback": "shared".`
	got, isError := ppText(t, e.callModern("key", ppTool, `{}`, urlCaps))
	if got != want || !isError {
		t.Errorf("tool call = %q (isError %v), want isError %q", got, isError, want)
	}
	call := e.session("key", urlCaps)
	got, isError = ppText(t, call("tools/call", `{"name":"`+ppTool+`","arguments":{}}`))
	if got != want || !isError {
		t.Errorf("2025-11-25 tool call = %q (isError %v), want isError %q", got, isError, want)
	}
	a := call("resources/read", `{"uri":"gh://me"}`)
	if wantRead := strings.Replace(want, ppTool, "gh://me", 1); a.Error == nil || a.Error.Message != wantRead {
		t.Errorf("resources/read = %+v, want error %q", a.Error, wantRead)
	}
	a = call("prompts/get", `{"name":"gh__hello"}`)
	if wantPrompt := strings.Replace(want, ppTool, "gh__hello", 1); a.Error == nil || a.Error.Message != wantPrompt {
		t.Errorf("prompts/get = %+v, want error %q", a.Error, wantPrompt)
	}
	if got := e.received(); len(got) != 0 {
		t.Errorf("the bridge got %d calls, want none", len(got))
	}

	// With "fallback": "shared", the key's call goes, with no token: the
	// bridge uses its own account.
	shared := newPPEnv(t, agentproto.PerPerson{Mode: agentproto.PerPersonConnect, URL: "https://" + ppHost + "/mcp", Fallback: agentproto.FallbackShared})
	if got, isError := ppText(t, shared.callModern("key", ppTool, `{}`, `{}`)); got != "as shared" || isError {
		t.Errorf("with fallback shared: %q (isError %v), want %q", got, isError, "as shared")
	}
}

// A person's call carries their own upstream token, and only theirs.
func TestPerPersonToken(t *testing.T) {
	e := newPPEnv(t, connectConnect)
	e.up.SetToken(8, "bob-token")
	for who, want := range map[string]string{"ada": "as ada-token", "bob": "as bob-token"} {
		if got, isError := ppText(t, e.callModern(who, ppTool, `{}`, `{}`)); got != want || isError {
			t.Errorf("%s: %q (isError %v), want %q", who, got, isError, want)
		}
		calls := e.received()
		if len(calls) != 1 || calls[0].Caller.Person == nil || "as "+calls[0].Caller.UpstreamToken != want {
			t.Fatalf("%s: the bridge got %+v, want one call with the person's token", who, calls)
		}
	}
	// Reads and prompts too.
	call := e.session("ada", `{}`)
	a := call("resources/read", `{"uri":"gh://me"}`)
	if a.Error != nil || !strings.Contains(string(a.Result), `"text":"as ada-token"`) {
		t.Errorf("resources/read = %+v %s, want ada's", a.Error, a.Result)
	}
	a = call("prompts/get", `{"name":"gh__hello"}`)
	if a.Error != nil || !strings.Contains(string(a.Result), `"text":"as ada-token"`) {
		t.Errorf("prompts/get = %+v %s, want ada's", a.Error, a.Result)
	}

	// Exchange mode: the gateway sends no token; the bridge exchanges the
	// identity token itself.
	ex := newPPEnv(t, agentproto.PerPerson{Mode: agentproto.PerPersonExchange})
	if got, _ := ppText(t, ex.callModern("bob", ppTool, `{}`, `{}`)); got != "as shared" {
		t.Errorf("exchange mode: %q, want no token from the gateway", got)
	}
}

// A person with no account gets the connect page: a URL-mode elicitation
// (-32042) when the client declared elicitation.url — at 2026-07-28 in
// the request, at 2025-11-25 at initialize — else the link and what to
// do, as an isError result.
func TestPerPersonConnect(t *testing.T) {
	e := newPPEnv(t, connectConnect)
	link := "Connect your " + ppHost + " account to use " + ppTool + ": open " + ppConnect + ", sign in there, then call " + ppTool + " again."

	elicitation(t, e.callModern("bob", ppTool, `{}`, urlCaps), ppTool)
	call := e.session("bob", urlCaps)
	elicitation(t, call("tools/call", `{"name":"`+ppTool+`","arguments":{}}`), ppTool)
	elicitation(t, call("resources/read", `{"uri":"gh://me"}`), "gh://me")
	elicitation(t, call("prompts/get", `{"name":"gh__hello"}`), "gh__hello")

	for name, caps := range map[string]string{"no elicitation": `{}`, "form elicitation only": formCaps} {
		if got, isError := ppText(t, e.callModern("bob", ppTool, `{}`, caps)); got != link || !isError {
			t.Errorf("2026-07-28, %s: %q (isError %v), want isError %q", name, got, isError, link)
		}
		call := e.session("bob", caps)
		if got, isError := ppText(t, call("tools/call", `{"name":"`+ppTool+`","arguments":{}}`)); got != link || !isError {
			t.Errorf("2025-11-25, %s: %q (isError %v), want isError %q", name, got, isError, link)
		}
	}

	// An account the upstream would not refresh: connect again.
	e.up.Refuse(8)
	again := "Your " + ppHost + " account needs connecting again: open " + ppConnect + ", sign in there, then call " + ppTool + " again."
	if got, isError := ppText(t, e.callModern("bob", ppTool, `{}`, `{}`)); got != again || !isError {
		t.Errorf("reconnect: %q (isError %v), want isError %q", got, isError, again)
	}
	if got := e.received(); len(got) != 0 {
		t.Errorf("the bridge got %d calls, want none", len(got))
	}
}

// A call the remote refused for the person's token has the account
// refreshed and goes once more, with the new token; refused again, the
// person is asked to connect. The code never reaches the client.
func TestPerPersonRefusedToken(t *testing.T) {
	e := newPPEnv(t, connectConnect)
	e.refuse["ada-token"] = true
	e.up.RefreshGives(7, "ada-token-2")
	if got, isError := ppText(t, e.callModern("ada", ppTool, `{}`, `{}`)); got != "as ada-token-2" || isError {
		t.Errorf("after a refused token: %q (isError %v), want %q", got, isError, "as ada-token-2")
	}
	if got := e.up.Refreshes(); len(got) != 1 || got[0] != "ada-token" {
		t.Errorf("refreshed %q, want once, the refused token", got)
	}
	calls := e.received()
	if len(calls) != 2 || calls[0].Caller.UpstreamToken != "ada-token" || calls[1].Caller.UpstreamToken != "ada-token-2" {
		t.Fatalf("the bridge got %d calls, want the refused one and one more with the new token", len(calls))
	}

	// Refused again after the refresh: connect again, and no third call.
	e.refuse["ada-token-2"] = true
	e.up.RefreshGives(7, "ada-token-3")
	e.refuse["ada-token-3"] = true
	again := "Your " + ppHost + " account needs connecting again: open " + ppConnect + ", sign in there, then call " + ppTool + " again."
	if got, isError := ppText(t, e.callModern("ada", ppTool, `{}`, `{}`)); got != again || !isError {
		t.Errorf("refused twice: %q (isError %v), want isError %q", got, isError, again)
	}
	if n := len(e.received()); n != 2 {
		t.Errorf("the bridge got %d calls, want 2: one more after the refresh, no more", n)
	}
	elicitation(t, e.callModern("ada", ppTool, `{}`, urlCaps), ppTool)
	e.received()

	// A refresh the upstream refuses: connect again at once.
	e.up.RefreshGives(7, "")
	e.up.SetToken(7, "ada-token-3")
	if got, isError := ppText(t, e.callModern("ada", ppTool, `{}`, `{}`)); got != again || !isError {
		t.Errorf("refresh refused: %q (isError %v), want isError %q", got, isError, again)
	}
	if n := len(e.received()); n != 1 {
		t.Errorf("the bridge got %d calls, want 1", n)
	}

	// Reads: the same, as JSON-RPC errors.
	e.up.SetToken(7, "ada-token-3")
	e.up.RefreshGives(7, "ada-token-4")
	call := e.session("ada", `{}`)
	if a := call("resources/read", `{"uri":"gh://me"}`); a.Error != nil || !strings.Contains(string(a.Result), `"text":"as ada-token-4"`) {
		t.Errorf("resources/read after a refused token = %+v %s, want the refreshed token's", a.Error, a.Result)
	}
	e.received()

	// A repeat-safe tool: the request id goes on with the call made
	// again, and a repeat gets that call's result.
	e.refuse["ada-token-4"] = true
	e.up.RefreshGives(7, "ada-token-5")
	for _, what := range []string{"the call", "its repeat"} {
		if got, isError := ppText(t, e.callModern("ada", "gh__create", `{"requestId":"r-9"}`, `{}`)); got != "as ada-token-5" || isError {
			t.Errorf("%s: %q (isError %v), want %q", what, got, isError, "as ada-token-5")
		}
	}
	if n := len(e.received()); n != 2 {
		t.Errorf("the bridge got %d calls, want 2: the refused one and the one after the refresh", n)
	}
}

// A per-person tool's results are never cached: each person gets their
// own, however long the project caches the tool. And a request id of a
// repeat-safe per-person tool is kept per person.
func TestPerPersonNotShared(t *testing.T) {
	e := newPPEnv(t, connectConnect)
	e.up.SetToken(8, "bob-token")
	ctx := context.Background()
	if _, err := e.f.store.(store.Store).SaveToolSettings(ctx, store.ToolSettings{ProjectID: e.proj.ID, Tool: ppTool, CacheSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	e.f.controls.Forget(e.proj.ID)
	if c := e.f.controls.Get(ctx, e.proj.ID); c.CacheFor(e.reg.Snapshot(e.proj.ID).Tools[ppTool]) != 10*time.Minute {
		t.Fatal("the tool is not set to be cached")
	}
	for _, who := range []string{"ada", "bob", "ada", "bob"} {
		if got, _ := ppText(t, e.callModern(who, ppTool, `{}`, `{}`)); got != "as "+who+"-token" {
			t.Errorf("%s: %q, want their own", who, got)
		}
	}
	if n := len(e.received()); n != 4 {
		t.Errorf("the bridge got %d calls, want 4: none answered from the cache", n)
	}

	for _, who := range []string{"ada", "bob"} {
		if got, _ := ppText(t, e.callModern(who, "gh__create", `{"requestId":"r-1"}`, `{}`)); got != "as "+who+"-token" {
			t.Errorf("%s, request id r-1: %q, want their own", who, got)
		}
	}
	// A repeat by the same person is answered from the record.
	if got, _ := ppText(t, e.callModern("ada", "gh__create", `{"requestId":"r-1"}`, `{}`)); got != "as ada-token" {
		t.Errorf("ada's repeat: %q, want her result", got)
	}
	if n := len(e.received()); n != 2 {
		t.Errorf("the bridge got %d calls, want 2: one per person, the repeat answered from the record", n)
	}
}
