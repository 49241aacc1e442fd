package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/dashboard"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/postgres"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/testenv"
	"github.com/spacefix/spacefix/internal/users"
)

// startNATS runs a NATS server on a loopback port for the test and
// returns its URL.
func startNATS(t *testing.T) string { return testenv.NATS(t, 0).ClientURL() }

// onBus joins the gateway to the bus at url, with a heartbeat short
// enough for a test to see a silent gateway dropped (after 750 ms), and
// long enough that a gateway busy under the race detector is not.
func onBus(url string) func(*envOptions) {
	return withConfig(func(c *gateway.Config) {
		c.Bus = url
		c.BusHeartbeat = 250 * time.Millisecond
	})
}

// openStore opens another handle of e's store.
func (e *env) openStore() store.Store {
	e.t.Helper()
	var (
		st  store.Store
		err error
	)
	if e.dataPath != "" {
		st, err = sqlite.Open(context.Background(), e.dataPath)
	} else {
		st, err = postgres.Open(context.Background(), e.data)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// sibling starts another gateway on e's store (its own handle of it) and
// bus, as a second replica behind a load balancer would be.
func (e *env) sibling() *env {
	t := e.t
	t.Helper()
	st := e.openStore()
	g, err := gateway.New(e.cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	s := *e
	s.gw, s.store, s.url = g, st, g.URL()
	return &s
}

// clusterAgent is an agent with the tools the cluster tests call: echo,
// steps (two progress lines) and hang (waits until cancelled, and says
// so on the channels).
func clusterAgent(t *testing.T, started, cancelled chan<- string) func(a *core.Agent) {
	return func(a *core.Agent) {
		type textIn struct {
			Text string `json:"text"`
		}
		must(t, core.AddTool(a, "echo", "Echo.", func(ctx context.Context, in textIn) (string, error) { return in.Text, nil }))
		must(t, core.AddTool(a, "steps", "Two steps.", func(ctx context.Context, _ struct{}) (string, error) {
			core.Progress(ctx, "step 1")
			core.Progress(ctx, "step 2")
			return "done", nil
		}))
		must(t, core.AddTool(a, "hang", "Waits.", func(ctx context.Context, _ struct{}) (string, error) {
			started <- "hang"
			<-ctx.Done()
			cancelled <- "hang"
			return "", ctx.Err()
		}))
	}
}

// Two gateways on one store and one bus: an agent connected to A serves
// calls that reach B, with progress and cancellation as on one gateway;
// a tool disabled on A disappears on B; when A goes away, B's caller
// learns the agent disconnected, and B no longer lists its tools.
func TestClusterCallsCrossGateways(t *testing.T) {
	t.Parallel()
	a := newEnv(t, onBus(startNATS(t)))
	b := a.sibling()
	progress := new(progressCollector)
	listChanged := make(chan bool, 16)
	cs := b.connect("2025-11-25", b.clientKey, &mcp.ClientOptions{
		ProgressNotificationHandler: progress.handler,
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- true },
	})
	started, cancelled := make(chan string, 4), make(chan string, 4)
	a.startAgent(core.Options{}, clusterAgent(t, started, cancelled))
	receive(t, listChanged, "tools/list_changed at B's client when an agent connects to A")
	waitFor(t, "B to list the tools of the agent on A", func() bool {
		return slices.Contains(toolNames(t, cs), "echo")
	})
	if got := text(call(t, cs, "echo", map[string]any{"text": "across"})); got != "across" {
		t.Errorf("echo through B = %q", got)
	}
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "steps", Arguments: map[string]any{}, Meta: mcp.Meta{"progressToken": "p1"}})
	if err != nil || r.IsError || text(r) != "done" {
		t.Fatalf("steps through B = %v %v", r, err)
	}
	waitFor(t, "both progress lines at B's client", func() bool { return len(progress.got()) == 2 })
	if got := progress.got(); got[0] != "step 1" || got[1] != "step 2" {
		t.Errorf("progress = %q, want step 1, step 2 in order", got)
	}
	if calls := b.calls(); len(calls) == 0 || calls[0].Replica == "" {
		t.Errorf("B's call log: %+v", calls)
	}

	// Cancellation crosses the bus to the agent's handler.
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{}})
		res <- err
	}()
	receive(t, started, "the hang call to start on the agent")
	cancel()
	receive(t, cancelled, "the agent's handler to be cancelled")
	<-res

	// A control saved on A holds on B at once.
	a.save(store.ToolSettings{ProjectID: a.project.ID, Tool: "echo", Disabled: true})
	waitFor(t, "B to hide the tool disabled on A", func() bool {
		return !slices.Contains(toolNames(t, cs), "echo")
	})

	// A goes away mid-call: B's caller hears it, not the whole wait.
	go func() {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{}})
		if err != nil {
			res <- err
			return
		}
		if want := "Agent disconnected before returning a result."; !r.IsError || text(r) != want {
			t.Errorf("hang through B when A stops = isError %v %q, want %q", r.IsError, text(r), want)
		}
		res <- nil
	}()
	receive(t, started, "the second hang call to start on the agent")
	begun := time.Now()
	go a.gw.Shutdown(context.Background())
	if err := receive(t, res, "the call through B to end"); err != nil {
		t.Errorf("hang through B when A stops: %v", err)
	}
	if d := time.Since(begun); d > 8*time.Second {
		t.Errorf("B's caller waited %v after A stopped", d)
	}
}

