package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/interceptors"
)

// SideGatewayInterceptor names the gateway target whose project's policy
// lists one interceptor server ([StartInterceptor]) with a validator on
// every tools/call request: what an interceptor adds to a call.
const SideGatewayInterceptor = "gateway-interceptor"

// InterceptorName is the one interceptor of [StartInterceptor]'s server: a
// validator of tools/call requests that lets every call through.
const InterceptorName = "allow-all"

// Interceptor is an interceptor server (SEP-1763) on go-sdk over
// Streamable HTTP on loopback.
type Interceptor struct {
	URL     string
	srv     *http.Server
	mu      sync.Mutex
	invoked int
	conns   map[string]bool // the client addresses requests came from
}

// Conns returns over how many connections requests came.
func (ic *Interceptor) Conns() int {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return len(ic.conns)
}

// StartInterceptor serves [InterceptorName] until Close.
func StartInterceptor() (*Interceptor, error) {
	ic := &Interceptor{conns: map[string]bool{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "bench-interceptors", Version: "1"}, nil)
	infos := []interceptors.Info{{Name: InterceptorName, Type: interceptors.Validation,
		Hook: interceptors.Hook{Events: []string{"tools/call"}, Phase: interceptors.PhaseRequest}}}
	if err := mcp.AddReceivingCustomMethod(s, interceptors.MethodList, func(context.Context, *mcp.ServerSession, *interceptors.ListParams) (*interceptors.ListResult, error) {
		return &interceptors.ListResult{Interceptors: infos}, nil
	}); err != nil {
		return nil, err
	}
	valid := true
	if err := mcp.AddReceivingCustomMethod(s, interceptors.MethodInvoke, func(_ context.Context, _ *mcp.ServerSession, p *interceptors.InvokeParams) (*interceptors.InvokeResult, error) {
		if p.Name != InterceptorName {
			return nil, fmt.Errorf("no interceptor %q", p.Name)
		}
		ic.mu.Lock()
		ic.invoked++
		ic.mu.Unlock()
		return &interceptors.InvokeResult{Valid: &valid}, nil
	}); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ic.URL = "http://" + ln.Addr().String() + "/mcp"
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	ic.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ic.mu.Lock()
		ic.conns[r.RemoteAddr] = true
		ic.mu.Unlock()
		h.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go ic.srv.Serve(ln)
	return ic, nil
}

// Invoked returns how many times the interceptor ran.
func (ic *Interceptor) Invoked() int {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return ic.invoked
}

// Close stops the server.
func (ic *Interceptor) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return ic.srv.Shutdown(ctx)
}

// InterceptorPolicy is a policy with no rules and one interceptor server,
// at url.
func InterceptorPolicy(url string) json.RawMessage {
	b, err := json.Marshal(map[string]any{"rules": []any{},
		"interceptors": []any{map[string]any{"name": "bench", "url": url, "timeout": "5s"}}})
	if err != nil {
		panic(err)
	}
	return b
}

// InvokeRun is what [RunInvokes] measured.
type InvokeRun struct {
	Calls      int
	CPUPerCall time.Duration // of this process, the client's side
	P50        time.Duration
}

// RunInvokes sends calls interceptor/invoke requests to the interceptor
// server at url from concurrency goroutines on one go-sdk client session,
// with the payload the gateway sends for a call of echo: a bare round
// trip, the client's side of which the gateway pays per call.
func RunInvokes(ctx context.Context, url string, calls, concurrency int) (InvokeRun, error) {
	cl := mcp.NewClient(&mcp.Implementation{Name: "bench-invoker", Version: "1"}, nil)
	if err := mcp.AddSendingCustomMethod[*interceptors.InvokeParams, *interceptors.InvokeResult](cl, interceptors.MethodInvoke); err != nil {
		return InvokeRun{}, err
	}
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return InvokeRun{}, err
	}
	defer cs.Close()
	invoke := func() error {
		p := &interceptors.InvokeParams{Name: InterceptorName, Event: "tools/call", Phase: interceptors.PhaseRequest,
			Payload:   json.RawMessage(`{"name":"echo","arguments":{"text":"hello"}}`),
			TimeoutMs: 5000, Context: &interceptors.InvokeContext{Principal: &interceptors.Principal{Type: "service", ID: "key_bench"},
				Timestamp: time.Now().UTC().Format(time.RFC3339Nano)}}
		r, err := mcp.CallCustomMethod[*interceptors.InvokeParams, *interceptors.InvokeResult](ctx, cs, interceptors.MethodInvoke, p)
		if err == nil && (r.Valid == nil || !*r.Valid) {
			err = errors.New("the interceptor did not answer valid")
		}
		return err
	}
	for range min(calls/10+1, 500) { // warm-up
		if err := invoke(); err != nil {
			return InvokeRun{}, err
		}
	}
	var (
		mu    sync.Mutex
		lats  = make([]time.Duration, 0, calls)
		first error
		wg    sync.WaitGroup
		next  = make(chan struct{}, calls)
	)
	for range calls {
		next <- struct{}{}
	}
	close(next)
	cpu0 := processCPU()
	for range concurrency {
		wg.Go(func() {
			for range next {
				t0 := time.Now()
				err := invoke()
				d := time.Since(t0)
				mu.Lock()
				lats = append(lats, d)
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	cpu := processCPU() - cpu0
	if first != nil {
		return InvokeRun{}, first
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	return InvokeRun{Calls: calls, CPUPerCall: cpu / time.Duration(calls), P50: lats[len(lats)/2]}, nil
}
