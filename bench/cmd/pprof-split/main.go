// Command pprof-split splits a CPU profile of BenchmarkToolCall into the
// sides its goroutines are labelled with (side=client, gateway, agent,
// direct, or none for the runtime's own goroutines) and, for the server
// side, into the steps of a tools/call, in µs per call and in percent.
//
//	go test ./bench -run '^$' -bench 'ToolCall$/gateway/c16$' -benchtime 30000x -cpuprofile cpu.out -o bench.test
//	go run ./bench/cmd/pprof-split -calls 30000 bench.test cpu.out
//
// It reads `go tool pprof -traces`, so it needs the go command. A sample
// goes to the first step in [steps] whose test matches its stack; the rest
// by the innermost frame of ours or go-sdk's.
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "pprof-split:", err)
		os.Exit(1)
	}
}

// steps are checked in order against the whole stack of a server-side
// sample.
var steps = []struct {
	name string
	re   *regexp.Regexp
}{
	{"result decode into *mcp.CallToolResult (mcpfront/call.go → go-sdk json)", regexp.MustCompile(`(?s)CallToolResult\)\.UnmarshalJSON.*toolHandler`)},
	{"argument validation (internal/schema)", regexp.MustCompile(`internal/schema\.`)},
	{"call log: queue + SQLite batch insert (internal/store)", regexp.MustCompile(`internal/store|modernc\.org/sqlite`)},
	{"agent hop out: JSON encode + WebSocket write (route.Conn.Start/Send)", regexp.MustCompile(`route\.\(\*Conn\)\.(Start|Send|Cancel|Close)|agentfront\.\(\*wsTransport\)\.(Send|Close)`)},
	{"agent hop back: WebSocket read + JSON decode (route.Conn.read)", regexp.MustCompile(`route\.\(\*Conn\)\.(read|deliver|Serve)|agentfront\.\(\*wsTransport\)\.Recv`)},
	{"heartbeat (agentfront wsTransport.keepAlive)", regexp.MustCompile(`agentfront\.\(\*wsTransport\)\.keepAlive`)},
	{"route.Deliver: pick a replica, timer, wait", regexp.MustCompile(`route\.(Deliver|\(\*Call\)\.pick)`)},
	{"key check (bearer, Verifier: sha256, hex, cache)", regexp.MustCompile(`verifyToken|internal/auth\.`)},
	{"toolHandler, rest (mostly growing the go-sdk request goroutine's stack, which direct pays inside go-sdk)", regexp.MustCompile(`mcpfront\.\(\*Front\)\.toolHandler`)},
	{"echo handler (bench)", regexp.MustCompile(`bench\.echoHandler`)},
}

func run(args []string) error {
	fs := flag.NewFlagSet("pprof-split", flag.ContinueOnError)
	calls := fs.Int("calls", 0, "timed calls in the profile (the -benchtime count); 0 prints percent only")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return errors.New("usage: pprof-split [-calls N] BINARY PROFILE")
	}
	out, err := exec.Command("go", "tool", "pprof", "-traces", fs.Arg(0), fs.Arg(1)).Output()
	if err != nil {
		return fmt.Errorf("go tool pprof: %w", err)
	}
	bySide, byStep := map[string]float64{}, map[[2]string]float64{}
	var total float64
	for _, block := range strings.Split(string(out), "-----------+-------------------------------------------------------")[1:] {
		side, v, stack, ok := parse(block)
		if !ok {
			continue
		}
		total += v
		bySide[side] += v
		byStep[[2]string{side, classify(side, stack)}] += v
	}
	if total == 0 {
		return errors.New("no samples")
	}
	per := func(v float64) string {
		if *calls <= 0 {
			return ""
		}
		return fmt.Sprintf("%7.1f µs/call ", v/float64(*calls))
	}
	fmt.Printf("process: %s(100%%)\n", per(total))
	sides := sortedKeys(bySide)
	for _, side := range sides {
		fmt.Printf("\nside=%s: %s%.1f%% of process\n", side, per(bySide[side]), 100*bySide[side]/total)
		var names []string
		for k := range byStep {
			if k[0] == side {
				names = append(names, k[1])
			}
		}
		slices.SortFunc(names, func(a, b string) int { return cmp.Compare(byStep[[2]string{side, b}], byStep[[2]string{side, a}]) })
		for _, n := range names {
			v := byStep[[2]string{side, n}]
			fmt.Printf("  %s%5.1f%% of process %5.1f%% of side  %s\n", per(v), 100*v/total, 100*v/bySide[side], n)
		}
	}
	return nil
}