// A registration and its WebSocket may reach different gateways: the
// ticket A issued opens the connection at B.
func TestClusterTicketRedeemedElsewhere(t *testing.T) {
	t.Parallel()
	a := newEnv(t, onBus(startNATS(t)))
	b := a.sibling()
	status, body := a.register(a.agentKey, regJSON(t, regWith("far_tool")))
	if status != http.StatusOK {
		t.Fatalf("register at A: %d %s", status, body)
	}
	var tk agentproto.Ticket
	must(t, json.Unmarshal([]byte(body), &tk))
	ws, resp, err := websocket.Dial(context.Background(), b.url+agentproto.ConnectPath+"?ticket="+tk.Ticket,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + b.agentKey}}})
	if err != nil {
		t.Fatalf("connect at B with A's ticket: %v %v", err, resp)
	}
	t.Cleanup(func() { ws.CloseNow() })
	cs := a.connect("2025-11-25", a.clientKey, nil)
	waitFor(t, "A to list the tool of the agent connected to B", func() bool {
		return slices.Contains(toolNames(t, cs), "far_tool")
	})
	// A ticket is used once, wherever.
	_, resp, err = websocket.Dial(context.Background(), a.url+agentproto.ConnectPath+"?ticket="+tk.Ticket,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + a.agentKey}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("second use of the ticket: %v %v, want 401", err, resp)
	}
}

// A gateway without a bus is refused beside one with a bus, saying what to
// do.
func TestClusterRefusesGatewayWithoutBus(t *testing.T) {
	t.Parallel()
	a := newEnv(t, onBus(startNATS(t)))
	cfg := a.cfg
	cfg.Bus = ""
	g, err := gateway.New(cfg, a.openStore())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	err = g.Start()
	if want := "another gateway is using this store with a bus: "; err == nil || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "Start this one with --bus too") {
		t.Errorf("start without a bus beside one with: %v", err)
	}
}

// Two gateways behind a round-robin load balancer: an agent registers
// through it (its registration and WebSocket may reach different
// gateways), and clients of every protocol era call its tools through
// it, each request landing on either gateway. A 2025 session lives on the
// gateway that made it; the other forwards its requests there.
func TestClusterBehindRoundRobin(t *testing.T) {
	t.Parallel()
	a := newEnv(t, onBus(startNATS(t)))
	b := a.sibling()
	lb := *a
	lb.url = failoverLB(t, a.url, b.url)
	started, cancelled := make(chan string, 4), make(chan string, 4)
	lb.startAgent(core.Options{}, func(a *core.Agent) {
		clusterAgent(t, started, cancelled)(a)
		must(t, core.AddTool(a, "delete_order", "Deletes an order after asking the user.", func(ctx context.Context, in GetOrderInput) (string, error) {
			ok, err := core.Confirm(ctx, "Delete order "+in.ID+"?")
			if err != nil || !ok {
				return "kept order " + in.ID, err
			}
			return "deleted order " + in.ID, nil
		}, core.Destructive()))
		askAgent(t)(a)
	})
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			cs := lb.connect(v, lb.clientKey, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					if strings.HasPrefix(r.Params.Message, "Book a table") {
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Bo", "seats": 3}}, nil
					}
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
				},
			})
			waitFor(t, "the agent's tools through the load balancer", func() bool {
				return slices.Contains(toolNames(t, cs), "echo")
			})
			for i := range 6 {
				want := fmt.Sprint("call ", i)
				if got := text(call(t, cs, "echo", map[string]any{"text": want})); got != want {
					t.Errorf("echo %d = %q", i, got)
				}
			}
			// The user's answer comes back through the load balancer to
			// either gateway: in 2026-07-28 a retry carrying requestState,
			// in 2025 a response on the session.
			for i := range 2 {
				id := fmt.Sprint(1042 + i)
				if got := text(call(t, cs, "delete_order", map[string]any{"id": id})); got != "deleted order "+id {
					t.Errorf("confirmed delete %d = %q", i, got)
				}
				// core.Elicit: the form and its answer cross the bus too.
				if got := text(call(t, cs, "book_table", map[string]any{"restaurant": "Luigi's"})); got != "booked 3 seats for Bo on <nil>, <nil>" {
					t.Errorf("book_table %d = %q", i, got)
				}
			}
		})
	}
}

