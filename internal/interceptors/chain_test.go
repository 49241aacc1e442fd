package interceptors

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/testenv"
)

var emails = regexp.MustCompile(`[\w.+-]+@[\w-]+\.[\w.]+`)

// interceptorServer is a real MCP server (go-sdk, streamable HTTP on
// loopback) offering interceptors, in the SEP's flat answer shape.
func interceptorServer(t *testing.T, infos []Info, invoke func(p *InvokeParams) (*InvokeResult, error)) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "test-interceptors", Version: "1"}, nil)
	if err := mcp.AddReceivingCustomMethod(s, MethodList, func(ctx context.Context, _ *mcp.ServerSession, p *ListParams) (*ListResult, error) {
		return &ListResult{Interceptors: infos}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := mcp.AddReceivingCustomMethod(s, MethodInvoke, func(ctx context.Context, _ *mcp.ServerSession, p *InvokeParams) (*InvokeResult, error) {
		return invoke(p)
	}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// guards is a server with two mutators and two validators on tools/call.
func guards(t *testing.T) string {
	return interceptorServer(t, []Info{
		{Name: "redact-emails", Type: Mutation, Hook: Hook{Events: []string{"tools/call"}, Phase: PhaseResponse}, PriorityHint: Priority{Response: 10}},
		{Name: "mark-b", Type: Mutation, Hook: Hook{Events: []string{"tools/*"}, Phase: PhaseBoth}, PriorityHint: Priority{Request: 5, Response: -5}},
		{Name: "mark-a", Type: Mutation, Hook: Hook{Events: []string{"*"}, Phase: PhaseRequest}, PriorityHint: Priority{Request: 5}},
		{Name: "no-drop", Type: Validation, Hook: Hook{Events: []string{"tools/call"}, Phase: PhaseRequest}},
		{Name: "slow", Type: Validation, Hook: Hook{Events: []string{"tools/call"}, Phase: PhaseRequest}},
		{Name: "listing", Type: Validation, Hook: Hook{Events: []string{"tools/list"}, Phase: PhaseResponse}},
	}, func(p *InvokeParams) (*InvokeResult, error) {
		s := string(p.Payload)
		switch p.Name {
		case "redact-emails":
			out := emails.ReplaceAllString(s, "[email]")
			return &InvokeResult{Modified: &[]bool{out != s}[0], Payload: json.RawMessage(out)}, nil
		case "mark-a", "mark-b":
			var v map[string]any
			json.Unmarshal(p.Payload, &v)
			v["marks"] = append(toSlice(v["marks"]), p.Name)
			b, _ := json.Marshal(v)
			return &InvokeResult{Modified: yes(), Payload: b}, nil
		case "no-drop":
			if strings.Contains(s, "DROP") {
				return &InvokeResult{Valid: no(), Messages: []Message{{Path: "params.arguments.sql", Message: "statements that drop tables are not allowed", Severity: "error"}}}, nil
			}
			return &InvokeResult{Valid: yes()}, nil
		case "slow":
			if strings.Contains(s, "slow") {
				time.Sleep(2 * time.Second)
			}
			return &InvokeResult{Valid: yes()}, nil
		}
		return &InvokeResult{Valid: yes()}, nil
	})
}

func toSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func TestChain(t *testing.T) {
	url := guards(t)
	c := New([]policy.Interceptor{{Name: "guards", URL: url, Timeout: "300ms"}}, Options{})
	defer c.Close()
	if errs := c.Discover(context.Background()); len(errs) > 0 {
		t.Fatal(errs)
	}
	ctx := context.Background()

	// Request: mutators by priority then name (mark-a before mark-b at 5),
	// then the validators.
	got, out := c.Run(ctx, "tools/call", PhaseRequest, json.RawMessage(`{"name":"q","arguments":{"sql":"select 1"}}`), nil)
	if out.Blocked || !strings.Contains(string(got), `"marks":["mark-a","mark-b"]`) {
		t.Errorf("request = %s %+v, want mark-a then mark-b", got, out)
	}
	if len(out.Ran) != 4 {
		t.Errorf("%d interceptors ran, want 4 (2 mutators, 2 validators): %+v", len(out.Ran), out.Ran)
	}

	// A validator blocks, with its message.
	_, out = c.Run(ctx, "tools/call", PhaseRequest, json.RawMessage(`{"arguments":{"sql":"DROP TABLE x"}}`), nil)
	want := `This call was refused by interceptor "no-drop": params.arguments.sql: statements that drop tables are not allowed`
	if !out.Blocked || out.Message != want || out.By != "guards/no-drop" {
		t.Errorf("DROP: %+v, want blocked with %q", out, want)
	}

	// One that does not answer in time blocks (fail closed).
	_, out = c.Run(ctx, "tools/call", PhaseRequest, json.RawMessage(`{"arguments":{"sql":"slow"}}`), nil)
	want = `This call was refused: interceptor "slow" of the project's policy did not answer in time (300ms).`
	if !out.Blocked || out.Message != want {
		t.Errorf("slow: %+v, want blocked with %q", out, want)
	}

	// Response: mark-b (-5) before redact-emails (10); mark-a is request only.
	got, out = c.Run(ctx, "tools/call", PhaseResponse, json.RawMessage(`{"content":[{"type":"text","text":"mail bob@example.com"}]}`), nil)
	if out.Blocked || !strings.Contains(string(got), `mail [email]`) || !strings.Contains(string(got), `"marks":["mark-b"]`) {
		t.Errorf("response = %s %+v", got, out)
	}

	// An event nothing hooks passes untouched.
	in := json.RawMessage(`{"x":1}`)
	if got, out := c.Run(ctx, "prompts/get", PhaseResponse, in, nil); out.Blocked || string(got) != string(in) || len(out.Ran) != 0 {
		t.Errorf("prompts/get = %s %+v, want untouched", got, out)
	}
}

func TestChainAuditAndFailOpen(t *testing.T) {
	url := guards(t)
	ctx := context.Background()
	audit := New([]policy.Interceptor{{Name: "guards", URL: url, Mode: policy.Audit}}, Options{})
	defer audit.Close()
	in := json.RawMessage(`{"arguments":{"sql":"DROP TABLE x"}}`)
	got, out := audit.Run(ctx, "tools/call", PhaseRequest, in, nil)
	if out.Blocked || string(got) != string(in) {
		t.Errorf("audit mode: %s %+v, want the payload untouched and not blocked", got, out)
	}
	if len(out.Audit) != 3 || out.Audit[2].Effect != "block" || !strings.Contains(out.Audit[2].Detail, "drop tables") {
		t.Errorf("audit findings = %+v, want two shadow rewrites and one block", out.Audit)
	}

	// A server that is not there: fail closed, unless failOpen.
	gone := "http://" + testenv.RefusingAddr(t) + "/mcp"
	closed := New([]policy.Interceptor{{Name: "gone", URL: gone}}, Options{})
	defer closed.Close()
	_, out = closed.Run(ctx, "tools/call", PhaseRequest, in, nil)
	if want := `This call was refused: the interceptor server "gone" of the project's policy could not be reached.`; !out.Blocked || out.Message != want {
		t.Errorf("a server that is gone: %+v, want %q", out, want)
	}
	open := New([]policy.Interceptor{{Name: "gone", URL: gone, FailOpen: true}}, Options{})
	defer open.Close()
	if got, out := open.Run(ctx, "tools/call", PhaseRequest, in, nil); out.Blocked || string(got) != string(in) {
		t.Errorf("failOpen: %s %+v, want it through", got, out)
	}
}

// Hooked says whether an event needs its payload at all: when an
// interceptor hooks it, or a server that cannot be listed would block it.
func TestChainHooks(t *testing.T) {
	ctx := context.Background()
	requests := interceptorServer(t, []Info{{Name: "no-drop", Type: Validation, Hook: Hook{Events: []string{"tools/call"}, Phase: PhaseRequest}}},
		func(*InvokeParams) (*InvokeResult, error) { return &InvokeResult{Valid: yes()}, nil })
	gone := "http://" + testenv.RefusingAddr(t) + "/mcp"
	for _, tc := range []struct {
		name            string
		entries         []policy.Interceptor
		request, result bool
	}{
		{"requests only", []policy.Interceptor{{Name: "req", URL: requests}}, true, false},
		{"both phases", []policy.Interceptor{{Name: "guards", URL: guards(t)}}, true, true},
		{"gone, fail closed", []policy.Interceptor{{Name: "gone", URL: gone}}, true, true},
		{"gone, failOpen", []policy.Interceptor{{Name: "gone", URL: gone, FailOpen: true}, {Name: "req", URL: requests}}, true, false},
		{"none", nil, false, false},
	} {
		c := New(tc.entries, Options{})
		if got := c.Hooked(ctx, "tools/call", PhaseRequest) != nil; got != tc.request {
			t.Errorf("%s: hooked on (tools/call, request) = %v, want %v", tc.name, got, tc.request)
		}
		if got := c.Hooked(ctx, "tools/call", PhaseResponse) != nil; got != tc.result {
			t.Errorf("%s: hooked on (tools/call, response) = %v, want %v", tc.name, got, tc.result)
		}
		c.Close()
	}
	var none *Chain
	if none.Hooked(ctx, "tools/list", PhaseResponse) != nil {
		t.Error("a nil chain hooks tools/list")
	}
}

// A closed chain (its policy version replaced a minute ago) opens no new
// session for a call still running on it, and that call fails closed.
func TestChainClosedOpensNoSession(t *testing.T) {
	ctx := context.Background()
	var inits atomic.Int32
	inner := guards(t)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"method":"initialize"`) {
			inits.Add(1)
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, inner+r.URL.Path, strings.NewReader(string(body)))
		req.Header = r.Header.Clone()
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		for k, v := range res.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(res.StatusCode)
		io.Copy(w, res.Body)
	}))
	defer proxy.Close()
	c := New([]policy.Interceptor{{Name: "guards", URL: proxy.URL}}, Options{})
	if errs := c.Discover(ctx); len(errs) > 0 {
		t.Fatal(errs)
	}
	c.Close()
	_, out := c.Run(ctx, "tools/call", PhaseRequest, json.RawMessage(`{"arguments":{"sql":"SELECT 1"}}`), nil)
	if !out.Blocked {
		t.Errorf("a call on a closed chain: %+v, want it refused (fail closed)", out)
	}
	if n := inits.Load(); n != 1 {
		t.Errorf("the server saw %d sessions start, want 1 (none after the chain closed)", n)
	}
}

// An entry without a name is named by its URL's host in what callers
// read: the rest of its URL (a token in the query, say) is not theirs.
func TestChainUnnamedServerByHost(t *testing.T) {
	addr := testenv.RefusingAddr(t)
	c := New([]policy.Interceptor{{URL: "http://ops:pw@" + addr + "/mcp/guard?token=s3cret"}}, Options{})
	defer c.Close()
	_, out := c.Run(context.Background(), "tools/call", PhaseRequest, json.RawMessage(`{}`), nil)
	want := fmt.Sprintf("This call was refused: the interceptor server %q of the project's policy could not be reached.", addr)
	if !out.Blocked || out.Message != want || out.By != addr {
		t.Errorf("an unnamed server that is gone: %+v, want blocked by %q with %q", out, addr, want)
	}
}

// The entry's headers reach the server (a token for it, say).
func TestChainHeaders(t *testing.T) {
	var seen string
	inner := guards(t)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen == "" {
			seen = r.Header.Get("Authorization")
		}
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, inner+r.URL.Path, r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			w.Write(buf[:n])
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			if err != nil {
				return
			}
		}
	}))
	defer proxy.Close()
	c := New([]policy.Interceptor{{Name: "guards", URL: proxy.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}}}, Options{})
	defer c.Close()
	if errs := c.Discover(context.Background()); len(errs) > 0 || seen != "Bearer s3cret" {
		t.Errorf("discover: %v, header seen %q", errs, seen)
	}
}

// TestHeadersNotSentOnRedirect: an interceptor server's headers (its
// credentials) go to its own origin only. A server that redirects a
// request elsewhere is not followed there, and the event fails closed.
func TestHeadersNotSentOnRedirect(t *testing.T) {
	target := guards(t)
	leaked := make(chan string, 10)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Authorization"); v != "" {
			leaked <- v
		}
		http.Redirect(w, r, target+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(other.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		to := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
		http.Redirect(w, r, to+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	c := New([]policy.Interceptor{{Name: "guards", URL: redirector.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}}}, Options{})
	defer c.Close()
	errs := c.Discover(context.Background())
	select {
	case v := <-leaked:
		t.Errorf("another origin got the interceptor server's header %q", v)
	default:
	}
	if len(errs) == 0 {
		t.Error("a server that redirects to another origin was listed")
	}
	if _, out := c.Run(context.Background(), "tools/call", PhaseRequest, json.RawMessage(`{"arguments":{}}`), nil); !out.Blocked {
		t.Errorf("an event through a redirecting server = %+v, want it refused", out)
	}
}

// TestAnswerSizeBounded: an interceptor server's answer is read up to
// maxAnswerBytes; a larger one fails the event closed instead of being
// held in memory whole.
func TestAnswerSizeBounded(t *testing.T) {
	huge := json.RawMessage(`"` + strings.Repeat("x", maxAnswerBytes) + `"`)
	url := interceptorServer(t, []Info{{Name: "grow", Type: Mutation, Hook: Hook{Events: []string{"tools/call"}, Phase: PhaseRequest}}},
		func(p *InvokeParams) (*InvokeResult, error) {
			return &InvokeResult{Modified: yes(), Payload: huge}, nil
		})
	c := New([]policy.Interceptor{{Name: "big", URL: url, Timeout: "10s"}}, Options{})
	defer c.Close()
	if errs := c.Discover(context.Background()); len(errs) > 0 {
		t.Fatal(errs)
	}
	got, out := c.Run(context.Background(), "tools/call", PhaseRequest, json.RawMessage(`{"arguments":{}}`), nil)
	if !out.Blocked || len(got) > 0 {
		t.Errorf("an answer over %d bytes = %d bytes, %+v; want the event refused", maxAnswerBytes, len(got), out.Message)
	}
}
