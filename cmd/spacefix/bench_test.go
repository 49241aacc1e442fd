package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spacefix/spacefix/core"
)

// benchGateway runs a gateway with a real agent offering echo and broken,
// and returns its URL and a client key.
func benchGateway(t *testing.T) (url, clientKey string) {
	t.Helper()
	_, g, first, _ := testGateway(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := core.New(core.Options{APIKey: first.AgentKey, URL: g.URL(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	type echoIn struct {
		Text string `json:"text"`
	}
	if err := core.AddTool(a, "echo", "Returns its text.", func(_ context.Context, in echoIn) (string, error) { return in.Text, nil }); err != nil {
		t.Fatal(err)
	}
	if err := core.AddTool(a, "broken", "Always fails.", func(context.Context, struct{}) (string, error) {
		return "", errors.New("the order service is down")
	}); err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { a.Run(actx); close(ran) }()
	t.Cleanup(func() { stop(); <-ran })
	deadline := time.Now().Add(10 * time.Second)
	for len(g.Registry().All()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the agent did not connect")
		}
		time.Sleep(10 * time.Millisecond) // poll interval, bounded by the deadline: a real gateway on a socket and a database, which synctest cannot fake
	}
	return g.URL(), first.ClientKey
}

// benchJSON runs bench --json and reads its stdout; progress lines go to
// stderr once a run takes over a second (as on a loaded machine), so the
// two are kept apart.
func benchJSON(t *testing.T, args ...string) benchResult {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(context.Background(), append([]string{"bench", "--json"}, args...), &out, &errOut); err != nil {
		t.Fatalf("bench %q: %v\n%s", args, err, errOut.String())
	}
	var r benchResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("bench --json printed %q on standard output: %v", out.String(), err)
	}
	return r
}

// spacefix bench calls a tool through a real gateway exactly --calls times
// and counts tool errors apart from protocol errors.
func TestBenchCommand(t *testing.T) {
	url, key := benchGateway(t)

	r := benchJSON(t, "--url", url, "--key", key, "--tool", "echo", "--args", `{"text":"hi"}`, "--calls", "50", "--concurrency", "4")
	if r.Calls != 50 || r.Errors != 0 || r.Concurrency != 4 {
		t.Errorf("echo: %d calls, %d errors, %d callers; want 50, 0, 4 (%+v)", r.Calls, r.Errors, r.Concurrency, r)
	}
	if r.P50Ms <= 0 || r.P50Ms > r.P99Ms || r.P99Ms > r.MaxMs || r.CallsPerSecond <= 0 {
		t.Errorf("percentiles out of order: %+v", r)
	}
	if r.Protocol != "2026-07-28" {
		t.Errorf("protocol %q by default; want 2026-07-28, the newest both sides speak", r.Protocol)
	}
	for _, v := range []string{"2025-11-25", "2025-06-18"} {
		r = benchJSON(t, "--url", url, "--key", key, "--tool", "echo", "--args", `{"text":"hi"}`, "--calls", "20", "--concurrency", "2", "--protocol", v)
		if r.Calls != 20 || r.Errors != 0 || r.Protocol != v {
			t.Errorf("--protocol %s: %d calls, %d errors at %q; want 20, 0 at %s", v, r.Calls, r.Errors, r.Protocol, v)
		}
	}

	r = benchJSON(t, "--url", url+"/mcp", "--key", key, "--tool", "broken", "--calls", "5")
	if r.Calls != 5 || r.ToolErrors != 5 || r.ProtocolErrors != 0 || !strings.Contains(r.FirstToolError, "the order service is down") {
		t.Errorf("broken: %+v; want 5 calls, 5 tool errors with the handler's message", r)
	}

	// Invalid arguments fail validation at the gateway: tool errors too.
	r = benchJSON(t, "--url", url, "--key", key, "--tool", "echo", "--args", `{"text":5}`, "--calls", "3")
	if r.ToolErrors != 3 || !strings.Contains(r.FirstToolError, "text") {
		t.Errorf("echo with a number: %+v; want 3 tool errors naming the argument", r)
	}

	out, err := runCLI(t, "bench", "--url", url, "--key", key, "--tool", "echo", "--args", `{"text":"x"}`, "--duration", "300ms")
	if err != nil || !strings.Contains(out, "errors    0 (protocol 0, tool 0)") || !strings.Contains(out, "latency   p50 ") || !strings.Contains(out, ", protocol 2026-07-28\n") {
		t.Errorf("bench for 300ms printed %q, %v", out, err)
	}
}

// Mistakes are one clear error before any call.
func TestBenchMistakes(t *testing.T) {
	url, key := benchGateway(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--url", url, "--key", key, "--tool", "ecko"}, `bench: tool "ecko" not found; the gateway lists broken, echo`},
		{[]string{"--url", url, "--key", key, "--tool", "echo", "--args", "[1]"}, `bench: --args must be a JSON object, for example '{"id":"1042"}' ("[1]" is not)`},
		{[]string{"--url", url, "--key", key}, "bench: --tool is required"},
		{[]string{"--url", url, "--key", "sfx_client_nope", "--tool", "echo"}, "bench: connect to " + url + "/mcp"},
		{[]string{"--url", "ftp://x", "--key", key, "--tool", "echo"}, `bench: --url "ftp://x": want the gateway's http(s) URL`},
		{[]string{"--url", url, "--key", key, "--tool", "echo", "--protocol", "2025-01-01"}, `bench: --protocol "2025-01-01": want one of 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05`},
	} {
		t.Setenv("SPACEFIX_CLIENT_KEY", "")
		_, err := runCLI(t, append([]string{"bench"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("bench %q = %v, want %q", c.args, err, c.want)
		}
	}
}
