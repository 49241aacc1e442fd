package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/bridge"
)

// surfacePending are the conformance scenarios that cannot pass through
// the bridge until the agent protocol carries what they need (the
// MCP-surface work): the bridge relays them as soon as it does.
var surfacePending = []string{}

// surfaceUnsure pass or fail through the bridge by timing, so the test
// asserts neither: the server's log messages reach the bridge beside its
// result, and one that comes after the result has no call to go to; the
// capability check's requests race the calls of earlier scenarios still
// waiting for answers the suite never gives.
var surfaceUnsure = []string{"tools-call-with-logging", "input-required-result-capability-check"}

// TestBridgeConformance runs the official conformance suite (both pinned
// versions, in e2e/servers) against go-sdk's everything-server twice: as
// the suite's own target, and through the gateway with the server behind
// spacefix bridge (--no-prefix, so the suite finds its names). Every
// scenario that passes directly must pass through the bridge, except the
// ones listed in surfacePending, which are logged; one of those that
// starts passing fails the test so the list stays true.
func TestBridgeConformance(t *testing.T) {
	t.Parallel()
	node := suiteNode(t)
	for _, suite := range conformanceSuites {
		t.Run(suite.pkg, func(t *testing.T) {
			t.Parallel()
			stateless := suite.pkg == "conformance-0.2"

			direct := suite.run(t, node, everythingHTTP(t, stateless), func(string) bool { return false })

			// 0.1: the server as a stdio child, spoken to in 2025-11-25 (the
			// bridge's default for a child). 0.2: a server like the one the
			// suite tested directly, stateless over HTTP, spoken to in
			// 2026-07-28 (the default for a remote), so its input requests
			// keep their ids and its -32021 reaches the client.
			bridged := bridge.Server{Name: "ev", Command: binary(t, goEverything), Unprefixed: true}
			if stateless {
				bridged = bridge.Server{Name: "ev", URL: everythingHTTP(t, true), Unprefixed: true}
			}
			e := newEnv(t)
			e.startBridge(bridged, bridge.Options{})
			through := suite.run(t, node, e.withKeyProxy(t)+"/mcp", func(name string) bool {
				return direct[name] && !slices.Contains(surfacePending, name) && !slices.Contains(surfaceUnsure, name)
			})

			var lost, pendingNow []string
			for name, ok := range direct {
				if slices.Contains(surfaceUnsure, name) {
					t.Logf("by timing: %s passed through the bridge: %v", name, through[name])
					continue
				}
				pending := slices.Contains(surfacePending, name)
				switch {
				case ok && !through[name] && !pending:
					lost = append(lost, name)
				case ok && through[name] && pending:
					pendingNow = append(pendingNow, name)
				case ok && !through[name]:
					t.Logf("waits for the MCP-surface work: %s", name)
				}
			}
			slices.Sort(lost)
			slices.Sort(pendingNow)
			if len(lost) > 0 {
				t.Errorf("scenarios that pass directly but not through the bridge: %s", strings.Join(lost, ", "))
			}
			if len(pendingNow) > 0 {
				t.Errorf("now pass through the bridge; remove from surfacePending: %s", strings.Join(pendingNow, ", "))
			}
			t.Logf("%s: %d of %d scenarios pass through the bridge (%d directly)", suite.pkg, count(through), len(through), count(direct))
		})
	}
}

// everythingHTTP starts go-sdk's everything-server on Streamable HTTP,
// stateless (2026-07-28) or with sessions (2025-11-25), and returns its URL.
func everythingHTTP(t *testing.T, stateless bool) string {
	t.Helper()
	port := freePort(t)
	srv := exec.Command(binary(t, goEverything), "-http", fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("-stateless=%v", stateless))
	srv.Stderr = logOutput()
	must(t, srv.Start())
	p := &proc{cmd: srv, done: make(chan struct{})}
	go func() { srv.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	waitFor(t, "the everything-server to listen", func() bool { return dialable(port) })
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

func count(m map[string]bool) int {
	n := 0
	for _, ok := range m {
		if ok {
			n++
		}
	}
	return n
}

var scenarioDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T`)

// scenarioResults reads the suite's output: a scenario passes when none of
// its checks failed.
func scenarioResults(t *testing.T, dir string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	out := map[string]bool{}
	for _, d := range entries {
		m := scenarioDir.FindStringSubmatch(d.Name())
		if m == nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, d.Name(), "checks.json"))
		if err != nil {
			continue
		}
		var checks []struct {
			Status, ID   string
			ErrorMessage string `json:"errorMessage"`
		}
		must(t, json.Unmarshal(data, &checks))
		ok := len(checks) > 0
		for _, c := range checks {
			ok = ok && c.Status != "FAILURE"
			if c.Status == "FAILURE" {
				t.Logf("%s: %s: %s", m[1], c.ID, c.ErrorMessage)
			}
		}
		out[m[1]] = ok
	}
	if len(out) == 0 {
		t.Fatalf("the conformance suite wrote no results in %s", dir)
	}
	return out
}

// withKeyProxy serves the gateway on another loopback port with the client
// key added to every request: the suite cannot send headers.
func (e *env) withKeyProxy(t *testing.T) string {
	u, _ := url.Parse(e.url)
	rp := &httputil.ReverseProxy{
		FlushInterval: -1, // SSE at once
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host // keep Host and Origin, as the suite sent them
			r.Out.Header.Set("Authorization", "Bearer "+e.clientKey)
		},
	}
	port := freePort(t)
	srv := &http.Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Handler: rp}
	go srv.ListenAndServe()
	t.Cleanup(func() { srv.Close() })
	waitFor(t, "the key proxy to listen", func() bool { return dialable(port) })
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}
