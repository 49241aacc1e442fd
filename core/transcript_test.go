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
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

// The agent-protocol transcripts in core/internal/agentproto/testdata/transcripts
// are played here against the Go SDK, and by sdk/node/test/transcript.test.mjs
// against the Node SDK; see the README there for the format. The same
// player is the only gateway core's tests talk to: tests that look inside
// the agent (a handler's context, the log) play a transcript of their own
// with actions of their own (see [player.play]).

const transcriptDir = "internal/agentproto/testdata/transcripts"

// step is one section of a transcript.
type step struct {
	kind string
	body string
	// check, when set on an "agent" step, replaces the containment check
	// of its body: for Go tests that compare bytes exactly.
	check func(t *testing.T, data []byte)
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
		case "register", "refuse", "gateway", "agent", "do", "drop", "deaf", "closed":
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
	must(t, AddTool(a, "sleep", "Sleeps 300 ms.", func(ctx context.Context, _ emptyIn) (string, error) {
		Progress(ctx, "sleeping")
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
			p := newPlayer(t)
			a, err := New(Options{APIKey: testKey, URL: p.url(), Logger: discard()})
			must(t, err)
			transcriptAgent(t, a)
			p.play(a, steps, nil)
		})
	}
}

// script parses an inline transcript of a test.
func script(t *testing.T, txt string) []step {
	t.Helper()
	steps, err := parseTranscript(txt)
	must(t, err)
	return steps
}

// welcome is the gateway's welcome message of replica r with heartbeat ms.
func welcome(r string, heartbeatMs int) string {
	return fmt.Sprintf(`{"type":"welcome","welcome":{"protocol":1,"replica":%q,"project":"p-test","agent":"key-test","callWaitMs":30000,"heartbeatMs":%d}}`, r, heartbeatMs)
}

// registration is one registration request waiting for the player's answer.
type registration struct {
	body  []byte
	reply chan regReply
}

// regReply answers a registration: a ticket, or a refusal when status is set.
type regReply struct {
	status int
	text   string
}

// player plays the gateway's side of transcripts against one agent.
type player struct {
	t     *testing.T
	srv   *httptest.Server
	regs  chan registration
	conns chan *websocket.Conn
	done  chan struct{}

	mu      sync.Mutex
	bodies  []json.RawMessage             // every registration body, in order
	tickets map[string]bool               // issued, not yet used
	calls   map[string]agentproto.Message // call messages sent, by id

	// The current connection; only play's goroutine uses these.
	ws      *websocket.Conn
	frames  chan frame // what the reader read, in order; an error last
	reading bool
	deaf    bool
	stop    func()
}

// newPlayer starts a player's HTTP server; it stops when the test ends.
func newPlayer(t *testing.T) *player {
	p := &player{t: t, regs: make(chan registration), conns: make(chan *websocket.Conn, 4), done: make(chan struct{}),
		tickets: map[string]bool{}, calls: map[string]agentproto.Message{}, stop: func() {}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+agentproto.RegisterPath, p.register)
	mux.HandleFunc("GET "+agentproto.ConnectPath, p.connect)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(p.done)
		p.srv.CloseClientConnections()
		p.srv.Close()
	})
	return p
}

func (p *player) url() string { return p.srv.URL }

// registrations returns the registration bodies received so far.
func (p *player) registrations() []json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.bodies)
}

// sent returns the call message with id that the player sent.
func (p *player) sent(id string) agentproto.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[id]
}

func (p *player) register(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+testKey {
		http.Error(w, "Unknown agent key.", http.StatusUnauthorized)
		return
	}
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.bodies = append(p.bodies, body)
	n := len(p.bodies)
	p.mu.Unlock()
	reg := registration{body, make(chan regReply, 1)}
	select {
	case p.regs <- reg:
	case <-p.done:
		http.Error(w, "The transcript is over.", http.StatusServiceUnavailable)
		return
	}
	if ans := <-reg.reply; ans.status != 0 {
		http.Error(w, ans.text, ans.status)
		return
	}
	ticket := fmt.Sprintf("t-%d", n)
	p.mu.Lock()
	p.tickets[ticket] = true
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(agentproto.Ticket{Ticket: ticket, ExpiresInMs: 30000})
}

