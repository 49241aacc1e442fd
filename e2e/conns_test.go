package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/gateway"
)

// fromAddr returns an HTTP client whose connections come from the local
// address ip (another loopback address is another client).
func fromAddr(t *testing.T, ip string) *http.Client {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("needs 127.0.0.2, which only Linux routes to the loopback interface by default")
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// idleConn opens a connection, has one request answered on it and leaves
// it open and idle, as the attack that exhausted file descriptors did.
func idleConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("healthz on a new connection: %v", err)
	}
	resp.Body.Close()
	return c
}

// getStatus GETs url with client and returns the status and body.
func getStatus(client *http.Client, url, authz string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

const refusedText = "Too many open connections from your address: close some and try again later."

// One address holding its cap of idle connections gets the next one
// refused at once, with a 429 that says why; other addresses are served
// (/healthz answers), the refusal is counted in /metrics, and a closed
// connection makes room again.
func TestConnsPerAddressCap(t *testing.T) {
	t.Parallel()
	const perAddr = 4
	e := newEnv(t, withConfig(func(c *gateway.Config) { c.MaxConnsPerAddr = perAddr }))
	other := fromAddr(t, "127.0.0.2")
	addr := e.gw.Addr()
	var held []net.Conn
	for range perAddr {
		held = append(held, idleConn(t, addr))
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	got := readUntilClosed(t, extra)
	if !strings.HasPrefix(got, "HTTP/1.1 429 Too Many Requests") || !strings.Contains(got, refusedText) {
		t.Errorf("connection %d from one address read %q, want a 429 with %q and a close", perAddr+1, got, refusedText)
	}
	if status, body, err := getStatus(other, "http://"+addr+"/healthz", ""); err != nil || status != http.StatusOK {
		t.Fatalf("/healthz from another address: %d %q %v, want 200", status, body, err)
	}
	_, metrics, err := getStatus(other, "http://"+addr+"/metrics", "Bearer "+e.adminToken())
	if err != nil {
		t.Fatal(err)
	}
	wantMetric(t, metrics, 1, "spacefix_connections_refused_total")
	held[0].Close()
	waitFor(t, "a closed connection to make room for its address", func() bool {
		c := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
		defer c.CloseIdleConnections()
		status, _, err := getStatus(c, "http://"+addr+"/healthz", "")
		return err == nil && status == http.StatusOK
	})
}

// A connection that sends nothing, or only part of its headers, is closed
// after the header timeout; an agent's WebSocket and an MCP session's SSE
// stream outlive it, and the idle timeout, untouched.
func TestConnsSilentConnectionClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withConfig(func(c *gateway.Config) {
		c.HeaderTimeout = 300 * time.Millisecond
		c.IdleTimeout = 300 * time.Millisecond
	}))
	e.sessionAgent(nil, nil)
	replica := e.gw.Registry().All()[0].ID

	// An MCP session with its GET stream open, at a protocol version that
	// has one. The client is told when the tool list changes, over that
	// stream.
	changed := make(chan struct{}, 10)
	cs := e.connect("2025-06-18", e.clientKey, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	stream := openEventStream(t, e)

	for _, send := range []string{"", "GET /healthz HTTP/1.1\r\nHost: "} {
		c, err := net.Dial("tcp", e.gw.Addr())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, send)
		start := time.Now()
		if got := readUntilClosed(t, c); got != "" {
			t.Errorf("silent connection (sent %q) read %q, want a close and nothing else", send, got)
		}
		if d := time.Since(start); d < 250*time.Millisecond {
			t.Errorf("silent connection closed after %v, before the 300ms header timeout", d)
		}
		c.Close()
	}

	// Both timeouts have passed several times over. The agent is still on
	// its first connection and the streams still carry news.
	if reps := e.gw.Registry().All(); len(reps) != 1 || reps[0].ID != replica {
		t.Fatalf("replicas after the timeouts: %d, want the first one (%s) still connected", len(reps), replica)
	}
	e.startAgent(core.Options{}, func(a *core.Agent) {
		must(t, core.AddTool(a, "later", "Comes later.", func(ctx context.Context, in Empty) (string, error) { return "", nil }))
	})
	receive(t, changed, "tools/list_changed over the go-sdk session's stream")
	if !stream.sawListChanged() {
		t.Error("the raw SSE stream opened before the timeouts did not carry tools/list_changed")
	}
	if r := call(t, cs, "echo", map[string]any{"text": "still here"}); text(r) != "still here" {
		t.Errorf("echo after the timeouts: %q", text(r))
	}
}

// eventStream is a raw GET stream of an MCP session, read on a goroutine.
type eventStream struct {
	lines chan string
}

