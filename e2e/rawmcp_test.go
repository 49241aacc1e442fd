package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawSession is a 2025-11-25 session driven with plain HTTP POSTs, the way
// clients that never open the GET stream use it.
type rawSession struct {
	t      *testing.T
	url    string
	key    string
	id     string
	client *http.Client
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// rawPost sends one JSON-RPC body to /mcp with the headers a client sends.
func rawPost(ctx context.Context, client *http.Client, url, key, session, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/mcp", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	return client.Do(req)
}

// newRawSession initializes a session with key and returns it.
func (e *env) newRawSession(key string) *rawSession {
	e.t.Helper()
	return e.newRawSessionWith(key, initializeBody)
}

// newRawSessionWith initializes a session with key and the initialize
// request init, and returns it.
func (e *env) newRawSessionWith(key, init string) *rawSession {
	e.t.Helper()
	s := &rawSession{t: e.t, url: e.url, key: key, client: &http.Client{Transport: &http.Transport{}}}
	e.t.Cleanup(s.client.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rawPost(ctx, s.client, s.url, key, "", init)
	if err != nil {
		e.t.Fatal(err)
	}
	msg := answer(e.t, resp)
	s.id = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || s.id == "" {
		e.t.Fatalf("initialize: %d %s, session %q", resp.StatusCode, msg, s.id)
	}
	resp, err = rawPost(ctx, s.client, s.url, key, s.id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return s
}

// post sends a body in the session and returns the response.
func (s *rawSession) post(ctx context.Context, body string) (*http.Response, error) {
	return rawPost(ctx, s.client, s.url, s.key, s.id, body)
}

// call sends a tools/call and returns the answer's JSON (or the body of a
// response that is not an SSE stream) and the status.
func (s *rawSession) call(id int, name, args string) (int, string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := s.post(ctx, toolCall(id, name, args))
	if err != nil {
		s.t.Fatal(err)
	}
	return resp.StatusCode, answer(s.t, resp)
}

func toolCall(id int, name, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args)
}

// answer reads a response: the data of the SSE event that answers the
// request (notifications skipped), or the whole body when it is not SSE.
func answer(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(b))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if ok && !strings.Contains(data, `"method":`) {
			return data
		}
	}
	return ""
}
