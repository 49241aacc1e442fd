package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/spacefix/spacefix/core"
)

// otlpReceiver is the collector at the edge: it takes OTLP/HTTP trace
// exports and keeps the span names.
type otlpReceiver struct {
	mu       sync.Mutex
	requests int
	spans    []string
}

func (rc *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.requests++
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				rc.spans = append(rc.spans, s.Name)
			}
		}
	}
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestTraceServeExportsOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, serve
// exports the spans of a tools/call over OTLP/HTTP, at the latest when it
// shuts down.
func TestTraceServeExportsOTLP(t *testing.T) {
	rc := &otlpReceiver{}
	collector := httptest.NewServer(rc)
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"} {
		t.Setenv(k, "")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, logs syncBuffer
	done := make(chan error, 1)
	data := filepath.Join(t.TempDir(), "s.db")
	go func() { done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--data", data}, &out, &logs) }()
	started := regexp.MustCompile(`(?s)MCP endpoint  (http://\S+)/mcp.*Agent key   (\S+).*Client key  (\S+)`)
	deadline := time.Now().Add(10 * time.Second)
	for !started.MatchString(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("serve printed no keys:\n%s\n%s", out.String(), logs.String())
		}
		time.Sleep(10 * time.Millisecond) // poll interval, bounded by the deadline: a real gateway on a socket and a database, which synctest cannot fake
	}
	m := started.FindStringSubmatch(out.String())
	base, agentKey, clientKey := m[1], m[2], m[3]

	a, err := core.New(core.Options{APIKey: agentKey, URL: base})
	if err != nil {
		t.Fatal(err)
	}
	type empty struct{}
	if err := core.AddTool(a, "echo", "Says ok.", func(context.Context, empty) (string, error) { return "ok", nil }); err != nil {
		t.Fatal(err)
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan error, 1)
	go func() { agentDone <- a.Run(agentCtx) }()

	client := mcp.NewClient(&mcp.Implementation{Name: "trace-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   base + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport(clientKey)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
		if err == nil && !res.IsError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("echo never answered: %v %+v", err, res)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, bounded by the deadline: a real gateway on a socket and a database, which synctest cannot fake
	}
	cs.Close()
	stopAgent()
	<-agentDone

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.requests == 0 {
		t.Fatalf("the collector got no export; serve logged:\n%s", logs.String())
	}
	for _, want := range []string{"tools/call echo", "route tool echo"} {
		if !slices.Contains(rc.spans, want) {
			t.Errorf("exported spans %q lack %q", rc.spans, want)
		}
	}
	if want := "exporting traces over OTLP/HTTP"; !regexp.MustCompile(regexp.QuoteMeta(want) + `.*endpoint=` + regexp.QuoteMeta(collector.URL+"/v1/traces")).MatchString(logs.String()) {
		t.Errorf("serve's log does not say where traces go:\n%s", logs.String())
	}
}
