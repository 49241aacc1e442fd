// Command spacefix-fanin measures fan-in: how long N agent replicas take to
// connect to one gateway, whether any reconnects, the gateway's resident
// memory and live heap afterwards, and how fast tools/list answers then.
//
//	go run ./bench/cmd/spacefix-fanin -agents 10000 -shape keys
//	go run ./bench/cmd/spacefix-fanin -agents 10000 -shape replicas
//
// It builds ./cmd/spacefix, makes a SQLite store in a temporary directory
// (one agent key per agent for -shape keys, one key for all with -shape
// replicas), runs `spacefix serve` as its own process on 127.0.0.1, and
// connects the agents from this process with the Go SDK, -batch of them
// connecting at once, each offering one tool. The figures and how they were
// taken are in docs/benchmarks.md.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/users"
)

// gatewayEnv is what -gateway-env adds to the gateway's environment.
var gatewayEnv []string

// gatewayBin is -gateway-bin: a spacefix binary to run; "" builds one.
var gatewayBin string

func main() {
	n := flag.Int("agents", 1000, "how many agent replicas connect")
	shape := flag.String("shape", "keys", "keys: one agent key per agent (a project of N tools); replicas: N replicas of one key (one tool)")
	batch := flag.Int("batch", 500, "how many agents connect at once")
	lists := flag.Int("lists", 20, "how many tools/list calls to time once all are connected")
	keep := flag.Bool("keep", false, "keep the temporary directory (the store and the gateway's log) and print its path")
	flag.Func("gateway-env", "`NAME=value` set for the gateway only, e.g. GOMEMLIMIT=300MiB (repeatable)", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("want NAME=value, not %q", v)
		}
		gatewayEnv = append(gatewayEnv, v)
		return nil
	})
	early := flag.Bool("early-client", false, "connect the MCP client (and list tools once) before the agents connect, so every change re-syncs its view during the storm")
	flag.StringVar(&gatewayBin, "gateway-bin", "", "run this spacefix `binary` instead of building ./cmd/spacefix (to compare two builds)")
	profile := flag.Bool("profile", false, "write the gateway's heap profile (heap.pprof) and goroutines (goroutines.txt) to the temporary directory once all are connected; implies -keep")
	flag.Parse()
	if *shape != "keys" && *shape != "replicas" {
		log.Fatalf("-shape must be keys or replicas, not %q", *shape)
	}
	if err := run(*n, *shape == "keys", *batch, *lists, *keep || *profile, *profile, *early); err != nil {
		log.Fatal(err)
	}
}