// A 2025 session whose gateway went away is gone: the other gateway
// answers its next request with the spec's 404, and the client starts a
// new session.
func TestClusterSessionOwnerGone(t *testing.T) {
	t.Parallel()
	a := newEnv(t, onBus(startNATS(t)))
	b := a.sibling()
	s := a.newRawSession(a.clientKey)
	if !strings.HasPrefix(s.id, "gw-") {
		t.Fatalf("session id %q does not name its gateway", s.id)
	}
	// Through B, the session's requests reach A, once B has heard A.
	waitForPeer(t, b, s.id)
	sb := *s
	sb.url = b.url
	if code, body := sb.call(2, "nothing_here", `{}`); code != http.StatusOK {
		t.Fatalf("a request of A's session sent to B: %d %s", code, body)
	}
	a.gw.Close()
	waitFor(t, "B to see A gone", func() bool {
		code, _ := sb.call(3, "nothing_here", `{}`)
		return code == http.StatusNotFound
	})
}

// A gateway process killed with SIGKILL says nothing on the bus: the other
// gateway drops its agents once three of its heartbeats are missed, and a
// call in flight to one of them ends with the disconnect message, in
// seconds rather than the call's whole wait.
func TestClusterGatewayKilled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the gateway binary; skipped under -short")
	}
	nats := startNATS(t)
	p := startServeProcess(t, "--bus", nats)

	// The survivor: a gateway in this process on the same store and bus.
	cfg := gateway.DefaultConfig()
	cfg.Addr, cfg.Bus, cfg.Logger = "127.0.0.1:0", nats, testLogger(t)
	st, err := sqlite.Open(context.Background(), p.dataPath)
	if err != nil {
		t.Fatal(err)
	}
	b, err := gateway.New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })

	started, cancelled := make(chan string, 4), make(chan string, 4)
	agent, err := core.New(core.Options{APIKey: p.agentKey, URL: p.url, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	clusterAgent(t, started, cancelled)(agent)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go agent.Run(ctx)

	survivor := &env{t: t, gw: b, url: b.URL()}
	cs := survivor.connect("2025-11-25", p.clientKey, nil)
	waitFor(t, "the survivor to list the tools of the agent on the other process", func() bool {
		return slices.Contains(toolNames(t, cs), "hang")
	})
	res := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{}})
		if err != nil {
			t.Errorf("hang: %v", err)
		}
		res <- r
	}()
	receive(t, started, "the call to reach the agent through the other process")
	killed := time.Now()
	p.cmd.Process.Kill()
	r := receive(t, res, "the call to end after the kill")
	if want := "Agent disconnected before returning a result."; r == nil || !r.IsError || text(r) != want {
		t.Errorf("hang after the holder was killed = %+v, want %q", r, want)
	}
	if d := time.Since(killed); d > 10*time.Second {
		t.Errorf("the caller waited %v after the kill; the call's wait is 30 s, the bus drops a silent gateway after 3 s", d)
	}
	// A call made now waits within its tool's wait (the tool stays listed
	// for the grace period) and is served once the agent is back, here
	// through the surviving gateway.
	echoed := make(chan string, 1)
	go func() {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "back"}})
		if err != nil || r.IsError {
			t.Errorf("echo while the agent reconnects: %v %+v", err, r)
			echoed <- ""
			return
		}
		echoed <- text(r)
	}()
	stop()
	again, err := core.New(core.Options{APIKey: p.agentKey, URL: b.URL(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	clusterAgent(t, started, cancelled)(again)
	ctx2, stop2 := context.WithCancel(context.Background())
	defer stop2()
	go again.Run(ctx2)
	if got := receive(t, echoed, "the waiting call to be served by the reconnected agent"); got != "back" {
		t.Errorf("echo after the reconnect = %q", got)
	}
}

// A key's rate limit holds across gateways: the calls one gateway allowed
// count on the other once they are exchanged (every cluster.RateEvery).
func TestClusterRateLimitShared(t *testing.T) {
	t.Parallel()
	a := newEnv(t, onBus(startNATS(t)), func(o *envOptions) { o.settings = &store.ProjectSettings{RateLimitPerMinute: 4} })
	b := a.sibling()
	a.startAgent(core.Options{}, clusterAgent(t, make(chan string, 4), make(chan string, 4)))
	ca, cb := a.connect("2025-11-25", a.clientKey, nil), b.connect("2025-11-25", b.clientKey, nil)
	waitFor(t, "B to list the agent's tools", func() bool { return slices.Contains(toolNames(t, cb), "echo") })
	for i := range 4 {
		if r := call(t, ca, "echo", map[string]any{"text": "a"}); r.IsError {
			t.Fatalf("call %d of 4 on A: %q", i, text(r))
		}
	}
	waitFor(t, "B to count the 4 calls A allowed", func() bool { return b.gw.Cluster().RatesMerged() == 4 })
	r := call(t, cb, "echo", map[string]any{"text": "b"})
	if want := "Rate limit exceeded: this key may make 4 calls per minute. Try again in "; !r.IsError || !strings.HasPrefix(text(r), want) {
		t.Errorf("fifth call, on B = isError %v %q, want %q…", r.IsError, text(r), want)
	}
}

// The dashboard works on either gateway for a person signed in on the
// other (sign-ins live in the store) and shows the agents of both; a key
// revoked through one gateway ends its sessions on the other at once.
func TestClusterDashboardAndRevoke(t *testing.T) {
	t.Parallel()
	a := newEnv(t, onBus(startNATS(t)))
	b := a.sibling()
	a.startAgent(core.Options{}, clusterAgent(t, make(chan string, 4), make(chan string, 4)))
	// A session made on A, under the cookie name B answers to: behind one
	// public URL both gateways name it alike; here each has a port.
	cookie := a.dashboardSession()
	cookie.Name = dashboard.SessionCookieName(b.gw.URL())
	waitFor(t, "B's dashboard to show the tools of the agent on A", func() bool {
		code, html := getWithCookie(t, b.url+"/p/"+b.project.Name+"/tools", cookie)
		return code == http.StatusOK && strings.Contains(html, "echo")
	})
	if code, html := getWithCookie(t, b.url+"/p/"+b.project.Name+"/agents", cookie); code != http.StatusOK || !strings.Contains(html, `on gateway <code>gw-`) {
		t.Errorf("B's Agents page does not say which gateway holds A's replica: %d", code)
	}

	k, secret := a.newKey(store.Key{Kind: store.KindClient, Name: "soon revoked"})
	cs := a.connect("2025-11-25", secret, nil)
	call(t, cs, "echo", map[string]any{"text": "before"})
	if n := a.gw.Sessions(k.ID); n != 1 {
		t.Fatalf("sessions of the key on A = %d, want 1", n)
	}
	if code := b.adminPost("/api/projects/" + b.project.Name + "/keys/" + k.ID + "/revoke"); code != http.StatusOK {
		t.Fatalf("revoke through B: %d", code)
	}
	waitFor(t, "A to close the revoked key's session", func() bool { return a.gw.Sessions(k.ID) == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "after"}}); err == nil {
		t.Error("the key revoked through B still calls tools on A")
	}
}

// NATS stops for a few seconds and comes back, with a client calling
// through each of two gateways: neither leaves the load balancer's
// rotation (/readyz stays 200 and says the bus is unreachable, and what
// that means), each keeps serving the calls of the agent connected to it,
// /metrics shows spacefix_bus_connected 0 and then 1, and once the bus is
// back each gateway reaches the other's agent again.
func TestClusterBusOutageKeepsServing(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t, 0)
	url, port := ns.ClientURL(), ns.Addr().(*net.TCPAddr).Port
	a := newEnv(t, onBus(url))
	b := a.sibling()
	// One agent on each gateway, with one tool that says where it runs.
	where := func(gw string) func(*core.Agent) {
		return func(ag *core.Agent) {
			must(t, core.AddTool(ag, "where", "Says which gateway it is connected to.", func(context.Context, struct{}) (string, error) { return gw, nil }))
		}
	}
	a.startAgent(core.Options{}, where("A"))
	b.startAgent(core.Options{}, where("B"))
	both := func(e *env) func() bool { return func() bool { return len(e.gw.Registry().All()) == 2 } }
	waitFor(t, "A to mirror B's agent", both(a))
	waitFor(t, "B to mirror A's agent", both(b))
	token := a.adminToken()
	ca, cb := a.connect("2025-11-25", a.clientKey, nil), b.connect("2025-11-25", b.clientKey, nil)
	for _, e := range []*env{a, b} {
		if status, body := get(t, e.url+"/readyz", ""); status != http.StatusOK || body != "ready\n" {
			t.Fatalf("GET /readyz with the bus up: %d %q, want 200 \"ready\\n\"", status, body)
		}
		wantMetric(t, e.scrape(token), 1, "spacefix_bus_connected")
	}

	ns.Shutdown()
	degraded := regexp.MustCompile(`^ready \(degraded: bus unreachable since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ; calls reach only agents connected to this gateway\)\n$`)
	for _, e := range []*env{a, b} {
		waitFor(t, "/readyz to say the bus is unreachable", func() bool {
			status, body := get(t, e.url+"/readyz", "")
			if status != http.StatusOK {
				t.Fatalf("GET /readyz with the bus away: %d %q, want 200", status, body)
			}
			return body != "ready\n"
		})
		if status, body := get(t, e.url+"/readyz", ""); status != http.StatusOK || !degraded.MatchString(body) {
			t.Errorf("GET /readyz with the bus away: %d %q, want 200 matching %s", status, body, degraded)
		}
		wantMetric(t, e.scrape(token), 0, "spacefix_bus_connected")
		waitFor(t, "the other gateway's agent to be dropped", func() bool { return len(e.gw.Registry().All()) == 1 })
	}
	for i := range 5 {
		if got := text(call(t, ca, "where", map[string]any{})); got != "A" {
			t.Errorf("call %d through A with the bus away = %q, want A's agent", i, got)
		}
		if got := text(call(t, cb, "where", map[string]any{})); got != "B" {
			t.Errorf("call %d through B with the bus away = %q, want B's agent", i, got)
		}
	}
	if status, body := get(t, a.url+"/readyz", ""); status != http.StatusOK || !degraded.MatchString(body) {
		t.Errorf("GET /readyz after calls with the bus away: %d %q", status, body)
	}

	testenv.NATS(t, port)
	for _, e := range []*env{a, b} {
		waitFor(t, "/readyz to see the bus back", func() bool {
			status, body := get(t, e.url+"/readyz", "")
			return status == http.StatusOK && body == "ready\n"
		})
		wantMetric(t, e.scrape(token), 1, "spacefix_bus_connected")
		waitFor(t, "the other gateway's agent to be mirrored again", both(e))
	}
}

