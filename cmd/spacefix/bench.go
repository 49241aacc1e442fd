package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const benchUsage = `Usage: spacefix bench --tool NAME [--args JSON] [--calls N | --duration D] [--concurrency C] [--protocol VERSION]

Calls one tool through a gateway as MCP clients do (the official go-sdk client
over Streamable HTTP, one client per caller: stateless at 2026-07-28, the
default, or one session each at --protocol 2025-11-25 or 2025-06-18) and
prints calls, errors, calls/s and latency percentiles. --url defaults to SPACEFIX_URL, else
http://127.0.0.1:8080; --key to SPACEFIX_CLIENT_KEY. Ctrl-C stops early and
still prints what was measured.
`

// benchResult is what bench prints, also as --json.
type benchResult struct {
	Tool               string  `json:"tool"`
	Protocol           string  `json:"protocol"` // as negotiated
	Concurrency        int     `json:"concurrency"`
	Calls              int     `json:"calls"`
	Errors             int     `json:"errors"`
	ProtocolErrors     int     `json:"protocolErrors"`
	ToolErrors         int     `json:"toolErrors"`
	FirstProtocolError string  `json:"firstProtocolError,omitempty"`
	FirstToolError     string  `json:"firstToolError,omitempty"`
	Seconds            float64 `json:"seconds"`
	CallsPerSecond     float64 `json:"callsPerSecond"`
	P50Ms              float64 `json:"p50Ms"`
	P90Ms              float64 `json:"p90Ms"`
	P99Ms              float64 `json:"p99Ms"`
	MaxMs              float64 `json:"maxMs"`
}

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", stderr)
	base := fs.String("url", "", "the gateway's base `URL` or MCP endpoint (default SPACEFIX_URL, else http://127.0.0.1:8080)")
	key := fs.String("key", "", "a client `key` (default SPACEFIX_CLIENT_KEY)")
	tool := fs.String("tool", "", "the exposed `name` of the tool to call")
	argsJSON := fs.String("args", "{}", "the tool's arguments, a JSON `object`")
	calls := fs.Int("calls", 0, "stop after this many calls (default: run for --duration)")
	duration := fs.Duration("duration", 10*time.Second, "how long to run when --calls is not given")
	concurrency := fs.Int("concurrency", 1, "how many callers call at once, each with its own session")
	warmup := fs.Int("warmup", 0, "calls per caller before measuring, not counted")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	protocol := fs.String("protocol", "", "the MCP protocol `version` to speak (default: the newest go-sdk and the gateway share, 2026-07-28)")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case *tool == "":
		return usageError{"bench: --tool is required: the exposed name as tools/list shows it"}
	case *concurrency < 1 || *calls < 0 || *warmup < 0 || *duration <= 0:
		return usageError{"bench: --concurrency must be at least 1; --calls, --warmup and --duration must not be negative"}
	case *protocol != "" && !slices.Contains(mcp.SupportedProtocolVersions(), *protocol):
		return usageError{fmt.Sprintf("bench: --protocol %q: want one of %s", *protocol, strings.Join(mcp.SupportedProtocolVersions(), ", "))}
	}
	var arguments map[string]any
	if err := json.Unmarshal([]byte(*argsJSON), &arguments); err != nil || arguments == nil {
		return usageError{fmt.Sprintf("bench: --args must be a JSON object, for example '{\"id\":\"1042\"}' (%q is not)", *argsJSON)}
	}
	endpoint, err := mcpEndpoint(*base)
	if err != nil {
		return err
	}
	if *key == "" {
		*key = os.Getenv("SPACEFIX_CLIENT_KEY")
	}
	if *key == "" {
		return usageError{"bench: give a client key with --key or SPACEFIX_CLIENT_KEY (spacefix keys create --kind client)"}
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	connect := func() (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "spacefix-bench", Version: currentBuild().Version}, nil)
		s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearerKey(*key)}},
			&mcp.ClientSessionOptions{ProtocolVersion: *protocol})
		if err != nil {
			return nil, fmt.Errorf("bench: connect to %s: %w", endpoint, err)
		}
		return s, nil
	}
	sessions := make([]*mcp.ClientSession, *concurrency)
	defer func() {
		for _, s := range sessions {
			if s != nil {
				s.Close()
			}
		}
	}()
	for i := range sessions {
		if sessions[i], err = connect(); err != nil {
			return err
		}
	}
	if err := checkTool(ctx, sessions[0], *tool); err != nil {
		return err
	}
	// go-sdk writes into the params it sends (_meta): one per caller.
	params := func() *mcp.CallToolParams { return &mcp.CallToolParams{Name: *tool, Arguments: arguments} }
	for _, s := range sessions {
		p := params()
		for range *warmup {
			s.CallTool(ctx, p)
		}
	}

	// Callers take call numbers from one counter, so --calls is exact.
	runCtx := ctx
	if *calls == 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	var (
		next, done   atomic.Int64
		mu           sync.Mutex
		times        []time.Duration
		res          = benchResult{Tool: *tool, Concurrency: *concurrency, Protocol: sessions[0].InitializeResult().ProtocolVersion}
		wg           sync.WaitGroup
		stopProgress = make(chan struct{})
	)
	start := time.Now()
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		benchProgress(stderr, start, &done, stopProgress)
	}()
	for _, s := range sessions {
		wg.Go(func() {
			params := params()
			var mine []time.Duration
			for runCtx.Err() == nil && (*calls == 0 || next.Add(1) <= int64(*calls)) {
				t0 := time.Now()
				out, err := s.CallTool(runCtx, params)
				took := time.Since(t0)
				if err != nil && runCtx.Err() != nil {
					break // cut short by the end of the run, not an error
				}
				done.Add(1)
				mine = append(mine, took)
				mu.Lock()
				switch {
				case err != nil:
					res.ProtocolErrors++
					if res.FirstProtocolError == "" {
						res.FirstProtocolError = err.Error()
					}
				case out.IsError:
					res.ToolErrors++
					if res.FirstToolError == "" {
						res.FirstToolError = resultText(out)
					}
				}
				mu.Unlock()
			}
			mu.Lock()
			times = append(times, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(stopProgress)
	<-progressDone // nothing writes to stderr once the command returns
	elapsed := time.Since(start)

	res.Calls = len(times)
	res.Errors = res.ProtocolErrors + res.ToolErrors
	res.Seconds = elapsed.Seconds()
	if elapsed > 0 {
		res.CallsPerSecond = float64(res.Calls) / elapsed.Seconds()
	}
	slices.Sort(times)
	pct := func(p float64) float64 {
		if len(times) == 0 {
			return 0
		}
		i := min(int(p*float64(len(times))), len(times)-1)
		return float64(times[i].Microseconds()) / 1000
	}
	res.P50Ms, res.P90Ms, res.P99Ms = pct(0.50), pct(0.90), pct(0.99)
	if len(times) > 0 {
		res.MaxMs = float64(times[len(times)-1].Microseconds()) / 1000
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(stdout, "tool %s, %d caller(s), %.1f s, protocol %s\n", res.Tool, res.Concurrency, res.Seconds, res.Protocol)
	fmt.Fprintf(stdout, "calls     %d (%.1f/s)\n", res.Calls, res.CallsPerSecond)
	fmt.Fprintf(stdout, "errors    %d (protocol %d, tool %d)\n", res.Errors, res.ProtocolErrors, res.ToolErrors)
	if res.FirstProtocolError != "" {
		fmt.Fprintf(stdout, "  first protocol error: %s\n", res.FirstProtocolError)
	}
	if res.FirstToolError != "" {
		fmt.Fprintf(stdout, "  first tool error: %s\n", res.FirstToolError)
	}
	fmt.Fprintf(stdout, "latency   p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms\n", res.P50Ms, res.P90Ms, res.P99Ms, res.MaxMs)
	return nil
}

// benchProgress writes the calls done so far once a second until stop.
func benchProgress(w io.Writer, start time.Time, done *atomic.Int64, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			n := done.Load()
			fmt.Fprintf(w, "%5.0fs  %d calls  %.0f/s\n", time.Since(start).Seconds(), n, float64(n)/time.Since(start).Seconds())
		}
	}
}

// mcpEndpoint turns --url (or SPACEFIX_URL) into the MCP endpoint: a base
// URL gets /mcp.
func mcpEndpoint(base string) (string, error) {
	if base == "" {
		base = os.Getenv("SPACEFIX_URL")
	}
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usageError{fmt.Sprintf("bench: --url %q: want the gateway's http(s) URL, for example http://127.0.0.1:8080", base)}
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/mcp"
	}
	return u.String(), nil
}

// checkTool makes sure the gateway lists tool, so a typo is one clear error
// instead of N failed calls.
func checkTool(ctx context.Context, s *mcp.ClientSession, tool string) error {
	var names []string
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("bench: tools/list: %w", err)
		}
		if t.Name == tool {
			return nil
		}
		names = append(names, t.Name)
	}
	if len(names) == 0 {
		return errors.New("bench: the gateway lists no tools for this key: is an agent connected?")
	}
	slices.Sort(names)
	shown := names[:min(len(names), 10)]
	more := ""
	if len(names) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(names)-len(shown))
	}
	return fmt.Errorf("bench: tool %q not found; the gateway lists %s%s", tool, strings.Join(shown, ", "), more)
}

// resultText is the text of an isError result, cut to one line.
func resultText(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			s, _, _ := strings.Cut(t.Text, "\n")
			return s
		}
	}
	return "(no text)"
}

// bearerKey adds the client key to each request.
type bearerKey string

func (k bearerKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(k))
	return http.DefaultTransport.RoundTrip(r)
}