func run(n int, perKey bool, batch, lists int, keep, profile, early bool) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "spacefix-fanin-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(os.Stderr, "keeping", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	bin := gatewayBin
	if bin == "" {
		bin = filepath.Join(dir, "spacefix")
		build := exec.Command("go", "build", "-o", bin, "./cmd/spacefix")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build ./cmd/spacefix (run from the repository root): %w", err)
		}
	}

	db := filepath.Join(dir, "spacefix.db")
	agentKeys, clientKey, adminToken, err := makeKeys(ctx, db, n, perKey)
	if err != nil {
		return err
	}
	addr, metrics := freeAddr(), freeAddr()
	logf, err := os.Create(filepath.Join(dir, "gateway.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	srv := exec.Command(bin, "serve", "--data", db, "--addr", addr, "--metrics-addr", metrics,
		"--max-conns", strconv.Itoa(n+1000), "--pprof")
	srv.Stdout, srv.Stderr = logf, logf
	srv.Env = append(os.Environ(), gatewayEnv...)
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	base := "http://" + addr
	if err := waitUp(base + "/healthz"); err != nil {
		return err
	}

	if early {
		if _, _, err := timeLists(ctx, base+"/mcp", clientKey, 1); err != nil {
			return err
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var connects atomic.Int64 // welcomes: more than n means reconnects
	actx, stop := context.WithCancel(ctx)
	defer stop()
	var running sync.WaitGroup
	fmt.Fprintf(os.Stderr, "gateway %s (pid %d); connecting %d agents, %d at once\n", base, srv.Process.Pid, n, batch)
	start := time.Now()
	for i := 0; i < n; i += batch {
		var ready sync.WaitGroup
		for j := i; j < min(i+batch, n); j++ {
			name := "fanin"
			if perKey {
				name = fmt.Sprintf("svc%d", j)
			}
			ready.Add(1)
			var once sync.Once
			a, err := core.New(core.Options{APIKey: agentKeys[j%len(agentKeys)], URL: base, Name: name, Logger: quiet,
				Instance: fmt.Sprintf("i%d", j), OnConnect: func() {
					connects.Add(1)
					once.Do(ready.Done)
				}})
			if err != nil {
				return err
			}
			if err := core.AddTool(a, "ping", "Answers pong.", func(context.Context, struct{}) (string, error) { return "pong", nil }); err != nil {
				return err
			}
			running.Go(func() { a.Run(actx) })
		}
		ready.Wait()
	}
	took := time.Since(start)
	time.Sleep(2 * time.Second) // let pings and late reconnects show
	// The heap profile's ?gc=1 collects first, so the metrics read right
	// after it show the live heap, not the garbage GOGC=400 lets pile up.
	heapFile := filepath.Join(dir, "heap.pprof")
	if err := download(base+"/debug/pprof/heap?gc=1", adminToken, heapFile); err != nil {
		return err
	}
	mem := memory(srv.Process.Pid, "http://"+metrics+"/metrics")
	if profile {
		if err := download(base+"/debug/pprof/goroutine?debug=1", adminToken, filepath.Join(dir, "goroutines.txt")); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "profiles in %s: go tool pprof -top -sample_index=inuse_space %s\n", dir, heapFile)
	}
	fmt.Fprintf(os.Stderr, "%s all connected; %d reconnects so far\n", time.Now().Format("15:04:05.000"), connects.Load()-int64(n))
	times, tools, err := timeLists(ctx, base+"/mcp", clientKey, lists)
	fmt.Fprintf(os.Stderr, "%s listed; %d reconnects so far\n", time.Now().Format("15:04:05.000"), connects.Load()-int64(n))
	if err != nil {
		return err
	}
	fmt.Printf("agents %d (%s), %d at once: connected in %.2f s, %d reconnects\n", n, shapeName(perKey), batch, took.Seconds(), connects.Load()-int64(n))
	fmt.Printf("gateway resident %.0f MiB (peak %.0f MiB), allocated %.0f KiB per agent since start; after a GC: live heap %.0f MiB (%.1f KiB per agent), goroutine stacks %.0f MiB (%.1f KiB per agent), %.0f goroutines\n",
		mib(mem.rss), mib(mem.peak), mem.allocated/1024/float64(n), mib(mem.heap), mem.heap/1024/float64(n), mib(mem.stacks), mem.stacks/1024/float64(n), mem.goroutines)
	fmt.Printf("tools/list of %d tools: p50 %.1f ms, max %.1f ms over %d calls\n", tools, ms(times[len(times)/2]), ms(times[len(times)-1]), len(times))
	fmt.Printf("(GOMAXPROCS %d; go %s; gateway environment %q; load average %s)\n", runtime.GOMAXPROCS(0), runtime.Version(), gatewayEnv, loadavg())
	stop()
	running.Wait()
	return nil
}

func shapeName(perKey bool) string {
	if perKey {
		return "one key each"
	}
	return "replicas of one key"
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// makeKeys makes the store with the first start's project and keys, plus
// agent keys up to n when perKey is set, and an admin API token.
func makeKeys(ctx context.Context, db string, n int, perKey bool) (agentKeys []string, clientKey, adminToken string, err error) {
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		return nil, "", "", err
	}
	defer st.Close()
	first, err := gateway.Bootstrap(ctx, st)
	if err != nil {
		return nil, "", "", err
	}
	p, err := st.Project(ctx, first.Project)
	if err != nil {
		return nil, "", "", err
	}
	agentKeys = []string{first.AgentKey}
	for perKey && len(agentKeys) < n {
		_, secret, err := auth.CreateKey(ctx, st, store.Key{ProjectID: p.ID, Kind: store.KindAgent, Name: fmt.Sprintf("fanin %d", len(agentKeys))})
		if err != nil {
			return nil, "", "", err
		}
		agentKeys = append(agentKeys, secret)
	}
	_, adminToken, err = users.CreateAPIToken(ctx, st, "spacefix-fanin", 0)
	if err != nil {
		return nil, "", "", err
	}
	return agentKeys, first.ClientKey, adminToken, nil
}

// download saves what url answers to a request with the admin token.
func download(url, token, file string) error {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitUp(url string) error {
	for range 200 {
		if res, err := http.Get(url); err == nil {
			res.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the gateway did not answer %s within 10 s", url)
}

type mem struct{ rss, peak, heap, stacks, goroutines, allocated float64 }

func mib(b float64) float64 { return b / (1 << 20) }

// memory returns the gateway's resident set and its peak (from /proc), and
// its heap in use, goroutine stacks, goroutines and bytes allocated since it
// started (from its metrics).
func memory(pid int, metrics string) mem {
	var m mem
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseFloat(f[1], 64)
			switch f[0] {
			case "VmRSS:":
				m.rss = kb * 1024
			case "VmHWM:":
				m.peak = kb * 1024
			}
		}
	}
	res, err := http.Get(metrics)
	if err != nil {
		return m
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, v, _ := strings.Cut(sc.Text(), " ")
		f, _ := strconv.ParseFloat(v, 64)
		switch name {
		case "go_memstats_heap_alloc_bytes":
			m.heap = f
		case "go_memstats_stack_inuse_bytes":
			m.stacks = f
		case "go_goroutines":
			m.goroutines = f
		case "go_memstats_alloc_bytes_total":
			m.allocated = f
		}
	}
	return m
}

type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// timeLists connects the go-sdk client and times count tools/list calls,
// sorted.
func timeLists(ctx context.Context, url, key string, count int) ([]time.Duration, int, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "spacefix-fanin", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{key}}}, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("connect the MCP client: %w", err)
	}
	defer s.Close()
	fmt.Fprintf(os.Stderr, "%s the MCP client is connected\n", time.Now().Format("15:04:05.000"))
	var times []time.Duration
	tools := 0
	for range max(count, 1) {
		t0 := time.Now()
		res, err := s.ListTools(ctx, nil)
		if err != nil {
			return nil, 0, fmt.Errorf("tools/list: %w", err)
		}
		times = append(times, time.Since(t0))
		tools = len(res.Tools)
	}
	slices.Sort(times)
	return times, tools, nil
}

// loadavg returns the machine's load averages over 1, 5 and 15 minutes.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