// Garbage on every subject of the bus (a misbehaving client of the same
// NATS) changes nothing: the gateways log it, stay up and keep serving.
func TestClusterBusGarbage(t *testing.T) {
	t.Parallel()
	url := startNATS(t)
	a := newEnv(t, onBus(url))
	b := a.sibling()
	a.startAgent(core.Options{}, clusterAgent(t, make(chan string, 4), make(chan string, 4)))
	cs := b.connect("2025-11-25", b.clientKey, nil)
	waitFor(t, "B to list the agent's tools", func() bool { return slices.Contains(toolNames(t, cs), "echo") })

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var rep string
	for _, r := range b.gw.Registry().All() {
		rep = r.ID
	}
	for _, subj := range []string{"spacefix.rep", "spacefix.hb", "spacefix.changes", "spacefix.rate", "spacefix.ticket",
		"spacefix.gw.x.call", "spacefix.reply.x.1"} {
		for _, body := range []string{``, `{`, `null`, `[]`, `{"op":"up","gw":"gw-evil","rep":{"id":"r1"}}`,
			`{"op":"down","gw":"gw-evil","rep":{"id":"` + rep + `"}}`, `{"op":"list","gw":"gw-evil"}`,
			`{"op":"disable","rep":{"id":"nope"}}`, `{"gw":"gw-evil","calls":{"k":[1,2,3]}}`,
			`{"gw":"gw-evil","replicas":-1,"everyMs":-5}`, `{"rep":"` + rep + `","msg":null}`, `{"kind":"result"}`} {
			must(t, nc.Publish(subj, []byte(body)))
		}
	}
	must(t, nc.Flush())
	if got := text(call(t, cs, "echo", map[string]any{"text": "still"})); got != "still" {
		t.Errorf("echo through B after garbage on the bus = %q", got)
	}
	if !slices.Contains(toolNames(t, cs), "echo") {
		t.Error("a forged announcement took the agent's tools away")
	}
}

