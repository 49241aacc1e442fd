package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGoSDKWire holds gosdkwire.go to go-sdk's own output: a plain go-sdk
// server answers a tools/call at each era with results of every shape the
// early path writes (text with characters JSON may escape, structured
// content, an error, an empty one) and a progress notification before each,
// and the early path's framing of the same result and notification must be
// the same bytes under the same headers. When a go-sdk upgrade changes its
// framing, this test names what changed.
func TestGoSDKWire(t *testing.T) {
	results := map[string]*mcp.CallToolResult{
		"text": {Content: []mcp.Content{&mcp.TextContent{Text: `<b> & "quotes" é`}}},
		"structured": {
			Content:           []mcp.Content{&mcp.TextContent{Text: `{"id":"1042"}`}},
			StructuredContent: map[string]any{"id": "1042", "html": "<a>"},
		},
		"error": {Content: []mcp.Content{&mcp.TextContent{Text: "no order"}}, IsError: true},
		"empty": {},
		"meta":  {Content: []mcp.Content{&mcp.TextContent{Text: "x"}}, Meta: mcp.Meta{"k": "v"}},
	}
	impl := &mcp.Implementation{Name: "spacefix", Title: "Spacefix", Version: "test"}
	server := mcp.NewServer(impl, nil)
	for name, res := range results {
		server.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if tok := req.Params.GetProgressToken(); tok != nil {
					req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "half <done>"})
				}
				// go-sdk sets the result type and server identity on
				// the result it is given: a copy each time.
				c := *res
				c.Meta = maps.Clone(res.Meta)
				return &c, nil
			})
	}
	progress, err := Notification("notifications/progress", &mcp.ProgressNotificationParams{ProgressToken: "p", Progress: 1, Message: "half <done>"})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("2026-07-28", func(t *testing.T) {
		srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
			&mcp.StreamableHTTPOptions{Stateless: true}))
		defer srv.Close()
		for name, res := range results {
			body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + name + `","arguments":{},` +
				`"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
				`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
			got, h := post(t, srv.URL, body, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name})
			enc, err := EncodeResult(res, true, impl)
			if err != nil {
				t.Fatal(err)
			}
			want := append(SSEEvent(progress), SSEEvent(ResultMessage([]byte("7"), enc))...)
			compareWire(t, name, got, want, h)
		}
	})

	t.Run("2025-11-25 session", func(t *testing.T) {
		srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
		defer srv.Close()
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
		_, h := post(t, srv.URL, init, nil)
		sid := h.Get("Mcp-Session-Id")
		if sid == "" {
			t.Fatal("go-sdk made no session")
		}
		defer func() { // end the session, and its goroutines
			req, _ := http.NewRequest(http.MethodDelete, srv.URL, nil)
			req.Header.Set("Mcp-Session-Id", sid)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		post(t, srv.URL, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"})
		for name, res := range results {
			body := `{"jsonrpc":"2.0","id":"c-7","method":"tools/call","params":{"name":"` + name + `","arguments":{},"_meta":{"progressToken":"p"}}}`
			got, h := post(t, srv.URL, body, map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"})
			enc, err := EncodeResult(res, false, impl)
			if err != nil {
				t.Fatal(err)
			}
			want := append(SSEEvent(progress), SSEEvent(ResultMessage([]byte(`"c-7"`), enc))...)
			compareWire(t, name, got, want, h)
		}
	})
}

// compareWire fails unless go-sdk's answer got, with headers h, is want
// under the headers sseHeaders sets. go-sdk may number its events (an id:
// line, for resuming): those lines are left out of the comparison, as the
// early path's streams cannot be resumed.
func compareWire(t *testing.T, name string, got, want []byte, h http.Header) {
	t.Helper()
	var kept []string
	for _, line := range strings.SplitAfter(string(got), "\n") {
		if !strings.HasPrefix(line, "id: ") {
			kept = append(kept, line)
		}
	}
	if g := strings.Join(kept, ""); g != string(want) {
		t.Errorf("%s: go-sdk wrote\n%s\nthe early path writes\n%s", name, g, want)
	}
	wantH := http.Header{}
	SSEHeaders(wantH, "text/event-stream")
	for k := range wantH {
		if h.Get(k) != wantH.Get(k) {
			t.Errorf("%s: go-sdk's %s header is %q, the early path's %q", name, k, h.Get(k), wantH.Get(k))
		}
	}
}

// post sends one JSON-RPC message as a Streamable HTTP client does and
// returns the whole answer and its headers.
func post(t *testing.T, url, body string, headers map[string]string) ([]byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode >= 300 {
		t.Fatalf("POST %s: %s\n%s", body, resp.Status, bytes.TrimSpace(b))
	}
	return b, resp.Header
}
