package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// The agent-protocol transcripts in internal/agentproto/testdata/transcripts
// are played here against the Go SDK, and by sdk/node/test/transcript.test.mjs
// against the Node SDK; see the README there for the format.

const transcriptDir = "../internal/agentproto/testdata/transcripts"

// step is one section of a transcript.
type step struct {
	kind string
	body string
}

// parseTranscript reads the txtar sections of a transcript.
func parseTranscript(data string) ([]step, error) {
	var steps []step
	for _, line := range strings.SplitAfter(data, "\n") {
		trimmed := strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			steps = append(steps, step{kind: strings.TrimSpace(trimmed[3 : len(trimmed)-3])})
			continue
		}
		if len(steps) > 0 {
			steps[len(steps)-1].body += line
		}
	}
	for i, s := range steps {
		steps[i].body = strings.TrimSpace(s.body)
		switch s.kind {
		case "register", "gateway", "agent", "do", "drop", "closed":
		default:
			return nil, fmt.Errorf("step %d: unknown section %q", i+1, s.kind)
		}
	}
	return steps, nil
}

// contains reports where got does not contain want: objects need at least
// want's keys, arrays want's length, other values equality.
func contains(want, got any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: got %v, want an object", path, got)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Sprintf("%s.%s: missing", path, k)
			}
			if d := contains(wv, gv, path+"."+k); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: got %v, want %d items", path, got, len(w))
		}
		for i := range w {
			if d := contains(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Sprintf("%s: got %v, want %v", path, got, want)
	}
	return ""
}

func decodeJSON(t *testing.T, what, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s is not JSON: %v: %s", what, err, s)
	}
	return v
}

// transcriptAgent registers the tools every transcript expects.
func transcriptAgent(t *testing.T, a *Agent) {
	t.Helper()
	type echoIn struct {
		Text string `json:"text"`
	}
	must(t, AddTool(a, "echo", "Returns its text.", func(_ context.Context, in echoIn) (string, error) { return in.Text, nil }))
	must(t, AddTool(a, "fail", "Fails.", func(context.Context, emptyIn) (string, error) {
		return "", errors.New("it failed: ask again later")
	}))
	must(t, AddTool(a, "wait", "Waits until cancelled.", func(ctx context.Context, _ emptyIn) (string, error) {
		<-ctx.Done()
		return "", context.Cause(ctx)
	}))
	must(t, AddTool(a, "sleep", "Sleeps 300 ms.", func(context.Context, emptyIn) (string, error) {
		time.Sleep(300 * time.Millisecond)
		return "slept", nil
	}))
	must(t, AddTool(a, "shaped", "Returns a shaped result.", func(context.Context, emptyIn) (any, error) {
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": "shaped"}}, "isError": true}, nil
	}))
}

func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(transcriptDir, "*.txtar"))
	must(t, err)
	if len(files) == 0 {
		t.Fatal("no transcripts in " + transcriptDir)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			must(t, err)
			steps, err := parseTranscript(string(data))
			must(t, err)
			playTranscript(t, steps)
		})
	}
}

// playTranscript plays the gateway's side of steps against a Go agent.
func playTranscript(t *testing.T, steps []step) {
	type registration struct {
		body  []byte
		reply chan string // the ticket
	}
	regs := make(chan registration)
	conns := make(chan *websocket.Conn, 4)
	done := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+agentproto.RegisterPath, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		reg := registration{body, make(chan string, 1)}
		select {
		case regs <- reg:
		case <-done:
			http.Error(w, "The transcript is over.", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(agentproto.Ticket{Ticket: <-reg.reply, ExpiresInMs: 30000})
	})
	mux.HandleFunc("GET "+agentproto.ConnectPath, func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		conns <- ws
		select {
		case <-done:
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(done)

	a, err := New(Options{APIKey: testKey, URL: srv.URL, Logger: discard()})
	must(t, err)
	transcriptAgent(t, a)
	stop := func() {}
	started := false
	var ws *websocket.Conn
	msgs := make(chan []byte, 64)
	readErr := make(chan error, 1)
	current := func() *websocket.Conn {
		t.Helper()
		if ws != nil {
			return ws
		}
		select {
		case ws = <-conns:
		case <-time.After(waitFor):
			t.Fatal("the agent did not connect")
		}
		c, m, e := ws, make(chan []byte, 64), make(chan error, 1)
		msgs, readErr = m, e
		go func() {
			for {
				_, data, err := c.Read(context.Background())
				if err != nil {
					e <- err
					return
				}
				m <- data
			}
		}()
		return ws
	}
	n := 0
	for i, s := range steps {
		where := fmt.Sprintf("step %d (%s)", i+1, s.kind)
		if s.kind == "register" && !started {
			stop = run(t, a)
			started = true
		}
		switch s.kind {
		case "register":
			var reg registration
			select {
			case reg = <-regs:
			case <-time.After(waitFor):
				t.Fatalf("%s: the agent did not register", where)
			}
			n++
			reg.reply <- fmt.Sprintf("t-%d", n)
			if d := contains(decodeJSON(t, where, s.body), decodeJSON(t, "the registration", string(reg.body)), "registration"); d != "" {
				t.Fatalf("%s: %s\nbody: %s", where, d, reg.body)
			}
			ws = nil
		case "gateway":
			if err := current().Write(context.Background(), websocket.MessageText, []byte(s.body)); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			var m agentproto.Message
			if json.Unmarshal([]byte(s.body), &m) == nil && m.Type == agentproto.TypeGoodbye {
				ws.Close(websocket.StatusGoingAway, "goodbye")
			}
		case "agent":
			current()
			select {
			case data := <-msgs:
				if d := contains(decodeJSON(t, where, s.body), decodeJSON(t, "the agent's message", string(data)), "message"); d != "" {
					t.Fatalf("%s: %s\ngot: %s", where, d, data)
				}
			case err := <-readErr:
				t.Fatalf("%s: the connection ended: %v", where, err)
			case <-time.After(waitFor):
				t.Fatalf("%s: no message from the agent", where)
			}
		case "do":
			doAction(t, where, a, s.body, stop)
		case "drop":
			current().CloseNow()
		case "closed":
			current()
			select {
			case data := <-msgs:
				t.Fatalf("%s: got %s, want the connection closed", where, data)
			case err := <-readErr:
				if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
					t.Fatalf("%s: the connection ended with %v, want a normal closure", where, err)
				}
			case <-time.After(waitFor):
				t.Fatalf("%s: the agent did not close the connection", where)
			}
		}
	}
}

// doAction does what a "do" step says.
func doAction(t *testing.T, where string, a *Agent, line string, stop func()) {
	t.Helper()
	f := strings.Fields(line)
	switch {
	case len(f) == 3 && f[0] == "setEnabled" && (f[2] == "on" || f[2] == "off"):
		must(t, a.SetEnabled(f[1], f[2] == "on"))
	case len(f) == 1 && f[0] == "stop":
		go stop()
	default:
		t.Fatalf("%s: unknown action %q", where, line)
	}
}
