// Command spacefix-bench compares tools/call through the gateway with the
// same tool served directly by a go-sdk MCP server, in one process over
// loopback, and prints a markdown table of medians: p50 and p99 latency and
// calls/s per shape, with the ratios gateway/direct.
//
//	go run ./bench/cmd/spacefix-bench                 # 5 reps × 5,000 calls per shape
//	go run ./bench/cmd/spacefix-bench -reps 1 -calls 1000
//	go run ./bench/cmd/spacefix-bench -serve gateway   # one target, for a client in another process
//
// Each repetition runs every shape on every target back to back (rotating
// which goes first), after a warm-up per target and shape. With -cached (the
// default) a third target, a gateway caching echo's results, is measured
// too and compared with the uncached one. It stops by itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "spacefix-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) (err error) {
	fs := flag.NewFlagSet("spacefix-bench", flag.ContinueOnError)
	calls := fs.Int("calls", 5000, "timed calls per target, shape and repetition")
	warmup := fs.Int("warmup", 500, "untimed calls per target and shape before the first repetition")
	reps := fs.Int("reps", 5, "repetitions; the table shows medians")
	only := fs.String("configs", "c1,c16,c16-sessions,c1-stateless,c16-stateless", "shapes to run, comma-separated (-stateless: protocol 2026-07-28)")
	split := fs.Bool("split", true, "also split one caller's calls into legs (client→handler, handler, handler→client)")
	cached := fs.Bool("cached", true, "also measure a gateway that caches echo's results (all calls but the first are hits)")
	serve := fs.String("serve", "", "only serve one target (direct, gateway, gateway-cached, gateway-50-rules or gateway-interceptor) until interrupted, printing its endpoint and key: for a client in another process, such as spacefix bench; or serve the echo agent (agent, with -agent-url and -agent-key), or an interceptor server (interceptor, printing its URL)")
	alone := fs.Bool("alone", false, "with -serve gateway, gateway-cached, gateway-50-rules or gateway-interceptor: start no agent, and print on a second line the gateway's URL and the agent key for one in another process")
	interceptorURL := fs.String("interceptor-url", "", "with -serve gateway-interceptor -alone: the interceptor server's URL (from -serve interceptor)")
	invoke := fs.String("invoke", "", "send -calls interceptor/invoke requests to the interceptor server at this URL from -concurrency goroutines, and print this process's CPU per call and the p50 in JSON: the bare round trip an interceptor adds")
	concurrency := fs.Int("concurrency", 1, "with -invoke: requests in flight")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process to this file, until it ends (with -serve: until interrupted)")
	agentURL := fs.String("agent-url", "", "with -serve agent: the gateway's URL")
	agentKey := fs.String("agent-key", "", "with -serve agent: the agent key")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			err = errors.Join(err, f.Close())
		}()
	}
	switch {
	case *serve == "agent":
		return bench.RunEchoAgent(ctx, *agentURL, *agentKey)
	case *serve == "interceptor":
		ic, err := bench.StartInterceptor()
		if err != nil {
			return err
		}
		fmt.Println(ic.URL)
		<-ctx.Done()
		return ic.Close()
	case *serve != "":
		return serveOne(ctx, *serve, *alone, *interceptorURL)
	case *invoke != "":
		r, err := bench.RunInvokes(ctx, *invoke, *calls, *concurrency)
		if err != nil {
			return err
		}
		fmt.Printf("{\"calls\": %d, \"cpuUsPerCall\": %.1f, \"p50Ms\": %.3f}\n", r.Calls,
			float64(r.CPUPerCall.Nanoseconds())/1e3, float64(r.P50.Nanoseconds())/1e6)
		return nil
	}
	if *calls <= 0 || *reps <= 0 || *warmup < 0 {
		return errors.New("-calls and -reps must be positive, -warmup not negative")
	}
	var cfgs []bench.Config
	for _, name := range strings.Split(*only, ",") {
		i := slices.IndexFunc(bench.Configs, func(c bench.Config) bool { return c.Name == name })
		if i < 0 {
			return fmt.Errorf("unknown shape %q", name)
		}
		cfgs = append(cfgs, bench.Configs[i])
	}

	direct, err := bench.StartDirect()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, direct.Close()) }()
	tmp, err := os.MkdirTemp("", "spacefix-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	gw, err := bench.StartGateway(tmp)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, gw.Close()) }()
	targets := []*bench.Target{direct, gw}
	if *cached {
		var cg *bench.Target
		if cg, err = bench.StartCachedGateway(tmp); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, cg.Close()) }()
		targets = append(targets, cg)
	}

	fmt.Fprintf(os.Stderr, "GOMAXPROCS=%d, %s, %d calls per run after %d warm-up, %d reps\n",
		runtime.GOMAXPROCS(0), runtime.Version(), *calls, *warmup, *reps)
	sessions := map[string][][]*mcp.ClientSession{}
	for _, c := range cfgs {
		ss := make([][]*mcp.ClientSession, len(targets))
		for i, t := range targets {
			n := 1
			if c.PerCaller {
				n = c.Callers
			}
			if ss[i], err = t.SessionsAt(ctx, n, c.ProtocolVersion()); err != nil {
				return err
			}
			if _, err := bench.Run(ctx, ss[i], c.Callers, *warmup); err != nil {
				return fmt.Errorf("warm-up %s %s: %w", t.Name, c.Name, err)
			}
		}
		sessions[c.Name] = ss
	}

	var pairs []bench.Pair
	for rep := 1; rep <= *reps; rep++ {
		for _, c := range cfgs {
			p := bench.Pair{Config: c, Rep: rep}
			// Each repetition starts with a different target.
			for k := range targets {
				i := (k + rep - 1) % len(targets)
				runtime.GC() // each run starts from the same heap state
				res, err := bench.Run(ctx, sessions[c.Name][i], c.Callers, *calls)
				if err != nil {
					return fmt.Errorf("rep %d %s: %w", rep, c.Name, err)
				}
				switch i {
				case 0:
					p.Direct = res
				case 1:
					p.Gateway = res
				default:
					p.Cached = res
				}
			}
			bench.WritePair(os.Stderr, p)
			pairs = append(pairs, p)
		}
	}
	sums := bench.Summarize(cfgs, pairs)
	bench.WriteTable(os.Stdout, sums)
	if *cached {
		fmt.Fprintf(os.Stdout, "\nCached gateway (echo cached %d s, the same arguments every call; calls that reached the agent: %d):\n\n",
			bench.CacheSeconds, targets[2].AgentCalls())
		bench.WriteCacheTable(os.Stdout, sums)
	}
	if *split {
		return writeSplit(ctx, direct, gw, *calls, *reps)
	}
	return nil
}