// Two agent keys offer the same tool name, one connected to A, the later
// one to B; a third gateway started afterwards hears of both at once, in
// no particular order. Every gateway gives the name to the agent that
// registered first and _2 to the other: the names are the same wherever a
// client lands.
func TestClusterContestedNames(t *testing.T) {
	t.Parallel()
	a := newEnv(t, onBus(startNATS(t)))
	b := a.sibling()
	who := func(name string) func(*core.Agent) {
		return func(ag *core.Agent) {
			must(t, core.AddTool(ag, "who", "Says who.", func(context.Context, struct{}) (string, error) { return name, nil }))
		}
	}
	a.startAgent(core.Options{}, who("first"))
	_, second := a.newKey(store.Key{Kind: store.KindAgent, Name: "second"})
	b.startAgent(core.Options{APIKey: second}, who("second"))
	c := a.sibling()
	for name, e := range map[string]*env{"A": a, "B": b, "C": c} {
		cs := e.connect("2026-07-28", e.clientKey, nil)
		waitFor(t, name+" to list both agents' tools", func() bool {
			names := toolNames(t, cs)
			return slices.Contains(names, "who") && slices.Contains(names, "who_2")
		})
		if got := text(call(t, cs, "who", nil)); got != "first" {
			t.Errorf("who on %s = %q, want first (registered first)", name, got)
		}
		if got := text(call(t, cs, "who_2", nil)); got != "second" {
			t.Errorf("who_2 on %s = %q, want second", name, got)
		}
	}
}