// parse reads one sample block: its side label, value in µs and stack
// (innermost first, one frame a line).
func parse(block string) (side string, v float64, stack string, ok bool) {
	side = "none"
	var frames []string
	for _, l := range strings.Split(block, "\n") {
		s := strings.TrimSpace(l)
		switch {
		case s == "":
		case strings.HasPrefix(s, "side:"):
			side = strings.TrimSpace(strings.TrimPrefix(s, "side:"))
		case !ok:
			f := strings.Fields(s)
			if len(f) < 2 {
				continue
			}
			if v, ok = duration(f[0]); ok {
				frames = append(frames, strings.Join(f[1:], " "))
			}
		default:
			frames = append(frames, s)
		}
	}
	return side, v, strings.Join(frames, "\n"), ok
}

func duration(s string) (float64, bool) {
	for _, u := range []struct {
		suffix string
		scale  float64
	}{{"ms", 1e3}, {"us", 1}, {"µs", 1}, {"s", 1e6}} {
		if n, found := strings.CutSuffix(s, u.suffix); found {
			f, err := strconv.ParseFloat(n, 64)
			return f * u.scale, err == nil
		}
	}
	return 0, false
}

func classify(side, stack string) string {
	switch side {
	case "client":
		return "(all)"
	case "agent":
		switch {
		case hasFrame(stack, "github.com/coder/websocket."):
			return "WebSocket read and write"
		case hasFrame(stack, "encoding/json."):
			return "JSON decode and encode"
		}
		return "call set-up (goroutine, contexts, throttle), rest"
	case "none":
		switch {
		case strings.Contains(stack, "runtime.gcBgMarkWorker"):
			return "GC background marking"
		case strings.Contains(stack, "bgscavenge") || strings.Contains(stack, "runtime.madvise"):
			return "returning memory to the OS (scavenger, madvise)"
		}
		return "scheduler, netpoll, timers"
	}
	for _, s := range steps {
		if s.re.MatchString(stack) {
			return s.name
		}
	}
	for _, f := range strings.Split(stack, "\n") { // innermost first
		switch {
		case strings.Contains(f, "CrossOriginProtection"):
			return "cross-origin check"
		case strings.Contains(f, "RequireBearerToken"):
			return "key check (bearer, Verifier: sha256, hex, cache)"
		case strings.Contains(f, "(*view).resolve") || strings.Contains(f, "spacefix/spacefix/internal/agents"):
			return "tool lookup (view.resolve: registry snapshot, settings, policy)"
		case strings.Contains(f, "spacefix/spacefix/internal/mcpfront"):
			return "mcpfront: dispatch, getServer, lookup"
		case strings.Contains(f, "spacefix/spacefix/"):
			return "other of ours"
		case strings.Contains(f, "modelcontextprotocol/go-sdk"):
			return "go-sdk server: streamable HTTP, SSE, JSON-RPC, its JSON"
		}
	}
	if strings.Contains(stack, "net/http.") {
		return "net/http server, syscalls"
	}
	return "runtime"
}

// hasFrame reports whether a frame of stack starts with prefix. (A plain
// substring test would match go-sdk's generic frames, whose names spell out
// types such as encoding/json.RawMessage.)
func hasFrame(stack, prefix string) bool {
	for _, f := range strings.Split(stack, "\n") {
		if strings.HasPrefix(f, prefix) {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]float64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b string) int { return cmp.Compare(m[b], m[a]) })
	return ks
}