func (p *player) connect(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	p.mu.Lock()
	ok := p.tickets[ticket]
	delete(p.tickets, ticket)
	p.mu.Unlock()
	if !ok || r.Header.Get("Authorization") != "Bearer "+testKey {
		http.Error(w, "Unknown or used ticket.", http.StatusUnauthorized)
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(agentproto.MaxFrameBytes)
	p.conns <- ws
	select {
	case <-p.done:
	case <-r.Context().Done():
	}
}

// current returns the connection the agent made after its latest
// registration, waiting for it.
func (p *player) current(where string) *websocket.Conn {
	p.t.Helper()
	if p.ws == nil {
		select {
		case p.ws = <-p.conns:
		case <-time.After(waitFor):
			p.t.Fatalf("%s: the agent did not connect", where)
		}
		p.reading = false
	}
	return p.ws
}

// read starts reading the current connection, once: from then on the
// gateway answers pings, and the agent's messages queue for "agent" steps.
func (p *player) read(where string) {
	c := p.current(where)
	if p.reading {
		return
	}
	p.reading = true
	frames := make(chan frame, 256)
	p.frames = frames
	go func() {
		for {
			_, data, err := c.Read(context.Background())
			frames <- frame{data, err}
			if err != nil {
				return
			}
		}
	}()
}

// frame is one message the agent sent, or why reading ended.
type frame struct {
	data []byte
	err  error
}

// next returns the agent's next frame on the current connection.
func (p *player) next(where string) frame {
	p.t.Helper()
	p.read(where)
	select {
	case f := <-p.frames:
		return f
	case <-time.After(waitFor):
		p.t.Fatalf("%s: no message from the agent, and the connection is open", where)
		return frame{}
	}
}

// play plays steps against a, which must use [player.url] and [testKey].
// Run starts at the first register or refuse step, and stops when the
// test ends or at a "stop" action. A "do" line that is not a shared action
// (setEnabled, stop) is looked up in actions by its first word, and called
// with the rest of the line.
func (p *player) play(a *Agent, steps []step, actions map[string]func(arg string)) {
	t := p.t
	t.Helper()
	started := false
	for i, s := range steps {
		where := fmt.Sprintf("step %d (%s)", i+1, s.kind)
		if (s.kind == "register" || s.kind == "refuse") && !started {
			p.stop = run(t, a)
			started = true
		}
		switch s.kind {
		case "register", "refuse":
			p.answer(where, s)
		case "deaf":
			p.deaf = true
		case "gateway":
			p.send(where, s.body)
		case "agent":
			f := p.next(where)
			switch {
			case f.err != nil:
				t.Fatalf("%s: the connection ended: %v", where, f.err)
			case s.check != nil:
				s.check(t, f.data)
			default:
				if d := contains(decodeJSON(t, where, s.body), decodeJSON(t, "the agent's message", string(f.data)), "message"); d != "" {
					t.Fatalf("%s: %s\ngot: %s", where, d, f.data)
				}
			}
		case "do":
			p.do(where, a, s.body, actions)
		case "drop":
			p.current(where).CloseNow()
		case "closed":
			f := p.next(where)
			switch {
			case f.err == nil:
				t.Fatalf("%s: got %s, want the connection closed", where, f.data)
			case websocket.CloseStatus(f.err) != websocket.StatusNormalClosure:
				t.Fatalf("%s: the connection ended with %v, want a normal closure", where, f.err)
			}
			var ce websocket.CloseError
			if errors.As(f.err, &ce) && s.body != "" && ce.Reason != s.body {
				t.Fatalf("%s: closed with reason %q, want %q", where, ce.Reason, s.body)
			}
		}
	}
}

// answer waits for the agent's registration and answers it as a register
// or refuse step s says.
func (p *player) answer(where string, s step) {
	t := p.t
	t.Helper()
	var reg registration
	select {
	case reg = <-p.regs:
	case <-time.After(waitFor):
		t.Fatalf("%s: the agent did not register", where)
	}
	if s.kind == "refuse" {
		status, text, _ := strings.Cut(s.body, " ")
		code, err := strconv.Atoi(status)
		if err != nil {
			t.Fatalf("%s: want a status and a text, got %q", where, s.body)
		}
		reg.reply <- regReply{status: code, text: text}
		return
	}
	reg.reply <- regReply{}
	if d := contains(decodeJSON(t, where, s.body), decodeJSON(t, "the registration", string(reg.body)), "registration"); d != "" {
		t.Fatalf("%s: %s\nbody: %s", where, d, reg.body)
	}
	p.ws, p.deaf = nil, false
}

// send writes a gateway step's message on the current connection. A call's
// "deadline" may be relative, "+100ms": the player makes it absolute.
func (p *player) send(where, body string) {
	t := p.t
	t.Helper()
	ws := p.current(where)
	if !p.deaf {
		p.read(where)
	}
	body = p.absoluteDeadline(where, body)
	var m agentproto.Message
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("%s: not a message: %v: %s", where, err, body)
	}
	if m.Type == agentproto.TypeCall {
		p.mu.Lock()
		p.calls[m.ID] = m
		p.mu.Unlock()
	}
	if err := ws.Write(context.Background(), websocket.MessageText, []byte(body)); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if m.Type == agentproto.TypeGoodbye {
		ws.Close(websocket.StatusGoingAway, "goodbye")
	}
}