// The calls in flight on a replica count on every gateway, not only on the
// one that sent them: least-in-flight on B sees the calls A's clients
// keep busy on A's replica (and so does B's dashboard), and sees them end.
func TestClusterInflightSeenEverywhere(t *testing.T) {
	t.Parallel()
	a := newEnv(t, onBus(startNATS(t)))
	b := a.sibling()
	started, cancelled := make(chan string, 4), make(chan string, 4)
	a.startAgent(core.Options{}, clusterAgent(t, started, cancelled))
	cs := a.connect("2026-07-28", a.clientKey, nil)
	remote := func() int64 {
		for _, r := range b.gw.Registry().All() {
			return r.Inflight()
		}
		return -1
	}
	waitFor(t, "B to mirror A's replica", func() bool { return remote() == 0 })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	for range 2 {
		go func() {
			cs.CallTool(ctx, &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{}})
			done <- struct{}{}
		}()
	}
	receive(t, started, "the first call to start")
	receive(t, started, "the second call to start")
	waitFor(t, "B to count the two calls A's clients keep on the replica", func() bool { return remote() == 2 })
	cancel()
	receive(t, done, "the first call to end")
	receive(t, done, "the second call to end")
	waitFor(t, "B to see them end", func() bool { return remote() == 0 })
}

