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
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// soakDuration is how long TestSoak keeps its callers busy: 60 s by default,
// SPACEFIX_SOAK (a Go duration) to change it; -short runs 5 s.
func soakDuration(t *testing.T) time.Duration {
	if s := os.Getenv("SPACEFIX_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("SPACEFIX_SOAK=%q: %v", s, err)
		}
		return d
	}
	if testing.Short() {
		return 5 * time.Second
	}
	return 60 * time.Second
}

// TestSoak runs the real gateway binary under a bounded load — 16 callers
// on sessions with and without a GET stream and on the stateless protocol,
// for a minute — and checks that no call is lost and that the gateway's
// goroutines, open files and heap return to their baseline once the
// clients have gone. It reads those figures from the gateway's own
// /metrics and a GC-forcing heap profile, so it sees the gateway process
// alone, not the test's.
func TestSoak(t *testing.T) {
	t.Parallel()
	gw := startServeProcess(t)
	agent := gw.runAgent(t)
	defer agent.kill()

	// A short burst first, so the pools that grow to a bounded size under
	// load (the store's readers, the runtime's) are at that size in the
	// baseline: the soak looks for growth without bound.
	runLoad(t, gw, time.Now().Add(2*time.Second))
	gw.transport.CloseIdleConnections() // the clients are gone
	base := gw.settledStats(t, nil)
	t.Logf("baseline: %s", base)

	ok, failed, firstErr := runLoad(t, gw, time.Now().Add(soakDuration(t)))
	t.Logf("%d calls served, %d failed", ok, failed)
	if failed > 0 {
		t.Errorf("%d of %d calls failed; first: %v", failed, failed+ok, firstErr)
	}
	if ok == 0 {
		t.Fatal("no call succeeded")
	}
	gw.transport.CloseIdleConnections()
	gw.settledStats(t, &base)
}