// serveOne serves the target named until ctx ends, after printing its
// endpoint and its client key ("-" for none) on one line: the server side
// alone in this process, so that its CPU can be read from /proc while a
// client in another process calls it. With alone, a gateway starts no agent
// and a second line gives its URL and agent key, for -serve agent.
func serveOne(ctx context.Context, name string, alone bool, interceptorURL string) (err error) {
	var (
		t             *bench.Target
		agentKey, url string
	)
	switch name {
	case bench.SideDirect:
		t, err = bench.StartDirect()
	case bench.SideGateway, bench.SideGatewayCached, bench.SideGatewayPolicy, bench.SideGatewayInterceptor:
		tmp, terr := os.MkdirTemp("", "spacefix-bench-")
		if terr != nil {
			return terr
		}
		defer os.RemoveAll(tmp)
		switch {
		case alone:
			t, agentKey, url, err = bench.StartGatewayAlone(tmp, name, interceptorURL)
		case name == bench.SideGateway:
			t, err = bench.StartGateway(tmp)
		case name == bench.SideGatewayCached:
			t, err = bench.StartCachedGateway(tmp)
		case name == bench.SideGatewayPolicy:
			t, err = bench.StartPolicyGateway(tmp, name, bench.FiftyRules())
		default:
			return errors.New("-serve gateway-interceptor: only with -alone and -interceptor-url")
		}
	default:
		return fmt.Errorf("-serve %q: serve direct, gateway, gateway-cached, gateway-50-rules, gateway-interceptor, agent or interceptor", name)
	}
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, t.Close()) }()
	key := t.Key
	if key == "" {
		key = "-"
	}
	fmt.Println(t.Endpoint, key)
	if agentKey != "" {
		fmt.Println(url, agentKey)
	}
	<-ctx.Done()
	return nil
}

// writeSplit times single-caller calls leg by leg on a fresh session per
// target, reps times each, alternating the targets, and prints the medians.
func writeSplit(ctx context.Context, direct, gw *bench.Target, calls, reps int) error {
	targets := []*bench.Target{direct, gw}
	var sessions [2]*mcp.ClientSession
	for i, t := range targets {
		ss, err := t.Sessions(ctx, 1)
		if err != nil {
			return err
		}
		if _, err := bench.RunSplit(ctx, ss[0], calls/10+1); err != nil { // warm-up
			return err
		}
		sessions[i] = ss[0]
	}
	var legs [2][]bench.Split
	for rep := range reps {
		for _, i := range []int{rep % 2, 1 - rep%2} {
			runtime.GC()
			sp, err := bench.RunSplit(ctx, sessions[i], calls)
			if err != nil {
				return fmt.Errorf("split %s: %w", targets[i].Name, err)
			}
			legs[i] = append(legs[i], sp)
		}
	}
	bench.WriteSplit(os.Stdout, legs[0], legs[1])
	return nil
}