// openEventStream initializes a raw 2025-06-18 session and opens its GET
// stream, read on a transport of its own: a stream the server cuts shows
// as an end here, where go-sdk's client would open it again.
func openEventStream(t *testing.T, e *env) *eventStream {
	t.Helper()
	s := e.newRawSessionWith(e.clientKey, strings.Replace(initializeBody, "2025-11-25", "2025-06-18", 1))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.clientKey)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.id)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET stream: %d", resp.StatusCode)
	}
	es := &eventStream{lines: make(chan string, 100)}
	go func() {
		defer resp.Body.Close()
		defer close(es.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			es.lines <- sc.Text()
		}
	}()
	return es
}

// sawListChanged waits (10 s at most) for notifications/tools/list_changed.
func (es *eventStream) sawListChanged() bool {
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-es.lines:
			if !ok {
				return false
			}
			if strings.Contains(l, "notifications/tools/list_changed") {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// Reaching --max-conns is said once at WARN, naming the flag; the open
// connections and the cap are in /metrics, and so is every wait.
func TestConnsMaxConnsReachedWarnsOnce(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	e := newEnv(t, withConfig(func(c *gateway.Config) {
		c.MaxConns = 2
		c.MetricsAddr = "127.0.0.1:0" // a listener of its own: the main one is full
	}), func(o *envOptions) { o.logs = &logs })
	metricsURL := "http://" + e.gw.MetricsAddr() + "/metrics"
	addr := e.gw.Addr()
	held := []net.Conn{idleConn(t, addr), idleConn(t, addr)}
	scrape := func() string {
		status, body, err := getStatus(http.DefaultClient, metricsURL, "")
		if err != nil || status != http.StatusOK {
			t.Fatalf("scrape: %d %v", status, err)
		}
		return body
	}
	waiting := func(n float64) func() bool {
		return func() bool { v, _ := metric(scrape(), "spacefix_connections_waited_total"); return v == n }
	}
	// Two more connections wait in the backlog; the listener waits for a
	// slot once.
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	waitFor(t, "the listener to wait for a slot", waiting(1))
	body := scrape()
	wantMetric(t, body, 2, "spacefix_connections_open")
	wantMetric(t, body, 2, "spacefix_connections_max")
	// One closes: a waiting one is accepted, and the listener waits again.
	held[0].Close()
	waitFor(t, "the listener to wait a second time", waiting(2))
	warn := "level=WARN msg=\"open connections reached the cap; new ones wait until one closes. Raise --max-conns (env SPACEFIX_MAX_CONNS) if the file limit allows; this is said once\" maxConns=2"
	if n := strings.Count(logs.String(), warn); n != 1 {
		t.Errorf("the cap's WARN was logged %d times, want once: %q\nlog:\n%s", n, warn, logs.String())
	}
}

// With no flag, the cap comes from the file limit, and /metrics says what
// it is.
func TestConnsMaxConnsDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := e.scrape(e.adminToken())
	want := gateway.DefaultMaxConns()
	wantMetric(t, body, float64(want), "spacefix_connections_max")
	if v, _ := metric(body, "spacefix_connections_open"); v < 1 {
		t.Errorf("spacefix_connections_open = %v with the scrape's own connection open", v)
	}
	var limit uint64
	if out, err := readProcLimit(); err == nil {
		limit = out
	}
	if limit >= 11_264 && want < 10_240 {
		t.Errorf("default cap %d at a file limit of %d: 10,000 agents and their clients would not fit", want, limit)
	}
}

// readProcLimit reads this process's open-file limit from /proc (Linux),
// as the gateway in it sees it.
func readProcLimit() (uint64, error) {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return 0, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if f := strings.Fields(string(line)); len(f) >= 5 && f[0] == "Max" && f[1] == "open" && f[2] == "files" {
			var n uint64
			_, err := fmt.Sscan(f[3], &n)
			return n, err
		}
	}
	return 0, io.EOF
}

// Agent WebSockets leave their address's count once accepted: more agents
// than the per-address cap connect from one address (one host, or one NAT)
// and nothing is refused.
func TestConnsAgentsBeyondPerAddressCap(t *testing.T) {
	t.Parallel()
	const perAddr = 4
	e := newEnv(t, withConfig(func(c *gateway.Config) { c.MaxConnsPerAddr = perAddr }))
	for i := range perAddr + 2 {
		e.startAgent(core.Options{}, func(a *core.Agent) {
			must(t, core.AddTool(a, fmt.Sprintf("tool%d", i), "A tool.", func(ctx context.Context, in Empty) (string, error) { return "", nil }))
		})
	}
	if n := len(e.gw.Registry().All()); n != perAddr+2 {
		t.Errorf("%d agents connected, want %d", n, perAddr+2)
	}
	other := fromAddr(t, "127.0.0.2")
	_, metrics, err := getStatus(other, e.url+"/metrics", "Bearer "+e.adminToken())
	if err != nil {
		t.Fatal(err)
	}
	wantMetric(t, metrics, 0, "spacefix_connections_refused_total")
}