// runLoad keeps 16 callers busy until the given time, on sessions with and
// without a GET stream and on the stateless protocol, and counts the calls
// that came back as expected and the ones that did not.
func runLoad(t *testing.T, gw *serveProcess, until time.Time) (ok, failed int64, firstErr any) {
	const callers = 16
	kinds := []struct {
		version  string
		noStream bool
	}{
		{"2025-11-25", false}, // a session with a GET stream
		{"2025-11-25", true},  // a session without one, as many clients run
		{"2025-06-18", true},
		{"2026-07-28", false}, // stateless
	}
	var okN, failedN atomic.Int64
	var firstE atomic.Value
	var wg sync.WaitGroup
	for c := range callers {
		k := kinds[c%len(kinds)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs := gw.connect(t, k.version, k.noStream)
			defer cs.Close()
			for i := 0; time.Now().Before(until); i++ {
				tag := fmt.Sprintf("%d-%d", c, i)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "work", Arguments: map[string]any{"ms": 2, "tag": tag}})
				cancel()
				switch {
				case err != nil:
					failedN.Add(1)
					firstE.CompareAndSwap(nil, fmt.Sprintf("%s (no stream %v): %v", k.version, k.noStream, err))
				case res.IsError || !strings.HasPrefix(text(res), "done "+tag+" by "):
					failedN.Add(1)
					firstE.CompareAndSwap(nil, fmt.Sprintf("%s: %q", k.version, text(res)))
				default:
					okN.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return okN.Load(), failedN.Load(), firstE.Load()
}

// gatewayStats are the figures of the gateway process that must return to
// their baseline after a load.
type gatewayStats struct {
	goroutines int
	openFDs    int // open files other than the store's
	storeFDs   int // the store's file, WAL and shared memory, over its connection pool
	heapInuse  int64
}

func (s gatewayStats) String() string {
	return fmt.Sprintf("%d goroutines, %d open files and %d of the store, heap in use %.1f MiB", s.goroutines, s.openFDs, s.storeFDs, float64(s.heapInuse)/(1<<20))
}

// within reports whether s is back at base: a few goroutines and files of
// slack for the runtime's and the HTTP server's own housekeeping, the
// store's files within what its connection pool may hold (it grows to its
// bound under load and keeps idle connections), and the heap within 8 MiB
// or half again of the baseline.
func (s gatewayStats) within(base gatewayStats) bool {
	heapSlack := max(8<<20, base.heapInuse/2)
	return s.goroutines <= base.goroutines+5 && s.openFDs <= base.openFDs+3 &&
		s.storeFDs <= storePoolFiles && s.heapInuse <= base.heapInuse+heapSlack
}

// storePoolFiles is the most files the SQLite store holds open: the file
// and its WAL per connection (one writer, max(4, GOMAXPROCS) readers of
// the gateway process, which runs on this machine), and one shared memory.
var storePoolFiles = 2*(1+max(4, runtime.NumCPU())) + 1

// settledStats reads the gateway's figures once they stop changing (the
// server notices closed connections a moment after the clients close
// them). With base set, it waits (bounded) for them to come back within
// base and fails the test if they do not.
func (g *serveProcess) settledStats(t *testing.T, base *gatewayStats) gatewayStats {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var prev gatewayStats
	for {
		s := g.stats(t)
		steady := s.goroutines == prev.goroutines && s.openFDs == prev.openFDs
		switch {
		case base == nil && steady:
			if testing.Verbose() {
				t.Logf("open files: %s", g.openFiles())
			}
			return s
		case base != nil && s.within(*base):
			t.Logf("after the load: %s", s)
			return s
		case time.Now().After(deadline):
			if base == nil {
				t.Fatalf("the gateway's figures did not settle: %s, then %s", prev, s)
			}
			t.Errorf("the gateway did not return to its baseline after the load:\n  baseline %s\n  now      %s\n  open files: %s", *base, s, g.openFiles())
			return s
		}
		prev = s
		time.Sleep(500 * time.Millisecond) // poll interval while the figures settle; bounded above
	}
}

var metricLine = regexp.MustCompile(`(?m)^(go_goroutines|process_open_fds) ([0-9.e+]+)$`)

// stats reads goroutines and open files from /metrics and the heap in use
// from a heap profile taken after a forced collection.
func (g *serveProcess) stats(t *testing.T) gatewayStats {
	t.Helper()
	var s gatewayStats
	body := g.get(t, g.metricsURL+"/metrics", "")
	for _, m := range metricLine.FindAllStringSubmatch(body, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		switch m[1] {
		case "go_goroutines":
			s.goroutines = int(v)
		case "process_open_fds":
			s.openFDs = int(v)
			if n, ok := g.storeFiles(); ok {
				s.openFDs -= n
				s.storeFDs = n
			}
		}
	}
	heap := g.get(t, g.url+"/debug/pprof/heap?gc=1&debug=1", g.adminToken)
	m := regexp.MustCompile(`(?m)^# HeapInuse = (\d+)$`).FindStringSubmatch(heap)
	if m == nil || s.goroutines == 0 {
		t.Fatalf("could not read the gateway's figures from /metrics and the heap profile")
	}
	s.heapInuse, _ = strconv.ParseInt(m[1], 10, 64)
	return s
}

func (g *serveProcess) get(t *testing.T, url, token string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b)
}

// serveProcess is `spacefix serve` running as its own process on a fresh
// store, as a user runs it.
type serveProcess struct {
	url, metricsURL      string
	agentKey, clientKey  string
	adminToken, dataPath string
	cmd                  *exec.Cmd
	done                 chan struct{}
	transport            *http.Transport
}

// startServeProcess runs the gateway binary with pprof and a separate
// metrics listener and waits until it printed its first-start keys.
func startServeProcess(t *testing.T, extraArgs ...string) *serveProcess {
	t.Helper()
	bin := binary(t, "../cmd/spacefix")
	dir := t.TempDir()
	g := &serveProcess{dataPath: filepath.Join(dir, "spacefix.db"), done: make(chan struct{})}
	tok, err := exec.Command(bin, "tokens", "create", "--data", g.dataPath).CombinedOutput()
	if err != nil {
		t.Fatalf("spacefix tokens create: %v\n%s", err, tok)
	}
	m := regexp.MustCompile(`sfx_admin_\S+`).Find(tok)
	if m == nil {
		t.Fatalf("no admin token in %q", tok)
	}
	g.adminToken = string(m)

	free := freeAddrs(t, 2)
	addr, metricsAddr := free[0], free[1]
	args := append([]string{"serve", "--addr", addr, "--data", g.dataPath, "--metrics-addr", metricsAddr, "--pprof"}, extraArgs...)
	g.cmd = exec.Command(bin, args...)
	g.cmd.Env = append(os.Environ(), "GOGC=100")
	out, err := g.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	g.cmd.Stderr = &stderr
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		g.cmd.Process.Kill()
		<-g.done
		if t.Failed() {
			t.Logf("gateway stderr (last 4 KiB):\n%s", tail(stderr.Bytes(), 4096))
		}
	})
	keys := make(chan [2]string, 1)
	go func() {
		var agent, client string
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if f := strings.Fields(line); len(f) == 3 && f[1] == "key" {
				switch f[0] {
				case "Agent":
					agent = f[2]
				case "Client":
					client = f[2]
				}
			}
			if agent != "" && client != "" {
				keys <- [2]string{agent, client}
				agent = ""
			}
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case k := <-keys:
		g.agentKey, g.clientKey = k[0], k[1]
	case <-g.done:
		t.Fatalf("spacefix serve exited: %s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("spacefix serve printed no keys within 30 s")
	}
	g.url, g.metricsURL = "http://"+addr, "http://"+metricsAddr
	// As a Go client's: idle connections kept 90 s, under the gateway's
	// idle timeout, so the client closes them first.
	g.transport = http.DefaultTransport.(*http.Transport).Clone()
	g.transport.MaxIdleConnsPerHost = 64
	t.Cleanup(g.transport.CloseIdleConnections)
	return g
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	return freeAddrs(t, 1)[0]
}