// A replica disabled from the dashboard of the gateway that does not hold
// it is disabled everywhere: the holder sends it no more calls either.
func TestClusterReplicaDisabledElsewhere(t *testing.T) {
	t.Parallel()
	a := newEnv(t, onBus(startNATS(t)))
	b := a.sibling()
	a.startAgent(core.Options{}, clusterAgent(t, make(chan string, 4), make(chan string, 4)))
	var id string
	waitFor(t, "B to mirror A's replica", func() bool {
		for _, r := range b.gw.Registry().All() {
			id = r.ID
		}
		return id != ""
	})
	_, token, err := users.CreateAPIToken(context.Background(), b.store, "e2e", 0)
	must(t, err)
	req, _ := http.NewRequest(http.MethodPatch, b.url+"/api/projects/"+b.project.Name+"/replicas/"+id, strings.NewReader(`{"disabled":true}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("disable through B: %d", resp.StatusCode)
	}
	var listed struct {
		Replicas []struct {
			ID, Gateway string
			Disabled    bool
		}
	}
	req, _ = http.NewRequest(http.MethodGet, b.url+"/api/projects/"+b.project.Name+"/agents", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	must(t, err)
	must(t, json.NewDecoder(resp.Body).Decode(&listed))
	resp.Body.Close()
	if len(listed.Replicas) != 1 || listed.Replicas[0].ID != id || !strings.HasPrefix(listed.Replicas[0].Gateway, "gw-") || !listed.Replicas[0].Disabled {
		t.Errorf("B's agents API lists %+v; want the replica, disabled, with the id of the gateway that holds it", listed.Replicas)
	}
	waitFor(t, "A, the holder, to disable the replica too", func() bool {
		for _, r := range a.gw.Registry().All() {
			return r.ID == id && r.Disabled()
		}
		return false
	})
	cs := a.connect("2025-11-25", a.clientKey, nil)
	if r := call(t, cs, "echo", map[string]any{"text": "x"}); !r.IsError {
		t.Errorf("a call on A to the only replica, disabled through B, was served: %q", text(r))
	}
}

// A call through B to an agent on A that does not answer within the wait
// gets the timeout message of one gateway, and the agent's handler is
// cancelled.
func TestClusterTimeout(t *testing.T) {
	t.Parallel()
	a := newEnv(t, onBus(startNATS(t)), func(o *envOptions) { o.settings = &store.ProjectSettings{CallWaitMs: 1000} })
	b := a.sibling()
	started, cancelled := make(chan string, 4), make(chan string, 4)
	a.startAgent(core.Options{}, clusterAgent(t, started, cancelled))
	cs := b.connect("2025-11-25", b.clientKey, nil)
	waitFor(t, "B to list the agent's tools", func() bool { return slices.Contains(toolNames(t, cs), "hang") })
	r := call(t, cs, "hang", nil)
	if want := `Request for tool "hang" timed out after 1000ms`; !r.IsError || !strings.HasPrefix(text(r), want) {
		t.Errorf("hang through B = isError %v %q, want %q…", r.IsError, text(r), want)
	}
	receive(t, cancelled, "the agent's handler to be cancelled after the timeout")
}

// NATS goes away and comes back: each gateway drops the other's agents
// while the bus is gone, and gets them back by itself once it returns
// (the heartbeats' counts differ, so each asks the other to announce).
func TestClusterBusRestartHeals(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t, 0)
	url, port := ns.ClientURL(), ns.Addr().(*net.TCPAddr).Port
	a := newEnv(t, onBus(url))
	b := a.sibling()
	a.startAgent(core.Options{}, clusterAgent(t, make(chan string, 4), make(chan string, 4)))
	mirrored := func() bool { return len(b.gw.Registry().All()) == 1 }
	waitFor(t, "B to mirror A's replica", mirrored)
	ns.Shutdown()
	waitFor(t, "B to drop A's replica while the bus is away", func() bool { return len(b.gw.Registry().All()) == 0 })
	testenv.NATS(t, port)
	waitFor(t, "B to mirror A's replica again once the bus is back", mirrored)
	cs := b.connect("2025-11-25", b.clientKey, nil)
	if got := text(callEventuallyWith(t, cs, "echo", map[string]any{"text": "healed"})); got != "healed" {
		t.Errorf("echo through B after the bus came back = %q", got)
	}
}

// An agent on A that never reads its socket (its buffers fill with the
// calls B sends it) holds up its own calls only: a call from B to another
// agent on A is served at once, not after the stuck one is dropped.
func TestClusterStuckAgentHoldsUpOnlyItself(t *testing.T) {
	t.Parallel()
	// The default bus heartbeat, and a long one for agents: 14 MB of calls
	// keep the machine busy, and this test is not about a gateway or an
	// agent going silent (the stuck one sends no pings).
	a := newEnv(t, withConfig(func(c *gateway.Config) { c.Bus, c.Heartbeat = startNATS(t), 30*time.Second }),
		func(o *envOptions) { o.settings = &store.ProjectSettings{CallWaitMs: 30_000} })
	b := a.sibling()
	a.startAgent(core.Options{}, clusterAgent(t, make(chan string, 4), make(chan string, 4)))
	_, stuckKey := a.newKey(store.Key{Kind: store.KindAgent, Name: "stuck"})
	status, body := a.register(stuckKey, regJSON(t, agentproto.Registration{Tools: []agentproto.Tool{{
		Name: "sink", Description: "Never reads.", InputSchema: json.RawMessage(`{"type":"object","properties":{"blob":{"type":"string"}}}`),
	}}}))
	if status != http.StatusOK {
		t.Fatalf("register the stuck agent: %d %s", status, body)
	}
	var tk agentproto.Ticket
	must(t, json.Unmarshal([]byte(body), &tk))
	ws, _, err := websocket.Dial(context.Background(), a.url+agentproto.ConnectPath+"?ticket="+tk.Ticket,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + stuckKey}}})
	must(t, err)
	t.Cleanup(func() { ws.CloseNow() }) // and never read from it

	cs := b.connect("2026-07-28", b.clientKey, nil)
	waitFor(t, "B to list both agents' tools", func() bool {
		names := toolNames(t, cs)
		return slices.Contains(names, "sink") && slices.Contains(names, "echo")
	})
	blob := strings.Repeat("x", 600_000)
	var sent sync.WaitGroup
	for range 24 { // about 14 MB for a socket nobody reads
		sent.Go(func() {
			cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sink", Arguments: map[string]any{"blob": blob}})
		})
	}
	// All of them, however long the machine takes to move 14 MB (within
	// their wait): an echo that went first would prove nothing.
	relayed := func() int64 {
		for _, rep := range a.gw.Registry().All() {
			if rep.Gateway == "" && rep.Reg.Tools[0].Name == "sink" {
				return rep.Inflight()
			}
		}
		return 0
	}
	poll(t, "the 24 sink calls to reach A (calls in flight there)", 25*time.Second, func() (int64, bool) {
		n := relayed()
		return n, n >= 24
	})
	r := call(t, cs, "echo", map[string]any{"text": "through"})
	if r.IsError || text(r) != "through" {
		t.Errorf("echo through B while another agent on A is stuck = isError %v %q, want it served", r.IsError, text(r))
	}
	ws.CloseNow() // the sink calls end as disconnected, not at their wait
	sent.Wait()
}

// NATS carries 1 MB in one message by default; arguments (here 2 MB) and
// results (here 3 MB) larger than that cross the bus in parts, whole.
func TestClusterLargeMessages(t *testing.T) {
	t.Parallel()
	// The default heartbeat: moving 5 MB keeps the machine busy.
	a := newEnv(t, withConfig(func(c *gateway.Config) { c.Bus = startNATS(t) }), func(o *envOptions) {
		o.settings = &store.ProjectSettings{MaxArgumentBytes: 4 << 20}
	})
	b := a.sibling()
	a.startAgent(core.Options{}, func(ag *core.Agent) {
		type in struct {
			Blob string `json:"blob"`
			N    int    `json:"n"`
		}
		must(t, core.AddTool(ag, "big", "Returns n bytes, and the length of blob.", func(_ context.Context, x in) (string, error) {
			return fmt.Sprintf("%d:", len(x.Blob)) + strings.Repeat("y", x.N), nil
		}))
	})
	cs := b.connect("2025-11-25", b.clientKey, nil)
	waitFor(t, "B to list the agent's tool", func() bool { return slices.Contains(toolNames(t, cs), "big") })
	r := call(t, cs, "big", map[string]any{"blob": strings.Repeat("x", 2_000_000), "n": 3_000_000})
	if want := "2000000:" + strings.Repeat("y", 3_000_000); r.IsError || text(r) != want {
		t.Errorf("big through B: isError %v, %d characters, want %d", r.IsError, len(text(r)), len(want))
	}
}
