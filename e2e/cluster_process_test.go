package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
)

// startGatewayProcess runs another `spacefix serve` on an existing store
// and bus, and waits until it is ready.
func startGatewayProcess(t *testing.T, data, bus string) (url string, cmd *exec.Cmd) {
	t.Helper()
	addr := freeAddr(t)
	cmd = exec.Command(binary(t, "../cmd/spacefix"), "serve", "--addr", addr, "--data", data, "--bus", bus)
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("second gateway's stderr:\n%s", tail([]byte(stderr.String()), 4096))
		}
	})
	url = "http://" + addr
	waitFor(t, "the second gateway process to be ready", func() bool {
		select {
		case <-done:
			t.Fatalf("spacefix serve exited: %s", stderr.String())
		default:
		}
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url, cmd
}

// failoverLB is a round-robin load balancer without stickiness that, like
// any real one, tries the next gateway when one refuses connections.
func failoverLB(t *testing.T, backends ...string) string {
	t.Helper()
	var next atomic.Uint64
	targets := make([]*url.URL, len(backends))
	for i, b := range backends {
		u, err := url.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		targets[i] = u
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		start := next.Add(1)
		for i := range len(targets) {
			u := targets[(start+uint64(i))%uint64(len(targets))]
			var dialErr error
			proxy := &httputil.ReverseProxy{
				Rewrite: func(pr *httputil.ProxyRequest) {
					pr.SetURL(u)
					pr.Out.Host = pr.In.Host
				},
				FlushInterval: -1,
				ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
					dialErr = err
				},
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			rec := &deferredWriter{ResponseWriter: w}
			proxy.ServeHTTP(rec, r)
			var op interface{ Timeout() bool }
			if dialErr == nil || rec.wrote || !(errors.As(dialErr, &op) || strings.Contains(dialErr.Error(), "connection refused")) {
				if dialErr != nil && !rec.wrote {
					http.Error(w, dialErr.Error(), http.StatusBadGateway)
				}
				return
			}
		}
		http.Error(w, "no gateway reachable", http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// deferredWriter notes whether anything reached the client, so that the
// balancer retries only requests no gateway answered.
type deferredWriter struct {
	http.ResponseWriter
	wrote bool
}

func (d *deferredWriter) WriteHeader(code int) { d.wrote = true; d.ResponseWriter.WriteHeader(code) }
func (d *deferredWriter) Write(b []byte) (int, error) {
	d.wrote = true
	return d.ResponseWriter.Write(b)
}
func (d *deferredWriter) Flush() {
	if f, ok := d.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
func (d *deferredWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// Two real gateway processes on one store and NATS, behind a round-robin
// load balancer: an agent process that connects through the balancer is
// called by clients of every era through it; a gateway killed with
// SIGKILL while a call through the other waits on an agent it held ends
// that call with the disconnect message in seconds; the agent that was
// connected through the balancer comes back through it, and calls work.
func TestClusterProcesses(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs gateway and agent processes; skipped under -short")
	}
	nats := startNATS(t)
	p1 := startServeProcess(t, "--bus", nats)
	url2, _ := startGatewayProcess(t, p1.dataPath, nats)
	lb := failoverLB(t, p1.url, url2)

	viaLB := &env{t: t, url: lb, agentKey: p1.agentKey, clientKey: p1.clientKey}
	agent := exec.Command(binary(t, "./testagent"))
	agent.Env = append(os.Environ(), "SPACEFIX_API_KEY="+p1.agentKey, "SPACEFIX_URL="+lb)
	agent.Stderr = os.Stderr
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })

	for _, v := range versions {
		cs := viaLB.connect(v, p1.clientKey, nil)
		for i := range 6 {
			tag := fmt.Sprint(v, "-", i)
			r := callEventuallyWith(t, cs, "work", map[string]any{"ms": 1, "tag": tag})
			if !strings.HasPrefix(text(r), "done "+tag+" by ") {
				t.Errorf("work through the balancer at %s = %q", v, text(r))
			}
		}
	}

	// An agent connected to the first gateway, called through the second.
	keyOut, err := exec.Command(binary(t, "../cmd/spacefix"), "keys", "create", "--data", p1.dataPath,
		"--project", "default", "--kind", "agent", "--name", "held by p1", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var k struct{ Key string }
	must(t, json.Unmarshal(keyOut, &k))
	held, err := core.New(core.Options{APIKey: k.Key, URL: p1.url, Logger: testLogger(t)})
	must(t, err)
	started := make(chan string, 1)
	must(t, core.AddTool(held, "hold", "Waits.", func(ctx context.Context, _ struct{}) (string, error) {
		started <- "hold"
		<-ctx.Done()
		return "", ctx.Err()
	}))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go held.Run(ctx)
	second := &env{t: t, url: url2}
	cs := second.connect("2025-11-25", p1.clientKey, nil)
	waitFor(t, "the second gateway to list the tool of the agent on the first", func() bool {
		return slices.Contains(toolNames(t, cs), "hold")
	})
	res := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hold", Arguments: map[string]any{}})
		if err != nil {
			t.Errorf("hold: %v", err)
		}
		res <- r
	}()
	receive(t, started, "the call to reach the agent on the first gateway")
	killed := time.Now()
	p1.cmd.Process.Kill()
	r := receive(t, res, "the call to end after the first gateway was killed")
	if want := "Agent disconnected before returning a result."; r == nil || !r.IsError || text(r) != want {
		t.Errorf("hold after its gateway was killed = %+v, want %q", r, want)
	}
	if d := time.Since(killed); d > 10*time.Second {
		t.Errorf("the caller waited %v after the kill", d)
	}

	// The agent process that came in through the balancer is served by the
	// second gateway now, whichever it was on.
	cs2 := viaLB.connect("2026-07-28", p1.clientKey, nil)
	r = callEventuallyWith(t, cs2, "work", map[string]any{"ms": 1, "tag": "after"})
	if !strings.HasPrefix(text(r), "done after by ") {
		t.Errorf("work after the kill = %q", text(r))
	}
}