// absoluteDeadline turns a relative "deadline" ("+100ms") into Unix
// milliseconds from now.
func (p *player) absoluteDeadline(where, body string) string {
	var rel struct {
		Deadline any `json:"deadline"`
	}
	if json.Unmarshal([]byte(body), &rel) != nil {
		return body
	}
	s, ok := rel.Deadline.(string)
	if !ok {
		return body
	}
	d, err := time.ParseDuration(strings.TrimPrefix(s, "+"))
	if err != nil || !strings.HasPrefix(s, "+") {
		p.t.Fatalf("%s: deadline %q: want a number or +duration", where, s)
	}
	var raw map[string]json.RawMessage
	must(p.t, json.Unmarshal([]byte(body), &raw))
	raw["deadline"] = json.RawMessage(strconv.FormatInt(time.Now().Add(d).UnixMilli(), 10))
	b, err := json.Marshal(raw)
	must(p.t, err)
	return string(b)
}

// do does what a "do" step says.
func (p *player) do(where string, a *Agent, line string, actions map[string]func(string)) {
	t := p.t
	t.Helper()
	f := strings.Fields(line)
	switch {
	case len(f) == 3 && f[0] == "setEnabled" && (f[2] == "on" || f[2] == "off"):
		must(t, a.SetEnabled(f[1], f[2] == "on"))
	case len(f) == 1 && f[0] == "stop":
		go p.stop()
	case len(f) > 0 && actions[f[0]] != nil:
		actions[f[0]](strings.TrimSpace(strings.TrimPrefix(line, f[0])))
	default:
		t.Fatalf("%s: unknown action %q", where, line)
	}
}

// newTestAgent returns an agent pointed at p, logging to a recorder.
func newTestAgent(t *testing.T, p *player) (*Agent, *logRecorder) {
	t.Helper()
	rec := newLogRecorder()
	a, err := New(Options{APIKey: testKey, URL: p.url(), Logger: slogFor(rec)})
	must(t, err)
	return a, rec
}

// connected is the start of most inline transcripts: the agent registers
// and the gateway welcomes it as replica r-1 (heartbeat every 5 s).
var connected = `
-- register --
{"protocol":1}
-- gateway --
` + welcome("r-1", 5000) + "\n"

// actions is the set of a test's own "do" actions, by first word.
type actions = map[string]func(arg string)