// freeAddrs returns n loopback addresses with distinct ports free right
// now: all are held open until every one is chosen (two ports chosen one
// after the other may be the same one, freed in between).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		out = append(out, ln.Addr().String())
	}
	return out
}

// runAgent runs the test agent against the gateway process and waits until
// its tools are listed.
func (g *serveProcess) runAgent(t *testing.T) *proc {
	t.Helper()
	cmd := exec.Command(binary(t, "./testagent"))
	cmd.Env = append(os.Environ(), "SPACEFIX_API_KEY="+g.agentKey, "SPACEFIX_URL="+g.url)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	cs := g.connect(t, "2025-11-25", true)
	defer cs.Close()
	waitFor(t, "the agent's tools to be listed", func() bool { return len(toolNames(t, cs)) > 0 })
	return p
}

// connect opens a client session; noStream leaves out the optional GET
// stream, as many clients do.
func (g *serveProcess) connect(t *testing.T, v string, noStream bool) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "soak", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{
		Endpoint:             g.url + "/mcp",
		HTTPClient:           &http.Client{Transport: bearer{key: g.clientKey, base: g.transport}},
		DisableStandaloneSSE: noStream,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: v})
	if err != nil {
		t.Fatalf("connect at %s: %v", v, err)
	}
	return cs
}

// storeFiles counts the gateway process's open files of its store (Linux
// only: ok is false elsewhere).
func (g *serveProcess) storeFiles() (n int, ok bool) {
	dir := fmt.Sprintf("/proc/%d/fd", g.cmd.Process.Pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	for _, e := range ents {
		if target, _ := os.Readlink(filepath.Join(dir, e.Name())); strings.HasPrefix(target, g.dataPath) {
			n++
		}
	}
	return n, true
}

// openFiles lists what the gateway process holds open, for a failure
// message (Linux only).
func (g *serveProcess) openFiles() string {
	dir := fmt.Sprintf("/proc/%d/fd", g.cmd.Process.Pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	count := map[string]int{}
	for _, e := range ents {
		target, _ := os.Readlink(filepath.Join(dir, e.Name()))
		if strings.HasPrefix(target, "socket:") {
			target = "socket"
		}
		count[target]++
	}
	return fmt.Sprint(count)
}
